"""The steps only a Kubeflow run has, added to the DAG by kubeflow/pipeline_steps.py.

* input_snapshot.py  InputSnapshot: the first step; fingerprints the input for KFP's cache key
* run_report.py      RunReport: the last step; the HTML run report and the KFP UI's metrics
* run_status.py      RunStatus: the exit handler; a report for every run, failed ones included
* step_records.py    what each attempt of each step records beside its outputs, for RunStatus
* kfp_artifacts.py   KFP's own artifact types (system.HTML, system.Metrics) as TFX types
* deploy.py          Deploy: the pushed version to a KServe InferenceService (with `serving:`)
"""
