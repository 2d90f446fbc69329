"""The Kubeflow run's exit handler: a status report for every run, failed ones included.

KFP starts an exit handler after the DAG it guards has ended, however it
ended (open-source backend 2.14 and later: an Argo exit hook, with the DAG's
`PipelineTaskFinalStatus`). TFX's V2 compiler emits one for
`KubeflowV2DagRunner.set_exit_handler` (kubeflow/compile.py).

What open-source KFP hands it is thin: the DAG's state, no failed task and no
error message (the backend leaves `error` empty), and an exit handler may
take no artifacts. The steps fill the gap themselves: each attempt of each
step records how it ended beside its outputs (kubeflow/steps/
step_records.py, written by kubeflow/step_entrypoint.py). A final state
that says nothing of how the DAG ended (RUNNING, NEW, SKIPPED, none) is no
verdict: the records alone judge the run then. From those records
this step writes the run report, as a local run's report does after a
failure: which step failed and its error, every step's state (succeeded,
failed, interrupted, cached or not run), retried attempts, and the sections
of what did run: input, statistics, anomalies, drift, training, evaluation.

Its output is a `system.HTML` page, which the KFP UI shows in the step's
Visualization tab. The work is kubeflow/steps/run_status/executor.py's, which the
step's pod runs without TFX (kubeflow/light_step.py); this module declares it.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

from tfx.dsl.component.experimental.annotations import OutputArtifact, Parameter
from tfx.orchestration.kubeflow.decorators import exit_handler

from kubeflow.steps.kfp_artifacts import HTML
from kubeflow.steps.run_status.executor import write_status_report


@exit_handler
def RunStatus(
    final_status: Parameter[str],
    pipeline_name: Parameter[str],
    steps: Parameter[str],
    task_name: Parameter[str],
    report: OutputArtifact[HTML],
):
    """Writes the run's status report at `report` (status_report.write_status_report)."""
    write_status_report(final_status, pipeline_name, steps, task_name, report)
