"""The data gates' rules and the statistics, anomalies and schema they read, without TFX.

DataValidationGate (components/gates/data_validation/component.py), DataDriftGate and
ServingDataGate read protos that StatisticsGen, ExampleValidator and the
schema importer wrote. TFX's helpers for those files (`stats_artifact_utils`,
`artifact_utils`, `io_utils`) sit in TFX's component package and its `fileio`,
which load TensorFlow and TFMA (docs/kubeflow.md, "What a step loads"); what
they do for the gates is ported here, each rule citing its TFX 1.16 file and
line (under `site-packages/tfx/`), and files are read through
components/store_files.py. On Kubeflow the gates' pods run these functions
through kubeflow/light_step.py; locally, and for TFX's compiler, the
components' bodies call the same ones.

Port register: docs/ports.md
"""

from __future__ import annotations

import os
from typing import Any

from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2

from components import store_files
from components.artifact_names import ANOMALIES_FILE, STATISTICS_FILE
from components.artifact_views import split_names, split_uri


class DataValidationError(RuntimeError):
    """The data does not match the curated schema."""


def describe_anomalies(
    anomalies_by_split: dict[str, anomalies_pb2.Anomalies],
    nan_counts_by_split: dict[str, dict[str, tuple[int, int]]] | None = None,
    show_splits: bool = True,
) -> list[str]:
    """One line per distinct problem: feature, what is wrong, and the splits it is in
    (`show_splits`; scoring's data has no train and eval to speak of).

    `nan_counts_by_split`: split -> feature -> (NaN values, values), from the
    statistics; TFDV's NaN anomaly says there are some, not how many.
    """
    nan_counts_by_split = nan_counts_by_split or {}
    # A problem is its place and its reasons' kinds: TFDV's descriptions hold each
    # split's own share ("x (~12%)"), which would make one problem two. The first
    # split's words describe it, and every split it is in is counted.
    problems: dict[tuple[str, tuple[str, ...]], tuple[str, list[str]]] = {}
    for split, anomalies in sorted(anomalies_by_split.items()):
        for feature, info in anomalies.anomaly_info.items():
            nans = nan_counts_by_split.get(split, {}).get(feature)
            reasons = (
                "; ".join(
                    _reason_text(r, nans if r.type == _FLOAT_HAS_NAN else None) for r in info.reason
                )
                or info.short_description
            )
            kinds = tuple(r.short_description for r in info.reason) or (reasons,)
            problems.setdefault((f"feature '{feature}'", kinds), (reasons, []))[1].append(split)
        if anomalies.HasField("dataset_anomaly_info"):
            info = anomalies.dataset_anomaly_info
            reasons = "; ".join(r.description or r.short_description for r in info.reason)
            reasons = reasons or info.description
            kinds = tuple(r.short_description for r in info.reason) or (reasons,)
            problems.setdefault(("whole dataset", kinds), (reasons, []))[1].append(split)
    return [
        f"{where}: {reasons}" + (f" (split {', '.join(splits)})" if show_splits else "")
        for (where, _), (reasons, splits) in sorted(problems.items())
    ]


_FLOAT_HAS_NAN = anomalies_pb2.AnomalyInfo.FLOAT_TYPE_HAS_NAN


def _reason_text(reason, nans: tuple[int, int] | None) -> str:
    text = (
        f"{reason.short_description}: {reason.description}"
        if reason.description
        else reason.short_description
    )
    if nans is not None:
        text += f" ({nans[0]} NaN of {nans[1]} values)"
    if reason.type == _NEW_COLUMN:
        text += (
            " (a column the schema does not list, as one added in a later partition: add it "
            "to schema.pbtxt and to dataset.yaml, as a feature or under ignore:)"
        )
    if reason.type == _UNEXPECTED_TYPE and "INT" in text and "FLOAT" in text.split("INT", 1)[1]:
        text += (
            " (pandas writes an int column holding a missing value as float64: write it as "
            "nullable ints, df[column].astype('Int64'), before to_parquet)"
        )
    return text


_UNEXPECTED_TYPE = anomalies_pb2.AnomalyInfo.UNEXPECTED_DATA_TYPE
_NEW_COLUMN = anomalies_pb2.AnomalyInfo.SCHEMA_NEW_COLUMN


def nan_counts(statistics) -> dict[str, tuple[int, int]]:
    """Feature -> (NaN values, values counted) for the float features of one split's
    DatasetFeatureStatisticsList that hold any NaN."""
    counts = {}
    for dataset in statistics.datasets:
        for feature in dataset.features:
            if not feature.HasField("num_stats") or not feature.num_stats.histograms:
                continue
            nan = int(feature.num_stats.histograms[0].num_nan)
            if nan:
                name = ".".join(feature.path.step) or feature.name
                counts[name] = (nan, int(feature.num_stats.common_stats.num_non_missing))
    return counts


def describe_empty_splits(num_examples_by_split: dict[str, int]) -> list[str]:
    return [
        f"split '{split}' has no examples: check that the data files are not empty"
        for split, count in sorted(num_examples_by_split.items())
        if count == 0
    ]


def check_data(
    anomalies_by_split: dict[str, anomalies_pb2.Anomalies],
    num_examples_by_split: dict[str, int],
    nan_counts_by_split: dict[str, dict[str, tuple[int, int]]] | None = None,
    scoring: bool = False,
) -> None:
    """Raises DataValidationError listing every problem found. `scoring`: the splits are
    one set of rows to score, so only all of them empty is a problem, and no problem
    names a split."""
    if scoring:
        empty = [] if sum(num_examples_by_split.values()) else ["the data to score has no rows"]
    else:
        empty = describe_empty_splits(num_examples_by_split)
    problems = empty + describe_anomalies(
        anomalies_by_split, nan_counts_by_split, show_splits=not scoring
    )
    if problems:
        raise DataValidationError(
            "data validation failed against the schema "
            f"({len(problems)} problem(s)); fix the data or update the schema: "
            + " | ".join(problems)
        )


def load_statistics(artifact: Any, split: str) -> statistics_pb2.DatasetFeatureStatisticsList:
    """A split's statistics: `FeatureStats.pb` in its directory, binary
    (components/statistics_gen/stats_artifact_utils.py, `load_statistics`, lines 28-36, and
    TFDV's `load_stats_binary`)."""
    path = os.path.join(split_uri(artifact, split), STATISTICS_FILE)
    return statistics_pb2.DatasetFeatureStatisticsList.FromString(store_files.read_bytes(path))


def load_anomalies(artifact: Any, split: str) -> anomalies_pb2.Anomalies:
    """A split's anomalies: `SchemaDiff.pb` in its directory, binary."""
    path = os.path.join(split_uri(artifact, split), ANOMALIES_FILE)
    return anomalies_pb2.Anomalies.FromString(store_files.read_bytes(path))


def read_schema(artifact: Any) -> schema_pb2.Schema:
    """The schema in a Schema artifact, its directory's one file, text format
    (utils/io_utils.py, `get_only_uri_in_dir` and `SchemaReader.read`, lines 120-128 and
    239-260)."""
    return store_files.parse_pbtxt_file(store_files.only_file_in(artifact.uri), schema_pb2.Schema())


def examples_by_split(
    statistics_by_split: dict[str, statistics_pb2.DatasetFeatureStatisticsList],
) -> dict[str, int]:
    return {
        split: sum(d.num_examples for d in proto.datasets)
        for split, proto in statistics_by_split.items()
    }


def validate_examples(anomalies: Any, statistics: Any) -> dict[str, int]:
    """DataValidationGate's work: raises DataValidationError if any split has anomalies or
    no examples; else `{"examples_checked": the examples of every split}`. `anomalies` and
    `statistics`: the ExampleAnomalies and ExampleStatistics artifacts (TFX's, or the light
    runner's), read by their `uri` and `split_names`."""
    anomalies_by_split = {
        split: load_anomalies(anomalies, split) for split in split_names(anomalies)
    }
    statistics_by_split = {
        split: load_statistics(statistics, split) for split in split_names(statistics)
    }
    counts = examples_by_split(statistics_by_split)
    check_data(
        anomalies_by_split,
        counts,
        {split: nan_counts(proto) for split, proto in statistics_by_split.items()},
    )
    return {"examples_checked": sum(counts.values())}
