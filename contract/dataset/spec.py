"""The dataset spec: which column is the label, what task, how each feature is encoded.

One small YAML file beside the schema (`SCHEMA_DIR/dataset.yaml`) makes a CSV
or Parquet dataset and its task configuration instead of code. `python -m
schemas.draft` writes a first version from the data; the user curates it.
Everything that depends on the task reads it: preprocessing, the model head and
loss, the serving signature, the Evaluator's metrics, slices and thresholds.

The contract is pure Python (no TensorFlow), so the runner can validate a spec,
with errors that name the field, before anything heavy starts. The spec
travels to Transform and Trainer inside their `custom_config` as JSON
(`to_custom_config`; contract/dataset/parse.py reads it back), so a compiled
Kubeflow pipeline carries it too, and an edit to it re-runs what it changes.
Its sections are contract/dataset/sections.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contract.dataset.error import DatasetSpecError
from contract.dataset.names import transformed_name
from contract.dataset.sections import (
    DRIFT_MEASURE_VALUE_TYPES,
    KIND_VALUE_TYPES,
    DriftSpec,
    EvaluationSpec,
    FeatureSpec,
    InputSpec,
    LabelSpec,
)
from contract.fields import MAPPING, STRING, STRINGS, declare, plain

# The dataset spec travels with the model (trainer/export.py writes it): class names in
# probability order. Here, so that a step reads it without importing TensorFlow.
SPEC_ASSET = "assets.extra/dataset_spec.json"

SPEC_FILE_NAME = "dataset.yaml"
SCHEMA_FILE_NAME = "schema.pbtxt"
CUSTOM_CONFIG_KEY = "dataset_spec"
PIPELINE_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")


@dataclass(frozen=True, kw_only=True)  # The fields in the file's order.
class DatasetSpec:
    """A dataset and its task: see the module docstring and docs/bring-your-own-data.md."""

    name: str = field(
        metadata=declare(
            STRING,
            f"the pipeline's name: `{PIPELINE_NAME_PATTERN.pattern}` (Kubeflow Pipelines' rule)",
        )
    )
    label: LabelSpec = field(metadata=declare(MAPPING, "what the model predicts"))
    features: Mapping[str, FeatureSpec] = field(
        metadata=declare(MAPPING, "the raw columns the model reads, by name, and their encoding")
    )
    ignore: tuple[str, ...] = field(
        default=(),
        metadata=declare(STRINGS, "raw columns that are neither the label nor a feature"),
    )
    slices: tuple[str, ...] = field(
        default=(),
        metadata=declare(STRINGS, "columns whose values the metrics are also reported by"),
    )
    evaluation: EvaluationSpec = field(metadata=declare(MAPPING, "when a candidate is blessed"))
    # Read by batch scoring only, not by Transform or the Trainer: not in `to_dict()`.
    keys: tuple[str, ...] = field(
        default=(),
        metadata=declare(
            STRINGS,
            "id columns batch scoring keys each output row by (strings or integers); never "
            "features",
            serialized=False,
        ),
    )
    # Read by the pipeline's ExampleGen and drift gate, not by Transform or the
    # Trainer: not in `to_dict()`, so an edit to either re-runs neither.
    input: InputSpec = field(
        default=InputSpec(),
        metadata=declare(MAPPING, "where a run's files are", serialized=False),
    )
    drift: DriftSpec = field(
        default_factory=lambda: DriftSpec(features={}),
        metadata=declare(MAPPING, "drift thresholds per feature", serialized=False),
    )

    @property
    def task(self) -> str:
        return self.label.task

    def model_input_sizes(self) -> dict[str, int | None]:
        """Transformed model inputs and their category counts (None for dense floats).

        The model builder and the preprocessing both derive from this, so a
        feature added in one place cannot silently be missing from the other.
        """
        return {transformed_name(k): f.category_count() for k, f in self.features.items()}

    def scoring_columns(self, keys: Iterable[str]) -> tuple[str, ...]:
        """The columns a scoring reads: the features, the label's sources (absent, mostly),
        the slices and `keys`; no other column of the data is read, whatever it holds."""
        return tuple(
            dict.fromkeys([*self.features, *self.label.source_columns, *self.slices, *keys])
        )

    def serving_excluded_columns(self) -> tuple[str, ...]:
        """Label sources that are not features: absent from serving requests."""
        return tuple(c for c in self.label.source_columns if c not in self.features)

    def to_dict(self) -> dict[str, Any]:
        """What Transform and the Trainer read (and their cache keys hold): not input or drift."""
        return plain(self)

    def to_custom_config(self) -> dict[str, str]:
        """The entry for a component's `custom_config` (plain JSON, survives compilation)."""
        return {CUSTOM_CONFIG_KEY: json.dumps(self.to_dict(), sort_keys=True)}

    def check_against_columns(self, column_types: Mapping[str, str]) -> None:
        """Raises DatasetSpecError unless the spec fits the data's columns and types.

        `column_types`: raw column -> "int" | "float" | "string" (the schema's).
        Every column must be the label's, a feature or ignored, so a column
        added to the data is a decision, not an accident.
        """
        known = sorted(column_types)

        def require(path: str, column: str) -> None:
            if column not in column_types:
                raise DatasetSpecError(
                    f"{path}: {column!r} is not a column of the data (columns: {', '.join(known)})"
                )

        if self.label.column:
            require("label.column", self.label.column)
        for i, column in enumerate(self.label.columns):
            require(f"label.columns[{i}]", column)
        for name, feature in self.features.items():
            require(f"features.{name}", name)
            allowed = KIND_VALUE_TYPES[feature.kind] + (
                ("string",) if feature.missing_markers else ()
            )
            if column_types[name] not in allowed:
                hint = (
                    "; if it holds numbers with a marker for missing ones, list the marker "
                    "in missing_markers (e.g. [NA])"
                    if feature.kind in ("numeric", "bucketized")
                    else ""
                )
                raise DatasetSpecError(
                    f"features.{name}.kind: {feature.kind} needs {' or '.join(allowed)} values, "
                    f"but column {name!r} holds {column_types[name]} values{hint}"
                )
            if feature.missing_markers and column_types[name] != "string":
                raise DatasetSpecError(
                    f"features.{name}.missing_markers: column {name!r} holds "
                    f"{column_types[name]} values already; markers are for numbers read as strings"
                )
        # An ignored column needs no schema entry: a column no feature can hold (a
        # struct) has none, and ExampleGen skips it (components/example_gen/parquet_columns.py).
        for i, column in enumerate(self.slices):
            require(f"slices[{i}]", column)
        label_type = column_types.get(self.label.column) if self.label.column else None
        if label_type == "string" and self.task == "regression":
            raise DatasetSpecError(
                f"label.task: regression needs a numeric label, but column "
                f"{self.label.column!r} holds strings"
            )
        if label_type == "int" and self.task != "regression":
            for i, name in enumerate(self.label.classes):
                if not re.fullmatch(r"-?\d+", name):
                    raise DatasetSpecError(
                        f"label.classes[{i}]: {name!r} is not an integer, but column "
                        f"{self.label.column!r} holds integers"
                    )
        for name, drift in self.drift.features.items():
            allowed = DRIFT_MEASURE_VALUE_TYPES[drift.measure]
            if column_types[name] not in allowed:
                other = next(m for m in DRIFT_MEASURE_VALUE_TYPES if m != drift.measure)
                raise DatasetSpecError(
                    f"drift.features.{name}: {drift.measure} compares {' or '.join(allowed)} "
                    f"values, but column {name!r} holds {column_types[name]} values; use {other}"
                )
        # Keys need not be in training data; where they are, they are accounted for.
        covered = (
            set(self.features) | set(self.label.source_columns) | set(self.ignore) | set(self.keys)
        )
        uncovered = [c for c in known if c not in covered]
        if uncovered:
            raise DatasetSpecError(
                f"columns {uncovered} are in the data but neither the label, a feature nor "
                "ignored: add each under `features:` or `ignore:`"
            )
