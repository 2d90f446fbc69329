"""The drift gate's work, without TFX: see components/gates/drift/component.py for what it checks
and why.

DataDriftGate's pod on Kubeflow runs `check_drift_gate` through
kubeflow/light_step.py; locally, and for TFX's compiler, the component's body
(components/gates/drift/component.py) calls it too. Its statistics and schema are read
as components/gates/data_validation/executor.py reads them. TFDV measures the drift, and
importing TFDV loads TensorFlow and Beam (tensorflow_data_validation/__init__.py,
line 27, imports `api/validation_api.py`, whose lines 24 and 26 import Beam and
TensorFlow; its line 18 imports `api/stats_api.py`, Beam at line 49): TFDV is
imported only where a comparison runs, with thresholds set and statistics
served, so a gate with nothing to compare stays light.
"""

from __future__ import annotations

import json
import os
from typing import Any

from absl import logging

from components import store_files
from components.artifact_names import TRAINING_SPLIT
from components.gates.data_validation.executor import (
    DataValidationError,
    load_statistics,
    read_schema,
)
from components.gates.drift.result import DRIFT_FILE, DriftResult, FeatureComparison
from components.serving.served_version import served_version
from components.serving.serving_dir import training_statistics_file
from contract.dataset.sections import DriftSpec

# TFDV's measurement types, by our measure names.
_TFDV_MEASURES = {
    "l_infinity": "L_INFTY",
    "jensen_shannon": "JENSEN_SHANNON_DIVERGENCE",
    "quantile_shift": "quantile_shift",  # ours, not TFDV's
}


class DataDriftError(DataValidationError):
    """A feature drifted beyond its threshold (in `fail` mode) from the served model's data."""


def compare(current, previous, schema, drift: DriftSpec) -> tuple[FeatureComparison, ...]:
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


def _deciles(statistics, feature: str) -> list[float] | None:
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


def quantile_shift(current: list[float] | None, previous: list[float] | None):
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


def check_against_served(
    current, schema, drift: DriftSpec, serving_model_dir: str, rolled_out_record: str = ""
) -> DriftResult:
    """The drift check of `current` (train split statistics) against the served model's data
    (served_version.py's answer; `rolled_out_record`: the KServe rollout's record, or "")."""
    if not drift.features:
        return DriftResult(note="no drift thresholds in the dataset spec (drift:); not checked")
    version = served_version(serving_model_dir, rolled_out_record or None)
    if version is None:
        return DriftResult(
            note=f"nothing served under {serving_model_dir} yet: no previous statistics"
        )
    path = training_statistics_file(os.path.join(serving_model_dir, version))
    if path is None:
        return DriftResult(
            baseline_version=version,
            note=f"served model {version} carries no training statistics (pushed before they "
            "were kept): no previous statistics",
        )
    from tensorflow_metadata.proto.v0 import statistics_pb2

    # TFDV's `load_stats_binary` (utils/stats_util.py), through store_files: no tensorflow-io.
    previous = statistics_pb2.DatasetFeatureStatisticsList.FromString(store_files.read_bytes(path))
    comparisons = compare(current, previous, schema, drift)
    return DriftResult(baseline_version=version, baseline_statistics=path, comparisons=comparisons)


def check_drift_gate(
    statistics: Any,
    schema: Any,
    drift: Any,
    serving_model_dir: str,
    thresholds: str,
    rolled_out_record: str = "",
) -> None:
    """DataDriftGate's work: the train split of `statistics` (an ExampleStatistics artifact)
    against the served model's data, with `schema` (a Schema artifact) and `thresholds` (the
    dataset spec's drift: section as JSON); the result goes to `drift.json` in `drift`'s
    directory and its properties; raises DataDriftError on a `fail` feature beyond its
    threshold."""
    result = check_against_served(
        load_statistics(statistics, TRAINING_SPLIT),
        read_schema(schema),
        DriftSpec.from_dict(json.loads(thresholds)),
        serving_model_dir,
        rolled_out_record,
    )
    store_files.write_text(os.path.join(drift.uri, DRIFT_FILE), result.to_json())
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
