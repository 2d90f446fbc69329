"""The drift gate: new data against the data that trained the model being served.

TFX 1.16's ExampleValidator compares statistics with the schema only. TFDV's
drift comparators need the previous data's statistics, which TFX fetches with
a Resolver, a node open-source Kubeflow Pipelines rejects. Here the previous
statistics are the ones the Pusher wrote into the served version
(`components.served_model.TRAINING_STATISTICS_FILE`): this step finds them
under the serving directory, on both runners, as `LatestServedModel` finds the
model.

Thresholds come from the dataset spec's `drift:` section (trainer.dataset_spec.
DriftSpec): L-infinity distance for string features; for numeric ones,
Jensen-Shannon divergence over quantile histograms, or the quantile shift.
TFDV measures the first two. Its equal-width histograms make the divergence
of two random samples of one heavy-tailed column large, so the quantile ones
are used; even so, tied and rounded values (trip distances to a tenth of a
mile) make it as large between two samples of unchanged data as after a real
shift. The quantile shift is computed here from the same statistics: the
largest move of any decile (10th to 90th percentile) between the two
quantile histograms, over the old 10th-to-90th percentile range. A decile of
tied values is that value in both samples, so ties do not make it noisy.

A feature in `fail` mode beyond its threshold fails the step, and the Trainer
waits for this step, so nothing is trained or pushed; the error names the
feature, the measure, the value and the threshold. `warn` only reports. With
nothing served, or a served version without statistics, the step passes and
says so. It reads state outside the pipeline, so it never comes from cache
(`cached=False` in pipeline/steps.py).
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

import json
import os

from absl import logging
from tfx.components.statistics_gen import stats_artifact_utils
from tfx.dsl.component.experimental.annotations import (
    InputArtifact,
    OutputArtifact,
    Parameter,
)
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts
from tfx.utils import io_utils

from components.artifact_names import TRAINING_SPLIT
from components.data_gate import DataValidationError
from components.drift_artifact import DataDrift
from components.drift_result import DRIFT_FILE, DriftResult, FeatureComparison
from components.served_model import served_statistics
from trainer.dataset_spec import DriftSpec

# TFDV's measurement types, by our measure names.
_TFDV_MEASURES = {
    "l_infinity": "L_INFTY",
    "jensen_shannon": "JENSEN_SHANNON_DIVERGENCE",
    "quantile_shift": "quantile_shift",  # ours, not TFDV's
}


class DataDriftError(DataValidationError):
    """A feature drifted beyond its threshold (in `fail` mode) from the served model's data."""


def compare(current, previous, schema, drift: DriftSpec) -> "tuple[FeatureComparison, ...]":
    """Each feature of `drift` measured by TFDV between two statistics of one split.

    `current`, `previous`: DatasetFeatureStatisticsList; `schema`: the curated
    Schema (TFDV attaches drift comparators to its features).
    """
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema.FromString(schema.SerializeToString())
    by_name = {f.name: f for f in schema.feature}
    for name, feature_drift in drift.features.items():
        feature = by_name.get(name) or schema.feature.add(name=name)
        comparator = feature.drift_comparator
        comparator.Clear()
        if feature_drift.measure == "l_infinity":
            comparator.infinity_norm.threshold = feature_drift.threshold
        else:
            comparator.jensen_shannon_divergence.threshold = feature_drift.threshold
            comparator.jensen_shannon_divergence.source.type = (
                schema_pb2.HistogramSelection.QUANTILES
            )
    anomalies = tfdv.validate_statistics(current, schema, previous_statistics=previous)
    measured: dict[tuple[str, str], float | None] = {}
    for info in anomalies.drift_skew_info:
        for measurement in info.drift_measurements:
            type_name = measurement.Type.Name(measurement.type)
            measured[(".".join(info.path.step), type_name)] = measurement.value
    for name, d in drift.features.items():
        if d.measure == "quantile_shift":
            measured[(name, _TFDV_MEASURES[d.measure])] = quantile_shift(
                _deciles(current, name), _deciles(previous, name)
            )
    return tuple(
        FeatureComparison(
            feature=name,
            measure=d.measure,
            threshold=d.threshold,
            mode=d.mode,
            value=measured.get((name, _TFDV_MEASURES[d.measure])),
        )
        for name, d in sorted(drift.features.items())
    )


def _deciles(statistics, feature: str) -> "list[float] | None":
    """The 10th..90th percentiles of `feature` in a DatasetFeatureStatisticsList, from its
    quantile histogram (its bucket boundaries), or None where it has none."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    quantiles = statistics_pb2.Histogram.QUANTILES
    for dataset in statistics.datasets:
        for stats in dataset.features:
            if ".".join(stats.path.step) != feature or not stats.HasField("num_stats"):
                continue
            for histogram in stats.num_stats.histograms:
                if histogram.type != quantiles or len(histogram.buckets) < 2:
                    continue
                buckets = histogram.buckets
                # Boundary k of n buckets is the k/n quantile: take those nearest each decile.
                n = len(buckets)
                return [buckets[round(n * d / 10)].low_value for d in range(1, 10)]
    return None


def quantile_shift(current: "list[float] | None", previous: "list[float] | None"):
    """The largest move of a decile from `previous` to `current`, over the previous
    10th-to-90th percentile range; None where either side has no deciles."""
    if current is None or previous is None:
        return None
    move = max(abs(c - p) for c, p in zip(current, previous, strict=True))
    spread = previous[-1] - previous[0]
    if spread > 0:
        return move / spread
    # A (nearly) constant column: any move of its deciles is a shift without bound.
    return 0.0 if move == 0 else float("inf")


def check_drift(result: DriftResult) -> None:
    """Raises DataDriftError naming every feature beyond its threshold in `fail` mode."""
    if result.failures:
        raise DataDriftError(
            f"data drift against the data that trained served model {result.baseline_version} "
            f"({len(result.failures)} feature(s)); check the new data, or raise the threshold "
            "or set mode: warn under drift: in the dataset spec: "
            + " | ".join(c.describe() for c in result.failures)
        )


def check_against_served(current, schema, drift: DriftSpec, serving_model_dir: str) -> DriftResult:
    """The drift check of `current` (train split statistics) against the served model's data."""
    import tensorflow_data_validation as tfdv

    if not drift.features:
        return DriftResult(note="no drift thresholds in the dataset spec (drift:); not checked")
    served = served_statistics(serving_model_dir)
    if served is None:
        return DriftResult(
            note=f"nothing served under {serving_model_dir} yet: no previous statistics"
        )
    version, path = served
    if path is None:
        return DriftResult(
            baseline_version=version,
            note=f"served model {version} carries no training statistics (pushed before they "
            "were kept): no previous statistics",
        )
    comparisons = compare(current, tfdv.load_stats_binary(path), schema, drift)
    return DriftResult(baseline_version=version, baseline_statistics=path, comparisons=comparisons)


@component
def DataDriftGate(
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: InputArtifact[standard_artifacts.Schema],
    drift: OutputArtifact[DataDrift],
    serving_model_dir: Parameter[str],
    thresholds: Parameter[str],
) -> None:
    """Fails the run when a feature drifted beyond its `fail` threshold; see the module doc."""
    current = stats_artifact_utils.load_statistics(statistics, TRAINING_SPLIT).proto()
    curated = io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema.uri))
    result = check_against_served(
        current, curated, DriftSpec.from_dict(json.loads(thresholds)), serving_model_dir
    )
    fileio.makedirs(drift.uri)
    with fileio.open(os.path.join(drift.uri, DRIFT_FILE), "w") as f:
        f.write(result.to_json())
    if result.baseline_version:
        drift.set_string_custom_property("baseline_version", result.baseline_version)
    drift.set_int_custom_property("drifted_features", len(result.failures) + len(result.warnings))
    if result.note:
        logging.info("Drift: %s", result.note)
    for comparison in result.comparisons:
        logging.info(
            "Drift: %s %s = %s (threshold %g, %s): %s",
            comparison.feature,
            comparison.measure,
            "n/a" if comparison.value is None else f"{comparison.value:.4g}",
            comparison.threshold,
            comparison.mode,
            comparison.status,
        )
    for comparison in result.warnings:
        logging.warning("Drift (warn mode, not stopping the run): %s", comparison.describe())
    check_drift(result)
