"""The run report as the last step of a Kubeflow run, and the run's metrics for the KFP UI.

Locally, `local_runner.py` writes the report after the run from ML Metadata,
which also covers failed runs. A Kubeflow step cannot read KFP's metadata
store, so on Kubeflow this step builds the same report from the artifacts it
is handed: the examples' spans, statistics, anomalies, the drift check, the
Trainer's logs, the evaluation, the blessing and the push. It runs after
every other step has succeeded, so each of them is listed as complete;
per-step times are on the KFP run page. (A failed run gets its report from
the RunStatus exit handler, kubeflow/steps/run_status.py.)

Its two outputs are KFP's own types (kubeflow/steps/kfp_artifacts.py), so the
KFP UI shows them without a download: `report`, a `system.HTML` page in the
step's Visualization tab, and `metrics`, a `system.Metrics` of the
Evaluator's overall metrics, the served baseline's values and the blessing,
which the run comparison view charts across scheduled runs.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

import dataclasses
import json
import os

from absl import logging
from tfx import types
from tfx.dsl.component.experimental.annotations import (
    InputArtifact,
    OutputArtifact,
    Parameter,
)
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts
from tfx.utils import io_utils

from components.drift_artifact import DataDrift
from kubeflow.steps.deploy import Deployment
from kubeflow.steps.deployment import read_outcome
from kubeflow.steps.kfp_artifacts import HTML, Metrics
from kubeflow.steps.kfp_display import shown_as
from pipeline.steps import DAG_STEPS

# The prefix of the served baseline's value of a metric in `metrics`.
BASELINE_PREFIX = "baseline_"
BLESSED_METRIC = "blessed"


def artifact_properties(artifact: types.Artifact) -> "dict[str, object]":
    """An artifact's custom properties (what our executors and TFX's record), as plain values.

    TFX's Kubeflow entrypoint hands an input artifact's custom properties over
    as JSON values; `get_custom_property` decodes them.
    """
    values: dict[str, object] = {}
    for name in artifact.mlmd_artifact.custom_properties:
        value = artifact.get_custom_property(name)
        if isinstance(value, (int, float, str)):
            values[name] = value
    return values


def kfp_metrics(evaluation, blessed: "bool | None") -> "dict[str, float]":
    """The Evaluator's overall metrics, the baseline's values and the blessing, by name.

    Per-class metrics (multiclass) stay in the report: one chart line per
    class and metric would bury the gate metric in the run comparison.
    """
    values: dict[str, float] = {}
    if evaluation is not None:
        overall = [s for s in evaluation.slices if s.slice_name == "Overall"]
        for name, comparison in overall[0].metrics.items() if overall else ():
            if "(class" in name:
                continue
            if comparison.candidate is not None:
                values[name] = comparison.candidate
            if comparison.baseline is not None:
                values[BASELINE_PREFIX + name] = comparison.baseline
    if blessed is not None:
        values[BLESSED_METRIC] = 1.0 if blessed else 0.0
    return values


def deployment_metrics(outcome: "dict | None") -> "dict[str, float]":
    """The Deploy step's outcome as numbers (the KFP UI charts numbers only)."""
    if outcome is None:
        return {}
    values = {"deployed": 1.0 if outcome["outcome"] in ("created", "promoted", "canary") else 0.0}
    if outcome.get("version") and str(outcome["version"]).isdigit():
        values["serving_version"] = float(outcome["version"])
    traffic = outcome.get("traffic") or []
    latest = [t["percent"] for t in traffic if t.get("tag") == "latest"]
    if latest:
        values["new_version_traffic_percent"] = float(latest[0])
    return values


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
    """Writes the report page at `report` and the run's metrics on `metrics`.

    `hyperparameters` is the schema dir's frozen file as compiled
    (trainer/hyperparameters.py's `frozen_json`; `null` without one): its
    values and their data's age on the day this run reports. With the Deploy
    step (`serving:`), `deployment` is its outcome: shown on the page, and as
    `deployed`, `serving_version` and `canary_percent` metrics.
    """
    # Here, not at the top: the report's plotting imports are for this step only.
    from components.report import contents as report_contents
    from components.report.outputs import RunOutputs, report_fields
    from components.report.render import render_what_it_can
    from trainer.hyperparameters import frozen_from_json, report_rows

    inputs = {
        "examples": examples,
        "statistics": statistics,
        "anomalies": anomalies,
        "drift": drift,
        "model_run": model_run,
        "evaluation": evaluation,
        "blessing": blessing,
        "baseline_model": baseline_model,
        "pushed_model": pushed_model,
    }
    bare = report_contents.RunReport(
        pipeline_name=pipeline_name,
        # A Kubeflow step does not see its run's id; its output directory is unique per run.
        run_id=os.path.dirname(report.uri.rstrip("/")),
        steps=tuple(
            report_contents.StepRun(step, "succeeded") for step in json.loads(component_ids)
        ),
        notes=(
            "Written by the RunReport step after every other step succeeded; "
            "step times are on the Kubeflow run page.",
        ),
    )

    def build() -> report_contents.RunReport:
        fields = report_fields(
            RunOutputs.from_artifacts(
                {
                    role: (inputs[key].uri, artifact_properties(inputs[key]))
                    for role, (_step, key) in DAG_STEPS.report_outputs.items()
                }
            )
        )
        return dataclasses.replace(
            bare,
            hyperparameters=report_rows(frozen_from_json(hyperparameters)),
            deployment=read_outcome(deployment.uri) if deployment is not None else None,
            **fields,
        )

    # The model may be served already: a report that cannot be read or drawn
    # whole is written with what it can show, never failing the run.
    contents, html = render_what_it_can(build, bare)
    io_utils.write_string_file(report.uri, html)
    shown_as(report, "report")
    shown_as(metrics, "metrics")
    logging.info("Run report: %s (%d bytes)", report.uri, len(html))
    values = kfp_metrics(contents.evaluation, contents.blessed)
    values.update(deployment_metrics(contents.deployment))
    for name, value in sorted(values.items()):
        metrics.set_float_custom_property(name, value)
    logging.info("Metrics for the KFP UI: %s", json.dumps(values, sort_keys=True))
