"""The training run's report page and KFP metrics from its artifacts: the RunReport step's work.

kubeflow/steps/run_report/component.py declares the step for TFX (TFX's compiler, and
the executor the tests run locally); on Kubeflow its pod runs
`write_run_report` through kubeflow/light_step.py, without TFX's entrypoint,
TensorFlow or TFMA (docs/kubeflow.md, "What a step loads"). The sections are
read by the same readers as the RunStatus exit handler's
(components/report/outputs.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any, Protocol

from absl import logging

from components import store_files
from kubeflow.steps.deploy.executor import read_outcome
from kubeflow.steps.kfp_display import OutputFile, shown_as
from pipeline.steps import DAG_STEPS

# The prefix of the served baseline's value of a metric in `metrics`.
BASELINE_PREFIX = "baseline_"
BLESSED_METRIC = "blessed"


class InputFile(Protocol):
    """An input artifact the report reads: its URI, and its custom properties as values
    (kubeflow/light_step.py's artifact, or component.py's view of TFX's)."""

    @property
    def uri(self) -> str: ...

    @property
    def custom_properties(self) -> Mapping[str, Any]: ...


class MetricsFile(OutputFile, Protocol):
    def set_float_custom_property(self, key: str, value: float) -> None: ...


def plain_properties(artifact: InputFile) -> dict[str, object]:
    """An artifact's custom properties (what our executors and TFX's record) that are plain
    values: numbers and strings."""
    return {
        name: value
        for name, value in artifact.custom_properties.items()
        if isinstance(value, (int, float, str))
    }


def kfp_metrics(evaluation, blessed: bool | None) -> dict[str, float]:
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


def deployment_metrics(outcome: dict | None) -> dict[str, float]:
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


def write_run_report(
    examples: InputFile,
    statistics: InputFile,
    anomalies: InputFile,
    drift: InputFile,
    model_run: InputFile,
    evaluation: InputFile,
    blessing: InputFile,
    baseline_model: InputFile,
    pushed_model: InputFile,
    report: OutputFile,
    metrics: MetricsFile,
    pipeline_name: str,
    component_ids: str,
    hyperparameters: str,
    deployment: InputFile | None = None,
) -> None:
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
                    role: (inputs[key].uri, plain_properties(inputs[key]))
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
    store_files.write_text(report.uri, html)
    shown_as(report, "report")
    shown_as(metrics, "metrics")
    logging.info("Run report: %s (%d bytes)", report.uri, len(html))
    values = kfp_metrics(contents.evaluation, contents.blessed)
    values.update(deployment_metrics(contents.deployment))
    for name, value in sorted(values.items()):
        metrics.set_float_custom_property(name, value)
    logging.info("Metrics for the KFP UI: %s", json.dumps(values, sort_keys=True))
