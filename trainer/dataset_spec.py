"""The dataset spec: which column is the label, what task, how each feature is encoded.

One small YAML file beside the schema (`SCHEMA_DIR/dataset.yaml`) makes a CSV
dataset and its task configuration instead of code. `python -m schemas.draft`
writes a first version from the data; the user curates it. Everything that
depends on the task reads it: preprocessing, the model head and loss, the
serving signature, the Evaluator's metrics, slices and thresholds.

This module is pure Python (no TensorFlow), so the runner can validate a spec,
with errors that name the field, before anything heavy starts. The spec
travels to Transform and Trainer inside their `custom_config` as JSON, so a
compiled Kubeflow pipeline carries it too, and an edit to it re-runs what it
changes.

Each field is declared once, on its dataclass (kind, default, meaning:
trainer/fields.py); that declaration reads it, refuses unknown fields beside
it, writes it back (`to_dict`), lists it in the docs' field reference
(docs/dataset-spec.md) and gives the schema draft its defaults.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

from trainer.fields import (
    BOOLEAN,
    LIST,
    MAPPING,
    NUMBER,
    REFERENCE_HEADER,
    STRING,
    STRINGS,
    Checks,
    FieldError,
    Kind,
    choice,
    declare,
    defaults_by,
    field_names,
    integer,
    plain,
    reference_rows,
    without_defaults,
)
from trainer.task_metrics import TASK_METRICS

# The dataset spec travels with the model (trainer/export.py writes it): class names in
# probability order. Here, so that a step reads it without importing TensorFlow.
SPEC_ASSET = "assets.extra/dataset_spec.json"

SPEC_FILE_NAME = "dataset.yaml"
SCHEMA_FILE_NAME = "schema.pbtxt"
CUSTOM_CONFIG_KEY = "dataset_spec"
# Transform's name for the label; TFMA and the Trainer read it. Raw columns
# never end in `_xf` in Transform's output, so it cannot collide with one.
LABEL_KEY = "label_xf"
PIPELINE_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")

Task = Literal["binary", "multiclass", "regression"]
FeatureKind = Literal["numeric", "bucketized", "categorical", "hashed", "id"]

# The metric each task is gated on, and whether higher is better (trainer/task_metrics.py).
GATE_METRICS: dict[str, tuple[str, bool]] = {
    task: (metrics.gate, metrics.higher_is_better) for task, metrics in TASK_METRICS.items()
}
# Which raw value types each feature kind can encode.
# Numbers written with a missing-value marker ("NA") are strings to CSV type
# inference; with `missing_markers`, the numeric kinds read such a string column.
KIND_VALUE_TYPES: dict[str, tuple[str, ...]] = {
    "numeric": ("int", "float"),
    "bucketized": ("int", "float"),
    "categorical": ("int", "string"),
    "hashed": ("int", "string"),
    "id": ("int",),
}


# Span placeholders in `input.pattern`, as TFX's ExampleGen reads them.
SPAN_PLACEHOLDER = re.compile(r"\{SPAN(?::(\d+))?\}")
VERSION_PLACEHOLDER = re.compile(r"\{VERSION(?::(\d+))?\}")
DATE_PLACEHOLDERS = ("{YYYY}", "{MM}", "{DD}")
# Drift measures TFDV computes, and the raw value types each one compares.
DriftMeasure = Literal["l_infinity", "jensen_shannon", "quantile_shift"]
DRIFT_MEASURE_VALUE_TYPES: dict[str, tuple[str, ...]] = {
    "l_infinity": ("string",),
    "jensen_shannon": ("int", "float"),
    "quantile_shift": ("int", "float"),
}
# The largest threshold each measure can meaningfully take (quantile_shift is in
# units of the old data's spread, and a shift may be several of them).
DRIFT_MEASURE_MAXIMUM = {"l_infinity": 1.0, "jensen_shannon": 1.0, "quantile_shift": 100.0}
DriftMode = Literal["fail", "warn"]
# The formats ExampleGen reads (components/example_gen/input_files.py FORMATS).
InputFormat = Literal["csv", "parquet"]
# Class names: text or integers, read as text (YAML reads `[0, 1]` as numbers). Not
# booleans or null: `[no, yes]` unquoted would read back as "False" and "True".
CLASS_NAME = Kind(
    "a class name (text or an integer)",
    (str, int),
    lambda v: (isinstance(v, str) and bool(v)) or (isinstance(v, int) and not isinstance(v, bool)),
    str,
)
CLASS_NAMES = replace(LIST, none=(), items=CLASS_NAME)


class DatasetSpecError(FieldError):
    """The dataset spec is malformed or does not fit the data; the message names the field."""


check = Checks(DatasetSpecError)


def model_name(column: str) -> str:
    """The one name raw column `column` goes by inside the model and its serving contract.

    Its Transform output is this plus `_xf` (`transformed_name`), its vocabulary
    file this, its JSON signature input this (trainer/json_signature.py). CSV
    headers hold spaces, punctuation and other scripts ("Body Mass (g)",
    "価格"); TensorFlow op, Keras input and file names may not. So an ASCII
    letter, digit or `_` stays, another ASCII character becomes `_`, any other
    character its code point (`é` becomes `u00e9`, so names in another script
    stay apart), and leading `_` go (an op name cannot start with one).
    tf.Transform's own vocabulary-file sanitizing leaves such a name as it is.
    Two columns with one model name are refused by `model_names`.
    """
    return "".join(
        (c if c.isalnum() or c == "_" else "_") if c.isascii() else f"u{ord(c):04x}" for c in column
    ).lstrip("_")


def transformed_name(column: str) -> str:
    """Name of the Transform output computed from raw column `column`."""
    return model_name(column) + "_xf"


def model_names(columns: Iterable[str], where: str = "features") -> dict[str, str]:
    """Each column's `model_name`, or DatasetSpecError naming both columns where two share
    one (they would share a model input, a vocabulary file and a signature input), and
    naming a column that has none, or whose Transform output would be the label's."""
    names: dict[str, str] = {}
    by_name: dict[str, str] = {}
    for column in columns:
        name = model_name(column)
        if not name:
            raise DatasetSpecError(
                f"{where}.{column}: column {column!r} has no letter or digit to name its "
                "model input by; rename the column"
            )
        if transformed_name(column) == LABEL_KEY:
            raise DatasetSpecError(
                f"{where}.{column}: column {column!r} would become model input {LABEL_KEY!r}, "
                "the label's name inside the model; rename the column"
            )
        other = by_name.setdefault(name, column)
        if other != column:
            raise DatasetSpecError(
                f"{where}.{column}: {column!r} and {other!r} both become model input "
                f"{transformed_name(column)!r} (and vocabulary file and serving input "
                f"{name!r}); rename a column or ignore one"
            )
        names[column] = name
    return names


@dataclass(frozen=True)
class FeatureSpec:
    """One raw column the model reads, and how it is encoded.

    Kinds:
      numeric: z-scored; a missing value becomes the mean (0 after scaling).
        On a string column, values in `missing_markers` (e.g. "NA") are
        missing and the others are parsed as numbers.
      bucketized: `buckets` quantile buckets, embedded; a missing value gets a
        bucket of its own.
      categorical: a vocabulary of the `max_values` most frequent values,
        learned by Transform, plus `oov_buckets` for values it has not seen;
        embedded. A missing value is the empty string, a category of its own.
        `closed: true` says a new value is news (a new payment type), not
        growth (a new company): the schema must then list every value (a
        string domain with no `min_domain_mass` below 1, or an int_domain's
        min and max), so that validation stops a run on any value not in it.
      hashed: `buckets` hash buckets, embedded; for open-ended ids, no pass over
        the data.
      id: integers in [0, num_values), embedded as they are; out-of-range values
        are clipped, a missing value is 0.
    """

    kind: FeatureKind = field(
        metadata=declare(
            choice(FeatureKind),
            "how the column is encoded; a kind takes the settings whose default names it",
        )
    )
    buckets: int | None = field(
        default=None,
        metadata=declare(
            integer(minimum=2),
            "quantile buckets (bucketized) or hash buckets (hashed)",
            defaults_by={"bucketized": 10, "hashed": 1024},
        ),
    )
    max_values: int | None = field(
        default=None,
        metadata=declare(
            integer(minimum=1),
            "the vocabulary's size: the most frequent values Transform keeps",
            defaults_by={"categorical": 1000},
        ),
    )
    oov_buckets: int | None = field(
        default=None,
        metadata=declare(
            integer(minimum=1),
            "buckets for values the vocabulary does not hold",
            defaults_by={"categorical": 10},
        ),
    )
    num_values: int | None = field(
        default=None,
        metadata=declare(
            integer(minimum=2),
            "ids are 0..num_values-1; required (the range is the data's)",
            defaults_by={"id": None},
        ),
    )
    missing_markers: tuple[str, ...] = field(
        default=(),
        metadata=declare(
            STRINGS,
            "cells that mean no value (e.g. [NA]) in a column of numbers read as strings",
            defaults_by={"numeric": (), "bucketized": ()},
        ),
    )
    closed: bool = field(
        default=False,
        metadata=declare(
            BOOLEAN,
            "every value is listed in the schema: a new one stops a run",
            defaults_by={"categorical": False},
        ),
    )

    def category_count(self) -> int | None:
        """Model input size: categories for an embedding, None for a dense float."""
        if self.kind == "numeric":
            return None
        if self.kind == "bucketized":
            return self.setting("buckets") + 1  # + the bucket for missing values
        if self.kind == "categorical":
            return self.setting("max_values") + self.setting("oov_buckets")
        if self.kind == "hashed":
            return self.setting("buckets")
        return self.setting("num_values")

    def setting(self, name: str) -> int:
        """A count this kind requires (`buckets`, `max_values`, ...); loading checked it is set."""
        value = getattr(self, name)
        if value is None:
            raise DatasetSpecError(f"a {self.kind} feature needs {name}, and this one has none")
        return value

    def to_dict(self) -> dict[str, Any]:
        return without_defaults(plain(self), FeatureSpec)


# Settings of each feature kind, with their defaults (the drafter writes them
# out, so a user sees them). `id` has no default: its range is the data's.
FEATURE_SETTINGS: dict[str, dict[str, object]] = {
    kind: defaults_by(FeatureSpec, kind) for kind in get_args(FeatureKind)
}


@dataclass(frozen=True)
class LabelSpec:
    """What the model predicts: a raw `column`, or a label `derive`d from `columns`."""

    task: Task = field(metadata=declare(choice(Task), "what the model predicts"))
    column: str | None = field(
        default=None,
        metadata=declare(STRING.or_none(), "the raw column holding the label; or use `derive`"),
    )
    derive: str | None = field(
        default=None,
        metadata=declare(
            STRING.or_none(),
            "a function in trainer/custom.py that computes the label from the raw `columns` "
            "(a class index, or a float for regression)",
        ),
    )
    columns: tuple[str, ...] = field(
        default=(),
        metadata=declare(
            STRINGS,
            "the raw columns a derived label reads; those that are not features are left out "
            "of serving requests, as `column` is",
        ),
    )
    classes: tuple[str, ...] = field(
        default=(),
        metadata=declare(
            CLASS_NAMES,
            "class names in index order (binary: [negative, positive]); the model's "
            "probabilities follow it",
        ),
    )
    mean: float | None = field(
        default=None,
        metadata=declare(
            NUMBER.or_none(),
            "regression: the label's mean; the model predicts in standard units",
        ),
    )
    std: float | None = field(
        default=None,
        metadata=declare(NUMBER.or_none(), "regression: the label's standard deviation (> 0)"),
    )

    @property
    def source_columns(self) -> tuple[str, ...]:
        """Raw columns the label is computed from."""
        return (self.column,) if self.column else self.columns

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def to_dict(self) -> dict[str, Any]:
        return without_defaults(plain(self), LabelSpec)


@dataclass(frozen=True)
class EvaluationSpec:
    """When a candidate is blessed.

    The absolute threshold comes from the data: the candidate must cut the
    error of a naive model (always the majority class; for regression always
    the mean, whose RMSE is the label's standard deviation) by `margin`.

    `margin` 0.1: accuracy >= 1 - 0.9 * (1 - majority share), or RMSE <= 0.9 * std.
    """

    metric: str = field(
        metadata=declare(
            STRING,
            "the gated metric, fixed by the task",
            defaults_by={task: metric for task, (metric, _) in GATE_METRICS.items()},
        )
    )
    naive_value: float = field(
        metadata=declare(NUMBER, "the naive model's value of `metric` on the data")
    )
    margin: float = field(
        default=0.1,
        metadata=declare(
            NUMBER, "the share of the naive model's error the candidate must remove, in [0, 1]"
        ),
    )
    max_drop: float = field(
        default=0.01,
        metadata=declare(
            NUMBER,
            "how much worse than the model being served the candidate may be, in the "
            "metric's units, and still be blessed",
        ),
    )

    @property
    def higher_is_better(self) -> bool:
        return self.metric != GATE_METRICS["regression"][0]

    @property
    def threshold(self) -> float:
        """The absolute bound on `metric`: lower bound if higher is better, else upper."""
        if self.higher_is_better:
            return 1.0 - (1.0 - self.margin) * (1.0 - self.naive_value)
        return (1.0 - self.margin) * self.naive_value

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


@dataclass(frozen=True)
class InputSpec:
    """Where under the data root a run's files are, and their format.

    A pattern holds TFX's span placeholders: `{SPAN}` (or `{SPAN:4}`,
    zero-padded) or the date `{YYYY}`, `{MM}`, `{DD}` (the span is the day's
    number since 1970-01-01), and optionally `{VERSION}`. A run reads the
    latest span, in its latest version.
    """

    pattern: str | None = field(
        default=None,
        metadata=declare(
            STRING.or_none(),
            "the files of a span, relative to the data root (`span-{SPAN}/*.csv`, "
            "`dt={YYYY}-{MM}-{DD}/*.parquet`); none: every data file under the data root",
        ),
    )
    spans: int = field(
        default=1,
        metadata=declare(
            integer(minimum=1),
            "how many of the latest spans a run reads (a rolling window); needs `pattern`",
        ),
    )
    format: InputFormat | None = field(
        default=None,
        metadata=declare(
            choice(InputFormat).or_none(),
            "the files' format; none: from their extension (`.csv`, `.parquet`), "
            "for files named without one (`part-00000`)",
        ),
    )

    @property
    def has_spans(self) -> bool:
        return self.pattern is not None


@dataclass(frozen=True)
class FeatureDrift:
    """A bound on how far one feature's distribution may move from the served model's data.

    `measure`: l_infinity (the largest change in any one value's share; string
    columns), jensen_shannon (Jensen-Shannon divergence of the two
    distributions over quantile histograms; numeric columns) or
    quantile_shift (the largest move of any decile, 10th to 90th percentile,
    in units of the old data's 10th-to-90th percentile range; numeric
    columns: unlike jensen_shannon, tied and rounded values do not make it
    noisy). `mode`: fail stops the run before the Trainer; warn only reports.
    """

    measure: DriftMeasure
    threshold: float
    mode: DriftMode


@dataclass(frozen=True)
class DriftSpec:
    """Per-feature drift thresholds against the statistics behind the served model."""

    features: Mapping[str, FeatureDrift]

    def to_dict(self) -> dict[str, Any]:
        return {name: asdict(f) for name, f in self.features.items()}

    @classmethod
    def from_dict(cls, values: Mapping[str, Mapping[str, Any]]) -> DriftSpec:
        return cls(features={name: FeatureDrift(**f) for name, f in values.items()})


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

    @classmethod
    def from_custom_config(cls, custom_config: Mapping[str, Any] | None) -> DatasetSpec:
        if not custom_config or CUSTOM_CONFIG_KEY not in custom_config:
            raise DatasetSpecError(
                f"custom_config has no {CUSTOM_CONFIG_KEY!r}: the pipeline passes the "
                "dataset spec to Transform and Trainer; build it with create_pipeline()"
            )
        return parse_spec(json.loads(custom_config[CUSTOM_CONFIG_KEY]))

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


# --- Parsing, with errors that name the field ---------------------------------


def _parse_feature(name: str, values: object) -> FeatureSpec:
    where = f"features.{name}"
    values = check.mapping(values, where)
    kind = check.choice(values.get("kind"), FeatureKind, f"{where}.kind")
    settings = FEATURE_SETTINGS[kind]
    check.no_unknown(values, ["kind", *settings], where)
    if kind == "id" and values.get("num_values") is None:
        raise DatasetSpecError(
            f"{where}.num_values: required for kind id (ids are 0..num_values-1)"
        )
    return check.read(FeatureSpec, {**settings, **values}, where)


def _parse_label(values: object) -> LabelSpec:
    values = check.mapping(values, "label")
    check.no_unknown(values, field_names(LabelSpec), "label")
    task = check.choice(values.get("task"), Task, "label.task")
    column = values.get("column")
    derive = values.get("derive")
    if (column is None) == (derive is None):
        raise DatasetSpecError("label: give exactly one of `column` (a raw column) or `derive`")
    if column is not None:
        column = check.string(column, "label.column")
        if "columns" in values:
            raise DatasetSpecError("label.columns: only for a derived label (`derive`)")
    else:
        derive = check.string(derive, "label.derive")
        if not derive.isidentifier():
            raise DatasetSpecError(
                f"label.derive: {derive!r} is not a function name in trainer/custom.py"
            )
        if not values.get("columns"):
            raise DatasetSpecError("label.columns: a derived label names the raw columns it reads")
    label = check.read(LabelSpec, values, "label", task=task, column=column, derive=derive)
    classes = label.classes
    if task == "regression":
        if classes:
            raise DatasetSpecError("label.classes: a regression label has no classes")
        # Required for regression: None is refused, naming the field.
        check.number(label.mean, "label.mean")
        std = check.number(label.std, "label.std")
        if std <= 0:
            raise DatasetSpecError(f"label.std: must be > 0, got {std}")
    else:
        for key in ("mean", "std"):
            if key in values:
                raise DatasetSpecError(f"label.{key}: only for regression")
        wanted = "exactly 2" if task == "binary" else "at least 3"
        if (task == "binary" and len(classes) != 2) or (task == "multiclass" and len(classes) < 3):
            hint = (
                "; with 2 classes the task is binary"
                if task == "multiclass" and len(classes) == 2
                else ""
            )
            raise DatasetSpecError(
                f"label.classes: a {task} label needs {wanted} classes, got "
                f"{len(classes)} ({list(classes)}){hint}"
            )
        if len(set(classes)) != len(classes):
            raise DatasetSpecError(f"label.classes: duplicates in {list(classes)}")
    return label


def _parse_evaluation(values: object, task: str) -> EvaluationSpec:
    values = check.mapping(values, "evaluation")
    check.no_unknown(values, field_names(EvaluationSpec), "evaluation")
    metric, higher_is_better = GATE_METRICS[task]
    if values.get("metric", metric) != metric:
        raise DatasetSpecError(
            f"evaluation.metric: a {task} task is gated on {metric}, got {values['metric']!r}"
        )
    evaluation = check.read(EvaluationSpec, values, "evaluation", metric=metric)
    naive_value = evaluation.naive_value
    if higher_is_better and not 0.0 <= naive_value <= 1.0:
        raise DatasetSpecError(f"evaluation.naive_value: {metric} is in [0, 1], got {naive_value}")
    if not higher_is_better and naive_value <= 0:
        raise DatasetSpecError(f"evaluation.naive_value: an RMSE must be > 0, got {naive_value}")
    if not 0.0 <= evaluation.margin <= 1.0:
        raise DatasetSpecError(
            f"evaluation.margin: the share of the naive model's error to remove, in [0, 1]; "
            f"got {evaluation.margin}"
        )
    max_drop = evaluation.max_drop
    if max_drop < 0 or (higher_is_better and max_drop > 1):
        raise DatasetSpecError(
            f"evaluation.max_drop: must be >= 0{' and <= 1' if higher_is_better else ''}, "
            f"got {max_drop}"
        )
    return evaluation


def parse_input(values: object) -> InputSpec:
    """The `input:` section (None: a plain directory of CSV files); errors name the field."""
    if values is None:
        return InputSpec()
    data_input = check.read(InputSpec, values, "input")
    pattern, spans = data_input.pattern, data_input.spans
    if pattern is None:
        if spans != 1:
            raise DatasetSpecError(
                "input.spans: a window of spans needs input.pattern, e.g. span-{SPAN}/*.csv"
            )
        return InputSpec(format=data_input.format)
    if pattern.startswith("/") or "://" in pattern or ".." in pattern.split("/"):
        raise DatasetSpecError(
            f"input.pattern: {pattern!r} must be relative to the data root, "
            "e.g. span-{SPAN}/*.csv"
        )
    span_specs = SPAN_PLACEHOLDER.findall(pattern)
    dates = [pattern.count(d) for d in DATE_PLACEHOLDERS]
    if len(span_specs) > 1 or max(dates) > 1:
        raise DatasetSpecError(f"input.pattern: {pattern!r} names the span more than once")
    if span_specs and any(dates):
        raise DatasetSpecError(
            f"input.pattern: {pattern!r} has both {{SPAN}} and date placeholders; use one"
        )
    if any(dates) and not all(dates):
        raise DatasetSpecError(
            f"input.pattern: {pattern!r} needs all of {', '.join(DATE_PLACEHOLDERS)} "
            "for a date span"
        )
    if not span_specs and not any(dates):
        raise DatasetSpecError(
            f"input.pattern: {pattern!r} has no span placeholder: add {{SPAN}} or "
            "{YYYY}-{MM}-{DD}, or leave input.pattern out to read every CSV under the data root"
        )
    if len(VERSION_PLACEHOLDER.findall(pattern)) > 1:
        raise DatasetSpecError(f"input.pattern: {pattern!r} has {{VERSION}} more than once")
    leftover = VERSION_PLACEHOLDER.sub("", SPAN_PLACEHOLDER.sub("", pattern))
    for date in DATE_PLACEHOLDERS:
        leftover = leftover.replace(date, "")
    if "{" in leftover or "}" in leftover:
        raise DatasetSpecError(
            f"input.pattern: {pattern!r} has a placeholder other than {{SPAN}}, {{SPAN:N}}, "
            "{VERSION}, {VERSION:N}, {YYYY}, {MM}, {DD}"
        )
    return data_input


def _parse_drift(values: object, features: Mapping[str, FeatureSpec]) -> DriftSpec:
    if values is None:
        return DriftSpec(features={})
    values = check.mapping(values, "drift")
    check.no_unknown(values, ["mode", "features"], "drift")
    default_mode = check.choice(values.get("mode", "fail"), DriftMode, "drift.mode")
    measures = get_args(DriftMeasure)
    parsed = {}
    for name, entry in check.named(values.get("features") or {}, "drift.features").items():
        where = f"drift.features.{name}"
        if name not in features:
            raise DatasetSpecError(
                f"{where}: {name!r} is not under `features:`; drift is checked on features"
            )
        entry = check.mapping(entry, where)
        check.no_unknown(entry, [*measures, "mode"], where)
        given = [m for m in measures if m in entry]
        if len(given) != 1:
            raise DatasetSpecError(f"{where}: give exactly one of {', '.join(measures)}")
        threshold = check.number(entry[given[0]], f"{where}.{given[0]}")
        maximum = DRIFT_MEASURE_MAXIMUM[given[0]]
        if not 0.0 < threshold <= maximum:
            raise DatasetSpecError(
                f"{where}.{given[0]}: a threshold in (0, {maximum:g}], got {threshold}"
            )
        mode = check.choice(entry.get("mode", default_mode), DriftMode, f"{where}.mode")
        parsed[name] = FeatureDrift(measure=given[0], threshold=threshold, mode=mode)
    return DriftSpec(features=parsed)


def parse_spec(values: object) -> DatasetSpec:
    """A DatasetSpec from plain values (parsed YAML or JSON); errors name the field."""
    values = check.mapping(values, "dataset spec")
    check.no_unknown(values, field_names(DatasetSpec), "")
    name = check.string(values.get("name"), "name")
    if not PIPELINE_NAME_PATTERN.fullmatch(name):
        raise DatasetSpecError(
            f"name: {name!r} must match {PIPELINE_NAME_PATTERN.pattern} (it is the pipeline "
            "name, and Kubeflow Pipelines' rule applies locally too)"
        )
    label = _parse_label(values.get("label"))
    raw_features = check.named(values.get("features"), "features")
    if not raw_features:
        raise DatasetSpecError("features: the model needs at least one feature")
    features = {k: _parse_feature(k, v) for k, v in raw_features.items()}
    model_names(features)
    ignore = check.strings(values.get("ignore"), "ignore")
    slices = check.strings(values.get("slices"), "slices")
    if label.column in features:
        raise DatasetSpecError(f"features.{label.column}: the label cannot also be a feature")
    both = sorted(set(ignore) & (set(features) | set(label.source_columns)))
    if both:
        raise DatasetSpecError(f"ignore: {both} are also used as the label or a feature")
    evaluation = _parse_evaluation(values.get("evaluation"), label.task)
    keys = check.strings(values.get("keys"), "keys")
    for i, key in enumerate(keys):
        if key in features or key in label.source_columns:
            raise DatasetSpecError(
                f"keys[{i}]: {key!r} is {'a feature' if key in features else 'the label'}; "
                "a key is an id column the model never reads"
            )
        if keys.index(key) != i:
            raise DatasetSpecError(f"keys[{i}]: {key!r} is named twice")
    return DatasetSpec(
        name=name,
        label=label,
        features=features,
        evaluation=evaluation,
        ignore=ignore,
        slices=slices,
        keys=keys,
        input=parse_input(values.get("input")),
        drift=_parse_drift(values.get("drift"), features),
    )


def field_reference() -> str:
    """The docs' table of the spec's declared fields (docs/dataset-spec.md holds it)."""
    sections = (
        ("", DatasetSpec),
        ("label", LabelSpec),
        ("features.<column>", FeatureSpec),
        ("evaluation", EvaluationSpec),
        ("input", InputSpec),
    )
    rows = [row for where, cls in sections for row in reference_rows(cls, where)]
    return "\n".join([*REFERENCE_HEADER, *rows]) + "\n"


def load_spec(path: str | Path) -> DatasetSpec:
    """Reads and validates a dataset spec file; errors start with the file's path."""
    path = Path(path)
    if not path.is_file():
        raise DatasetSpecError(
            f"{path}: no dataset spec here; draft one with "
            "`python -m schemas.draft --data-root DIR --label COLUMN --output-dir SCHEMA_DIR`"
        )
    import yaml  # Here, not at the top: the model code imports this module on hosts without it.

    try:
        values = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise DatasetSpecError(f"{path}: not valid YAML: {err}") from None
    try:
        return parse_spec(values)
    except DatasetSpecError as err:
        raise DatasetSpecError(f"{path}: {err}") from None
