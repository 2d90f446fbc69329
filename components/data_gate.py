"""A gate that stops the pipeline when ExampleValidator found anomalies.

TFX's ExampleValidator only *records* anomalies; Transform and Trainer run on
regardless. This component fails instead, naming every split, feature and
anomaly, and the Trainer is made to wait for it, so bad data never reaches
training and nothing gets pushed.

When the data passes, the gate records how many examples it checked (an
Integer artifact). Nothing reads it downstream; a step with an output has a
place to record its own attempts on Kubeflow (kubeflow/step_attempt.py), and
this is the step a failed run's report must name.
"""

# No `from __future__ import annotations` here: the @component decorator reads
# the real annotation objects.

import os
from typing import TypedDict

from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.components.statistics_gen import stats_artifact_utils
from tfx.dsl.component.experimental.annotations import InputArtifact
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import io_utils

# ExampleValidator writes one binary Anomalies proto per split under this name.
ANOMALIES_FILE = "SchemaDiff.pb"


class DataValidationError(RuntimeError):
    """The data does not match the curated schema."""


def describe_anomalies(
    anomalies_by_split: "dict[str, anomalies_pb2.Anomalies]",
    nan_counts_by_split: "dict[str, dict[str, tuple[int, int]]] | None" = None,
    show_splits: bool = True,
) -> "list[str]":
    """One line per distinct problem: feature, what is wrong, and the splits it is in
    (`show_splits`; scoring's data has no train and eval to speak of).

    `nan_counts_by_split`: split -> feature -> (NaN values, values), from the
    statistics; TFDV's NaN anomaly says there are some, not how many.
    """
    nan_counts_by_split = nan_counts_by_split or {}
    splits_by_problem: dict[tuple[str, str], list[str]] = {}
    for split, anomalies in sorted(anomalies_by_split.items()):
        for feature, info in anomalies.anomaly_info.items():
            nans = nan_counts_by_split.get(split, {}).get(feature)
            reasons = (
                "; ".join(
                    _reason_text(r, nans if r.type == _FLOAT_HAS_NAN else None) for r in info.reason
                )
                or info.short_description
            )
            splits_by_problem.setdefault((f"feature '{feature}'", reasons), []).append(split)
        if anomalies.HasField("dataset_anomaly_info"):
            info = anomalies.dataset_anomaly_info
            reasons = "; ".join(r.description or r.short_description for r in info.reason)
            splits_by_problem.setdefault(("whole dataset", reasons or info.description), []).append(
                split
            )
    return [
        f"{where}: {reasons}" + (f" (split {', '.join(splits)})" if show_splits else "")
        for (where, reasons), splits in sorted(splits_by_problem.items())
    ]


_FLOAT_HAS_NAN = anomalies_pb2.AnomalyInfo.FLOAT_TYPE_HAS_NAN


def _reason_text(reason, nans: "tuple[int, int] | None") -> str:
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


def nan_counts(statistics) -> "dict[str, tuple[int, int]]":
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
    nan_counts_by_split: "dict[str, dict[str, tuple[int, int]]] | None" = None,
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


class GateOutputs(TypedDict):
    examples_checked: int


def _read_binary(path: str, proto):
    proto.ParseFromString(io_utils.read_bytes_file(path))
    return proto


@component
def DataValidationGate(
    anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
) -> GateOutputs:
    """Fails the run if any split has anomalies or no examples; else counts the examples."""
    anomalies_by_split = {
        split: _read_binary(
            os.path.join(artifact_utils.get_split_uri([anomalies], split), ANOMALIES_FILE),
            anomalies_pb2.Anomalies(),
        )
        for split in artifact_utils.decode_split_names(anomalies.split_names)
    }
    statistics_by_split = {
        split: stats_artifact_utils.load_statistics(statistics, split).proto()
        for split in artifact_utils.decode_split_names(statistics.split_names)
    }
    num_examples_by_split = {
        split: sum(d.num_examples for d in proto.datasets)
        for split, proto in statistics_by_split.items()
    }
    check_data(
        anomalies_by_split,
        num_examples_by_split,
        {split: nan_counts(proto) for split, proto in statistics_by_split.items()},
    )
    return {"examples_checked": sum(num_examples_by_split.values())}
