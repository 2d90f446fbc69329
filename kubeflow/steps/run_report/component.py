"""The run report as the last step of a Kubeflow run, and the run's metrics for the KFP UI.

Locally, `local_runner.py` writes the report after the run from ML Metadata,
which also covers failed runs. A Kubeflow step cannot read KFP's metadata
store, so on Kubeflow this step builds the same report from the artifacts it
is handed: the examples' spans, statistics, anomalies, the drift check, the
Trainer's logs, the evaluation, the blessing and the push. It runs after
every other step has succeeded, so each of them is listed as complete;
per-step times are on the KFP run page. (A failed run gets its report from
the RunStatus exit handler, kubeflow/steps/run_status/component.py.)

Its two outputs are KFP's own types (kubeflow/steps/kfp_artifacts.py), so the
KFP UI shows them without a download: `report`, a `system.HTML` page in the
step's Visualization tab, and `metrics`, a `system.Metrics` of the
Evaluator's overall metrics, the served baseline's values and the blessing,
which the run comparison view charts across scheduled runs.

The work is kubeflow/steps/run_report/executor.py's, which the step's pod
runs without TFX (kubeflow/light_step.py); this module declares it.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

from dataclasses import dataclass
from typing import Any

from tfx import types
from tfx.dsl.component.experimental.annotations import (
    InputArtifact,
    OutputArtifact,
    Parameter,
)
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts

from components.gates.drift.artifact import DataDrift
from kubeflow.steps.deploy.component import Deployment
from kubeflow.steps.kfp_artifacts import HTML, Metrics
from kubeflow.steps.run_report.executor import write_run_report


@dataclass(frozen=True)
class _Read:
    """What the report reads of an input: training_run_report.InputFile."""

    uri: str
    custom_properties: "dict[str, Any]"


def _custom_value(artifact: types.Artifact, name: str) -> Any:
    """A custom property's value, a falsy JSON one included.

    TFX's Kubeflow entrypoint hands every input's custom property over as JSON
    (a Struct; kubeflow_v2_entrypoint_utils.py, lines 328-332), and tfx 1.16's
    `get_custom_property` returns None for a JSON value that is falsy (types/
    artifact.py, lines 752-754, `if json_value:`, then no int, double or string
    field): a blessing of 0 would read as no blessing, a `has_model` of 0 as
    none. `get_json_value_custom_property` (lines 768-782) returns it as it is.
    """
    if artifact.mlmd_artifact.custom_properties[name].HasField("struct_value"):
        return artifact.get_json_value_custom_property(name)
    return artifact.get_custom_property(name)


def _read(artifact: types.Artifact) -> _Read:
    """TFX's artifact as the report reads it: its URI and custom properties."""
    names = artifact.mlmd_artifact.custom_properties
    return _Read(artifact.uri, {name: _custom_value(artifact, name) for name in names})


# Each input is named after the output key that fills it, and the step
# registry's report roles (pipeline/steps.py) say which report field it is;
# KubeflowSteps.after wires them from the same roles. `component_ids` keeps
# its name: it is the compiled spec's parameter.
@component
def RunReport(
    examples: InputArtifact[standard_artifacts.Examples],
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
    drift: InputArtifact[DataDrift],
    model_run: InputArtifact[standard_artifacts.ModelRun],
    evaluation: InputArtifact[standard_artifacts.ModelEvaluation],
    blessing: InputArtifact[standard_artifacts.ModelBlessing],
    baseline_model: InputArtifact[standard_artifacts.Model],
    pushed_model: InputArtifact[standard_artifacts.PushedModel],
    report: OutputArtifact[HTML],
    metrics: OutputArtifact[Metrics],
    pipeline_name: Parameter[str],
    component_ids: Parameter[str],
    hyperparameters: Parameter[str],
    deployment: InputArtifact[Deployment] = None,
):
    """Writes the report page at `report` and the run's metrics on `metrics`
    (training_run_report.write_run_report)."""
    write_run_report(
        examples=_read(examples),
        statistics=_read(statistics),
        anomalies=_read(anomalies),
        drift=_read(drift),
        model_run=_read(model_run),
        evaluation=_read(evaluation),
        blessing=_read(blessing),
        baseline_model=_read(baseline_model),
        pushed_model=_read(pushed_model),
        report=report,
        metrics=metrics,
        pipeline_name=pipeline_name,
        component_ids=component_ids,
        hyperparameters=hyperparameters,
        deployment=_read(deployment) if deployment is not None else None,
    )
