"""The scoring package's report: the local scoring report's page, for every run, failed ones too.

An exit handler, as the training package's RunStatus is
(kubeflow/steps/run_status/component.py): KFP starts it after the scoring DAG has
ended, however it ended, and it takes no artifacts. It reads what the steps
recorded of themselves (kubeflow/steps/step_records.py): ExampleGen's
examples (span, input fingerprint) and BatchScorer's `scores` (status,
partition). The page is the one a local scoring run writes
(components/report/scoring_report.py): rows and errors read from the committed
partition, or from the uncommitted attempt a failed scorer's error names;
the version and digest; the score distribution beside the served model's
eval distribution. A run stopped before scoring says which step failed and
why, with the counts not known.

The model: the scorer's own, from its `scores` artifact when it succeeded,
or from the path of the attempt its error names. A run stopped before the
scorer wrote anything shows the served version (the rollout record's, else
the newest), chosen again here, and not a pinned `model_version`: TFX 1.16's
Kubeflow V2 compiler hands runtime parameters to the DAG's steps only
(`attach_parameter() must run under ParameterContext` for an exit handler).

Its output is a `system.HTML` page, shown in the step's Visualization tab.
The work is kubeflow/steps/scoring_report/executor.py's, which the step's pod runs
without TFX (kubeflow/light_step.py); this module declares it.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

from tfx.dsl.component.experimental.annotations import OutputArtifact, Parameter
from tfx.orchestration.kubeflow.decorators import exit_handler

from kubeflow.steps.kfp_artifacts import HTML
from kubeflow.steps.scoring_report.executor import write_scoring_run_report


@exit_handler
def ScoringReport(
    final_status: Parameter[str],
    pipeline_name: Parameter[str],
    steps: Parameter[str],
    task_name: Parameter[str],
    serving_model_dir: Parameter[str],
    rolled_out_record: Parameter[str],
    settings: Parameter[str],
    report: OutputArtifact[HTML],
):
    """Writes the scoring run's report at `report` (scoring_run_report.write_scoring_run_report)."""
    write_scoring_run_report(
        final_status,
        pipeline_name,
        steps,
        task_name,
        serving_model_dir,
        rolled_out_record,
        settings,
        report,
    )
