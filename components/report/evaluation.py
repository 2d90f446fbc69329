"""The evaluation section of a run report: the Evaluator's metrics per slice, candidate
vs. baseline, and every threshold of its config with its outcome, read from its output
without TFMA (components/report/tfma_records.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from components.report import tfma_records

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
