"""The steps only a Kubeflow run has, added to the DAG by kubeflow/pipeline_steps.py.

Each step is a directory: `component.py` is the step as the DAG wires it, and
`executor.py` its work, which the step's pod runs without TFX's entrypoint
(kubeflow/light_step.py).

* input_snapshot/  InputSnapshot: the first step; fingerprints the input for KFP's cache key
* run_report/      RunReport: the last step; the HTML run report and the KFP UI's metrics
* run_status/      RunStatus: the exit handler; a report for every run, failed ones included
* scoring_report/  ScoringReport: the scoring package's exit handler
* deploy/          Deploy: the pushed version to a KServe InferenceService (with `serving:`)
* step_records.py  what each attempt of each step records beside its outputs, for RunStatus
* kfp_artifacts.py KFP's own artifact types (system.HTML, system.Metrics) as TFX types
* kfp_display.py   the name the KFP UI shows for an output, without TFX
"""
