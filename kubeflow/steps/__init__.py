"""The steps only a Kubeflow run has, added to the DAG by kubeflow/pipeline_steps.py.

* input_snapshot.py  InputSnapshot: the first step; fingerprints the input for KFP's cache key
* run_report.py      RunReport: the last step; the HTML run report and the KFP UI's metrics
* run_status.py      RunStatus: the exit handler; a report for every run, failed ones included
* status_report.py   its work, run without TFX's entrypoint (kubeflow/light_step.py)
* scoring_report.py  ScoringReport: the scoring package's exit handler
* scoring_run_report.py  its work, run without TFX's entrypoint
* step_records.py    what each attempt of each step records beside its outputs, for RunStatus
* kfp_artifacts.py   KFP's own artifact types (system.HTML, system.Metrics) as TFX types
* kfp_display.py     the name the KFP UI shows for an output, without TFX
* deploy.py          Deploy: the pushed version to a KServe InferenceService (with `serving:`)
* deployment.py      its work, run without TFX's entrypoint
"""
