"""What a run report shows, read from a run's own artifacts.

Each reader takes one artifact URI and returns plain frozen dataclasses, so the
same readers serve a local run (URIs found in ML Metadata) and a Kubeflow step
(URIs handed to it as input artifacts). Nothing here renders anything.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from absl import logging

from components import store_files
from components.artifact_names import ANOMALIES_FILE, SPLIT_DIR_PREFIX, STATISTICS_FILE
from components.gates.drift.result import DriftResult, read_result
from components.report import tfma_records
from components.report.event_scalars import scalar_events

# Keras' TensorBoard callback writes `epoch_<metric>`; our multi-worker loop
# writes validation metrics as `epoch_val_<metric>` next to the training ones.
_EPOCH_TAG_PREFIX = "epoch_"
_VALIDATION_PREFIX = "val_"


# --- steps --------------------------------------------------------------------


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


# --- statistics ---------------------------------------------------------------


@dataclass(frozen=True)
class HistogramBucket:
    low: float
    high: float
    count: float


@dataclass(frozen=True)
class FeatureStatistics:
    name: str
    kind: str  # "numeric" or "categorical"
    examples: int
    present: int  # examples with at least one value
    min: float | None = None
    mean: float | None = None
    max: float | None = None
    std_dev: float | None = None
    unique: int | None = None
    top_values: tuple[tuple[str, float], ...] = ()
    histogram: tuple[HistogramBucket, ...] = ()

    @property
    def missing(self) -> int:
        return self.examples - self.present

    @property
    def missing_fraction(self) -> float:
        return self.missing / self.examples if self.examples else 0.0


@dataclass(frozen=True)
class SplitStatistics:
    split: str
    examples: int
    features: tuple[FeatureStatistics, ...]


_SPLIT_ORDER = {"train": 0, "eval": 1}


def split_dirs(artifact_uri: str) -> list[tuple[str, str]]:
    """[(split name, directory)] of a split artifact: train, eval, then the rest by name."""
    if not store_files.exists(artifact_uri):
        return []
    names = [name.rstrip("/") for name in store_files.listdir(artifact_uri)]
    return sorted(
        (
            (name[len(SPLIT_DIR_PREFIX) :], os.path.join(artifact_uri, name))
            for name in names
            if name.startswith(SPLIT_DIR_PREFIX)
        ),
        key=lambda item: (_SPLIT_ORDER.get(item[0], len(_SPLIT_ORDER)), item[0]),
    )


def split_files(artifact_uri: str, filename: str) -> list[tuple[str, str]]:
    """[(split name, path)] of `filename` in each split of an artifact that has one."""
    return [
        (split, os.path.join(directory, filename))
        for split, directory in split_dirs(artifact_uri)
        if store_files.exists(os.path.join(directory, filename))
    ]


def _feature_statistics(feature, num_examples: int) -> FeatureStatistics:
    from tensorflow_metadata.proto.v0 import statistics_pb2

    name = ".".join(feature.path.step) or feature.name
    kind = feature.WhichOneof("stats")
    stats = getattr(feature, kind)
    common = stats.common_stats
    # ExampleGen writes an empty cell as an empty value list, which TFDV
    # counts as "non-missing". An example has a value when it has one or more;
    # for single-valued features that count is the total number of values.
    present = (
        int(common.tot_num_values) if common.max_num_values <= 1 else int(common.num_non_missing)
    )
    if kind == "num_stats":
        standard = [h for h in stats.histograms if h.type == statistics_pb2.Histogram.STANDARD]
        buckets = tuple(
            HistogramBucket(b.low_value, b.high_value, b.sample_count)
            for b in (standard[0].buckets if standard else ())
        )
        return FeatureStatistics(
            name=name,
            kind="numeric",
            examples=num_examples,
            present=present,
            min=stats.min,
            mean=stats.mean,
            max=stats.max,
            std_dev=stats.std_dev,
            histogram=buckets,
        )
    if kind == "string_stats":
        return FeatureStatistics(
            name=name,
            kind="categorical",
            examples=num_examples,
            present=present,
            unique=int(stats.unique),
            top_values=tuple((v.value, v.frequency) for v in stats.top_values),
        )
    return FeatureStatistics(
        name=name, kind=kind or "unknown", examples=num_examples, present=present
    )


def read_statistics(statistics_uri: str) -> tuple[SplitStatistics, ...]:
    """Per-split feature statistics of a StatisticsGen `statistics` artifact."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    splits = []
    for split, path in split_files(statistics_uri, STATISTICS_FILE):
        # What TFDV's load_stats_binary does (tensorflow_data_validation 1.16.1,
        # utils/stats_util.py, lines 234-236), read without TensorFlow.
        with store_files.open(path, "rb") as f:
            dataset = statistics_pb2.DatasetFeatureStatisticsList.FromString(f.read()).datasets[0]
        features = tuple(
            sorted(
                (_feature_statistics(f, int(dataset.num_examples)) for f in dataset.features),
                key=lambda f: f.name,
            )
        )
        splits.append(SplitStatistics(split, int(dataset.num_examples), features))
    return tuple(splits)


# --- anomalies ----------------------------------------------------------------


@dataclass(frozen=True)
class Anomaly:
    split: str
    feature: str
    severity: str
    short_description: str
    description: str


def read_anomalies(anomalies_uri: str) -> tuple[Anomaly, ...]:
    """Every anomaly ExampleValidator recorded, per split."""
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    found = []
    for split, path in split_files(anomalies_uri, ANOMALIES_FILE):
        with store_files.open(path, "rb") as f:
            anomalies = anomalies_pb2.Anomalies.FromString(f.read())
        infos = sorted(anomalies.anomaly_info.items())
        if anomalies.HasField("dataset_anomaly_info"):
            infos.append(("(dataset)", anomalies.dataset_anomaly_info))
        found += [
            Anomaly(
                split=split,
                feature=feature,
                severity=anomalies_pb2.AnomalyInfo.Severity.Name(info.severity),
                short_description=info.short_description,
                description=info.description,
            )
            for feature, info in infos
        ]
    return tuple(found)


# --- training -----------------------------------------------------------------


@dataclass(frozen=True)
class TrainingCurves:
    """metric -> [(epoch, value)], for the training and the validation data."""

    train: dict[str, tuple[tuple[int, float], ...]] = field(default_factory=dict)
    validation: dict[str, tuple[tuple[int, float], ...]] = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        return sorted(set(self.train) | set(self.validation))

    @property
    def epochs(self) -> int:
        series = list(self.train.values()) + list(self.validation.values())
        return max((len(s) for s in series), default=0)


def read_training_curves(model_run_uri: str) -> TrainingCurves:
    """Per-epoch metrics from the Trainer's TensorBoard logs (`train/`, `validation/`)."""
    series: dict[str, dict[str, dict[int, float]]] = {"train": {}, "validation": {}}
    for subdir in ("train", "validation"):
        directory = os.path.join(model_run_uri, subdir)
        if not store_files.isdir(directory):
            continue
        for tag, step, value in scalar_events(directory):
            if not tag.startswith(_EPOCH_TAG_PREFIX):
                continue
            metric = tag[len(_EPOCH_TAG_PREFIX) :]
            target = subdir
            if metric.startswith(_VALIDATION_PREFIX):
                metric, target = metric[len(_VALIDATION_PREFIX) :], "validation"
            if metric == "learning_rate":
                continue
            # Epochs count from 1 in Keras' own progress lines.
            series[target].setdefault(metric, {})[step + 1] = value
    return TrainingCurves(
        train={m: tuple(sorted(v.items())) for m, v in series["train"].items()},
        validation={m: tuple(sorted(v.items())) for m, v in series["validation"].items()},
    )


TRAINER_CONFIG_FILE = "trainer_config.json"


def read_resolved_runtime(model_run_uri: str) -> dict[str, object]:
    """The runtime the Trainer resolved (devices, strategy, precision, global batch)."""
    path = os.path.join(model_run_uri, TRAINER_CONFIG_FILE)
    if not store_files.exists(path):
        return {}
    with store_files.open(path, "r") as f:
        config = json.load(f)
    return dict(config.get("resolved_runtime", {}))


# --- evaluation ---------------------------------------------------------------

OVERALL_SLICE = "Overall"


@dataclass(frozen=True)
class MetricComparison:
    candidate: float | None
    baseline: float | None = None
    diff: float | None = None


@dataclass(frozen=True)
class SliceMetrics:
    slice_name: str
    metrics: dict[str, MetricComparison]


@dataclass(frozen=True)
class ThresholdCheck:
    metric: str
    slice_name: str
    kind: str  # "value" or "change"
    bound: str
    observed: float | None
    passed: bool

    def describe(self) -> str:
        """`metric (diff) = 0.1234 breaks the change vs. baseline threshold`, say."""
        change = self.kind == "change"
        observed = "n/a" if self.observed is None else f"{self.observed:.4f}"
        where = "" if self.slice_name == OVERALL_SLICE else f" on {self.slice_name}"
        return (
            f"{self.metric}{' (diff)' if change else ''} = {observed}{where} breaks the "
            f"{'change vs. baseline' if change else 'value'} threshold"
        )


@dataclass(frozen=True)
class Evaluation:
    slices: tuple[SliceMetrics, ...]
    thresholds: tuple[ThresholdCheck, ...]
    validation_ok: bool | None
    has_baseline: bool


def _slice_name(slice_key) -> str:
    parts = []
    for single in slice_key.single_slice_keys:
        kind = single.WhichOneof("kind")
        value = getattr(single, kind)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        parts.append(f"{single.column} = {value}")
    return ", ".join(parts) or OVERALL_SLICE


def _slice_order(name: str) -> tuple[int, str]:
    return (0 if name == OVERALL_SLICE else 1, name)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _bound_text(threshold) -> list[tuple[str, str]]:
    """[(kind, text)] for the value and change parts of a threshold."""
    parts = []
    if threshold.HasField("value_threshold"):
        value = threshold.value_threshold
        lower = value.lower_bound.value if value.HasField("lower_bound") else None
        upper = value.upper_bound.value if value.HasField("upper_bound") else None
        text = " and ".join(
            t
            for t in (
                f">= {lower:g}" if lower is not None else "",
                f"<= {upper:g}" if upper is not None else "",
            )
            if t
        )
        parts.append(("value", text))
    if threshold.HasField("change_threshold"):
        change = threshold.change_threshold
        texts = []
        # HIGHER_IS_BETTER: the candidate may fall at most |bound| below the
        # baseline; LOWER_IS_BETTER: rise at most that much above it.
        higher = change.direction == tfma_records.protos().higher_is_better
        relation = ">=" if higher else "<="
        if change.HasField("absolute"):
            texts.append(f"change {relation} {change.absolute.value:+g}")
        if change.HasField("relative"):
            texts.append(f"relative change {relation} {change.relative.value:+g}")
        parts.append(("change", " and ".join(texts) or "change"))
    return parts


def read_evaluation(evaluation_uri: str) -> Evaluation:
    """Metrics per slice, candidate vs. baseline, and every threshold with its outcome."""
    by_slice: dict[str, dict[str, dict[str, float | None]]] = {}
    has_baseline = False
    for metrics in tfma_records.load_metrics(evaluation_uri):
        name = _slice_name(metrics.slice_key)
        for kv in metrics.metric_keys_and_values:
            if kv.value.WhichOneof("type") != "double_value":
                continue
            metric_name = kv.key.name
            if kv.key.HasField("sub_key"):
                if not kv.key.sub_key.HasField("class_id"):
                    continue
                # Per-class metrics (multiclass), by index into label.classes.
                metric_name += f" (class {kv.key.sub_key.class_id.value})"
            entry = by_slice.setdefault(name, {}).setdefault(metric_name, {})
            value = _finite(kv.value.double_value.value)
            if kv.key.is_diff:
                entry["diff"] = value
            elif kv.key.model_name == "baseline":
                entry["baseline"] = value
                has_baseline = True
            else:
                entry["candidate"] = value
    slices = tuple(
        SliceMetrics(
            slice_name=name,
            metrics={
                metric: MetricComparison(v.get("candidate"), v.get("baseline"), v.get("diff"))
                for metric, v in sorted(values.items())
            },
        )
        for name, values in sorted(by_slice.items(), key=lambda item: _slice_order(item[0]))
    )

    validation = tfma_records.load_validation_result(evaluation_uri)
    failed = set()
    for per_slice in validation.metric_validations_per_slice:
        slice_name = _slice_name(per_slice.slice_key)
        for failure in per_slice.failures:
            failed.add((failure.metric_key.name, failure.metric_key.is_diff, slice_name))

    eval_config = tfma_records.load_eval_config(evaluation_uri)
    checks = []
    for spec in eval_config.metrics_specs:
        for metric in spec.metrics:
            name = _metric_name(metric.class_name, metric.config)
            thresholds = (
                [([tfma_records.protos().SlicingSpec()], metric.threshold)]
                if metric.HasField("threshold")
                else []
            )
            thresholds += [
                (list(t.slicing_specs), t.threshold) for t in metric.per_slice_thresholds
            ]
            for slicing_specs, threshold in thresholds:
                for slicing_spec in slicing_specs:
                    slice_name = (
                        OVERALL_SLICE
                        if not slicing_spec.feature_keys and not slicing_spec.feature_values
                        else ", ".join(slicing_spec.feature_keys) + " (each slice)"
                    )
                    for kind, text in _bound_text(threshold):
                        is_diff = kind == "change"
                        if is_diff and not has_baseline:
                            continue  # TFMA skips change thresholds without a baseline.
                        observed = (
                            by_slice.get(slice_name, {})
                            .get(name, {})
                            .get("diff" if is_diff else "candidate")
                        )
                        passed = not any(
                            f_name == name
                            and f_diff == is_diff
                            and (slice_name != OVERALL_SLICE or f_slice == OVERALL_SLICE)
                            for f_name, f_diff, f_slice in failed
                        )
                        checks.append(
                            ThresholdCheck(name, slice_name, kind, text, observed, passed)
                        )
    return Evaluation(
        slices=slices,
        thresholds=tuple(checks),
        validation_ok=bool(validation.validation_ok),
        has_baseline=has_baseline,
    )


def _metric_name(class_name: str, config: str) -> str:
    """The metric key TFMA writes for a MetricConfig (its `name`, else snake case)."""
    if config:
        try:
            name = json.loads(config).get("name")
        except (ValueError, AttributeError):
            name = None
        if name:
            return name
    out = []
    for i, ch in enumerate(class_name):
        if ch.isupper() and i and not class_name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


# --- input -------------------------------------------------------------------


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
