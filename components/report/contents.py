"""What a run report shows, read from a run's own artifacts.

`RunReport` is what one run did; `read_artifacts` fills its sections from the
artifacts' URIs, each with its section's reader (components/report/
data_statistics.py, training.py, evaluation.py; the drift gate's result,
components/gates/drift/result.py). Each reader takes one artifact URI and returns
plain frozen dataclasses, so the same readers serve a local run (URIs found in ML
Metadata) and a Kubeflow step (URIs handed to it as input artifacts). Nothing
here renders anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from absl import logging

from components import store_files
from components.gates.drift.result import DriftResult, read_result
from components.report import tfma_records
from components.report.data_statistics import (
    Anomaly,
    SplitStatistics,
    read_anomalies,
    read_statistics,
)
from components.report.evaluation import OVERALL_SLICE, Evaluation, ThresholdCheck, read_evaluation
from components.report.training import TrainingCurves, read_resolved_runtime, read_training_curves


@dataclass(frozen=True)
class StepRun:
    """One step of the DAG in this run: its state, and when it ran (ms since the epoch)."""

    step_id: str
    state: str
    started_ms: int | None = None
    ended_ms: int | None = None

    @property
    def seconds(self) -> float | None:
        if self.started_ms is None or self.ended_ms is None:
            return None
        return (self.ended_ms - self.started_ms) / 1e3


@dataclass(frozen=True)
class InputData:
    """What ExampleGen read, as it recorded it on the examples artifact."""

    spans: tuple[int, ...]  # oldest first; the last is the artifact's `span`; () for no pattern
    version: int | None = None
    fingerprint: str = ""
    left_out: str = ""  # the line naming the span folders left out (no data, no marker)

    @classmethod
    def from_properties(cls, properties: dict[str, object]) -> InputData | None:
        """From the examples artifact's custom properties (None if it has no span).

        Without `spans` (no span pattern), ExampleGen read every file under the
        data root, and TFX records that as span 0.
        """
        if properties.get("span") is None:
            return None
        listed = str(properties.get("spans") or "")
        return cls(
            spans=tuple(int(s) for s in listed.split(",") if s),
            version=properties.get("version"),  # type: ignore[arg-type]
            fingerprint=str(properties.get("input_fingerprint") or ""),
            left_out=str(properties.get("left_out") or ""),
        )


@dataclass(frozen=True)
class RunReport:
    """What one run did: the local runner's summary and report, and both Kubeflow reports."""

    pipeline_name: str
    run_id: str
    steps: tuple[StepRun, ...]
    input: InputData | None = None
    drift: DriftResult | None = None
    statistics: tuple[SplitStatistics, ...] = ()
    anomalies: tuple[Anomaly, ...] = ()
    curves: TrainingCurves | None = None
    runtime: dict[str, object] = field(default_factory=dict)
    # The frozen hyperparameters the run trained with, and their data's age
    # (trainer/hyperparameters.py's `report_rows`); empty without a frozen
    # file, None where the report's writer is not told (Kubeflow's exit handler).
    hyperparameters: dict[str, str] | None = None
    evaluation: Evaluation | None = None
    blessed: bool | None = None
    baseline_path: str | None = None
    pushed_destination: str | None = None
    already_served_path: str | None = None
    # The pushed model's signatures and their inputs (components.serving.baseline.component).
    signatures: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # What Kubeflow's deploy step did with the pushed version (kubeflow/steps/deploy/component.py).
    deployment: dict[str, Any] | None = None
    error: str | None = None
    notes: tuple[str, ...] = ()
    # What the report could not show, and why (a section it could not read; the
    # renderer adds each chart it could not draw).
    left_out: tuple[str, ...] = ()

    @property
    def outcome(self) -> str:
        if self.error or any(s.state == "failed" for s in self.steps):
            return "failed"
        if self.blessed is None:
            return "not evaluated"
        return "blessed" if self.blessed else "not blessed"

    @property
    def metrics(self) -> dict[str, float]:
        """The candidate's metrics on the whole eval split, and each `<metric>_diff` vs. the
        baseline, named as TFMA's `load_eval_result` names them."""
        overall = [
            s
            for s in (self.evaluation.slices if self.evaluation else ())
            if s.slice_name == OVERALL_SLICE
        ]
        values = {}
        for name, comparison in overall[0].metrics.items() if overall else ():
            if comparison.candidate is not None:
                values[name] = comparison.candidate
            if comparison.diff is not None:
                metric, per_class, class_id = name.partition(" (class ")
                values[f"{metric}_diff{per_class}{class_id}"] = comparison.diff
        return values

    @property
    def failed_thresholds(self) -> tuple[ThresholdCheck, ...]:
        return tuple(
            t for t in (self.evaluation.thresholds if self.evaluation else ()) if not t.passed
        )


@dataclass(frozen=True)
class ArtifactUris:
    """The artifacts a report reads; None where the run did not produce one."""

    statistics: str | None = None
    anomalies: str | None = None
    drift: str | None = None
    model_run: str | None = None
    evaluation: str | None = None


def read_artifacts(uris: ArtifactUris) -> dict[str, Any]:
    """Report fields read from `uris`, for `RunReport(**...)`.

    A section whose artifact cannot be read is left out, and `left_out` says
    which and why: the report shows what it can (on Kubeflow the RunReport step
    runs after Deploy has served the model, and a step that raised would fail
    that run).
    """
    # Each section, and the fields it fills with their readers.
    sections: list[tuple[str, dict[str, Callable[[], Any]]]] = []
    if uris.statistics:
        sections.append(("statistics", {"statistics": partial(read_statistics, uris.statistics)}))
    if uris.anomalies:
        sections.append(("anomalies", {"anomalies": partial(read_anomalies, uris.anomalies)}))
    if uris.drift:
        sections.append(("drift", {"drift": partial(read_result, uris.drift)}))
    if uris.model_run:
        training: dict[str, Callable[[], Any]] = {
            "curves": partial(read_training_curves, uris.model_run),
            "runtime": partial(read_resolved_runtime, uris.model_run),
        }
        sections.append(("training", training))
    if uris.evaluation and store_files.exists(
        os.path.join(uris.evaluation, tfma_records.EVAL_CONFIG_FILE)
    ):
        sections.append(("evaluation", {"evaluation": partial(read_evaluation, uris.evaluation)}))
    fields: dict[str, Any] = {}
    left_out = []
    for section, readers in sections:
        try:
            fields.update({name: read() for name, read in readers.items()})
        except Exception as err:  # Any failure to read leaves one section out.
            logging.warning("Run report: the %s section was not read: %r", section, err)
            left_out.append(
                f"The {section} section is left out: its artifact could not be read "
                f"({type(err).__name__}: {err})."
            )
    if left_out:
        fields["left_out"] = tuple(left_out)
    return fields
