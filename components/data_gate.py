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


def describe_anomalies(anomalies_by_split: "dict[str, anomalies_pb2.Anomalies]") -> "list[str]":
    """One line per distinct problem: feature, what is wrong, and the splits it is in."""
    splits_by_problem: dict[tuple[str, str], list[str]] = {}
    for split, anomalies in sorted(anomalies_by_split.items()):
        for feature, info in anomalies.anomaly_info.items():
            reasons = (
                "; ".join(
                    f"{r.short_description}: {r.description}"
                    if r.description
                    else r.short_description
                    for r in info.reason
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
        f"{where}: {reasons} (split {', '.join(splits)})"
        for (where, reasons), splits in sorted(splits_by_problem.items())
    ]


def describe_empty_splits(num_examples_by_split: dict[str, int]) -> list[str]:
    return [
        f"split '{split}' has no examples: check that the data files are not empty"
        for split, count in sorted(num_examples_by_split.items())
        if count == 0
    ]


def check_data(
    anomalies_by_split: dict[str, anomalies_pb2.Anomalies],
    num_examples_by_split: dict[str, int],
) -> None:
    """Raises DataValidationError listing every problem found."""
    problems = describe_empty_splits(num_examples_by_split) + describe_anomalies(anomalies_by_split)
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
    num_examples_by_split = {
        split: sum(
            d.num_examples
            for d in stats_artifact_utils.load_statistics(statistics, split).proto().datasets
        )
        for split in artifact_utils.decode_split_names(statistics.split_names)
    }
    check_data(anomalies_by_split, num_examples_by_split)
    return {"examples_checked": sum(num_examples_by_split.values())}
