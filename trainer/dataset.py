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
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

SPEC_FILE_NAME = "dataset.yaml"
SCHEMA_FILE_NAME = "schema.pbtxt"
CUSTOM_CONFIG_KEY = "dataset_spec"
# Transform's name for the label; TFMA and the Trainer read it. Raw columns
# never end in `_xf` in Transform's output, so it cannot collide with one.
LABEL_KEY = "label_xf"
PIPELINE_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")

Task = Literal["binary", "multiclass", "regression"]
FeatureKind = Literal["numeric", "bucketized", "categorical", "hashed", "id"]

# The metric each task is gated on, and whether higher is better.
GATE_METRICS: dict[str, tuple[str, bool]] = {
    "binary": ("binary_accuracy", True),
    "multiclass": ("accuracy", True),
    "regression": ("root_mean_squared_error", False),
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


# Settings of each feature kind, with their defaults (the drafter writes them
# out, so a user sees them). `id` has no default: its range is the data's.
FEATURE_SETTINGS: dict[str, dict[str, object]] = {
    "numeric": {"missing_markers": ()},
    "bucketized": {"buckets": 10, "missing_markers": ()},
    "categorical": {"max_values": 1000, "oov_buckets": 10, "closed": False},
    "hashed": {"buckets": 1024},
    "id": {"num_values": None},
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


class DatasetSpecError(ValueError):
    """The dataset spec is malformed or does not fit the data; the message names the field."""


def transformed_name(column: str) -> str:
    """Name of the Transform output computed from raw column `column`.

    CSV headers may hold spaces and punctuation ("Body Mass (g)"); TensorFlow
    op and Keras input names may not, so those become underscores.
    """
    return re.sub(r"[^A-Za-z0-9_.-]", "_", column).lstrip("._-") + "_xf"


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

    kind: FeatureKind
    buckets: int | None = None
    max_values: int | None = None
    oov_buckets: int | None = None
    num_values: int | None = None
    missing_markers: tuple[str, ...] = ()
    closed: bool = False

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
        values = {k: v for k, v in asdict(self).items() if v is not None}
        if self.missing_markers:
            values["missing_markers"] = list(self.missing_markers)
        else:
            values.pop("missing_markers")
        if not self.closed:
            values.pop("closed")
        return values


@dataclass(frozen=True)
class LabelSpec:
    """What the model predicts.

    Attributes:
      task: binary, multiclass or regression.
      column: the raw column holding the label; or None with `derive`.
      derive: name of a function in `trainer/custom.py` that computes the label
        from the raw `columns` (a class index, or a float for regression).
      columns: raw columns a derived label reads. Those that are not features
        are dropped from serving requests, as `column` is.
      classes: class names in index order (binary: [negative, positive]); the
        model's probabilities follow this order.
      mean, std: the label's mean and standard deviation (regression): the
        model predicts in standard units and rescales with them.
    """

    task: Task
    column: str | None = None
    derive: str | None = None
    columns: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    mean: float | None = None
    std: float | None = None

    @property
    def source_columns(self) -> tuple[str, ...]:
        """Raw columns the label is computed from."""
        return (self.column,) if self.column else self.columns

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["columns"] = list(self.columns)
        values["classes"] = list(self.classes)
        return {k: v for k, v in values.items() if v not in (None, [], ())}


@dataclass(frozen=True)
class EvaluationSpec:
    """When a candidate is blessed.

    The absolute threshold comes from the data: the candidate must cut the
    error of a naive model (always the majority class; for regression always
    the mean, whose RMSE is the label's standard deviation) by `margin`.

    Attributes:
      metric: the gated metric; fixed by the task (see GATE_METRICS).
      naive_value: the naive model's value of `metric` on the data.
      margin: the share of the naive model's error the candidate must remove,
        in [0, 1]. 0.1: accuracy >= 1 - 0.9 * (1 - majority share), or
        RMSE <= 0.9 * std.
      max_drop: how much worse than the baseline (the model being served) the
        candidate may be, in the metric's units, and still be blessed.
    """

    metric: str
    naive_value: float
    margin: float = 0.1
    max_drop: float = 0.01

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
        return asdict(self)


@dataclass(frozen=True)
class InputSpec:
    """Where under the data root a run's CSV files are.

    Attributes:
      pattern: None for a plain directory of CSV files (every file under the
        data root). Otherwise a pattern relative to the data root with TFX's
        span placeholders: `{SPAN}` (or `{SPAN:4}`, zero-padded) or the date
        `{YYYY}`, `{MM}`, `{DD}` (the span is the day's number since
        1970-01-01), and optionally `{VERSION}`: `span-{SPAN}/*.csv`,
        `{YYYY}-{MM}-{DD}/*.csv`. A run reads the latest span, in its latest
        version.
      spans: how many of the latest spans a run reads (a rolling window); 1,
        the default, reads the latest only.
    """

    pattern: str | None = None
    spans: int = 1

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


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset and its task: see the module docstring and docs/bring-your-own-data.md."""

    name: str
    label: LabelSpec
    features: Mapping[str, FeatureSpec]
    evaluation: EvaluationSpec
    ignore: tuple[str, ...] = ()
    slices: tuple[str, ...] = ()
    # Read by the pipeline's ExampleGen and drift gate, not by Transform or the
    # Trainer: not in `to_dict()`, so an edit to either re-runs neither.
    input: InputSpec = InputSpec()
    drift: DriftSpec = field(default_factory=lambda: DriftSpec(features={}))

    @property
    def task(self) -> str:
        return self.label.task

    def model_input_sizes(self) -> dict[str, int | None]:
        """Transformed model inputs and their category counts (None for dense floats).

        The model builder and the preprocessing both derive from this, so a
        feature added in one place cannot silently be missing from the other.
        """
        return {transformed_name(k): f.category_count() for k, f in self.features.items()}

    def serving_excluded_columns(self) -> tuple[str, ...]:
        """Label sources that are not features: absent from serving requests."""
        return tuple(c for c in self.label.source_columns if c not in self.features)

    def to_dict(self) -> dict[str, Any]:
        """What Transform and the Trainer read (and their cache keys hold): not input or drift."""
        return {
            "name": self.name,
            "label": self.label.to_dict(),
            "features": {k: f.to_dict() for k, f in self.features.items()},
            "ignore": list(self.ignore),
            "slices": list(self.slices),
            "evaluation": self.evaluation.to_dict(),
        }

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
        for i, column in enumerate(self.ignore):
            require(f"ignore[{i}]", column)
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
        covered = set(self.features) | set(self.label.source_columns) | set(self.ignore)
        uncovered = [c for c in known if c not in covered]
        if uncovered:
            raise DatasetSpecError(
                f"columns {uncovered} are in the data but neither the label, a feature nor "
                "ignored: add each under `features:` or `ignore:`"
            )


# --- Parsing, with errors that name the field ---------------------------------


def _type_name(value: object) -> str:
    return type(value).__name__


def _mapping(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DatasetSpecError(f"{path}: expected a mapping, got {_type_name(value)}")
    return value


def _reject_unknown(values: Mapping[str, Any], known: Sequence[str], path: str) -> None:
    unknown = sorted(set(values) - set(known))
    if unknown:
        where = f"{path}: " if path else ""
        raise DatasetSpecError(
            f"{where}unknown field(s) {', '.join(unknown)}; known: {', '.join(known)}"
        )


def _str(value: object, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise DatasetSpecError(f"{path}: expected a non-empty string, got {value!r}")
    return value


def _str_list(value: object, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DatasetSpecError(f"{path}: expected a list, got {_type_name(value)}")
    return tuple(_str(v, f"{path}[{i}]") for i, v in enumerate(value))


def _int(value: object, path: str, *, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise DatasetSpecError(f"{path}: expected an integer >= {minimum}, got {value!r}")
    return value


def _float(value: object, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DatasetSpecError(f"{path}: expected a number, got {value!r}")
    return float(value)


def _choice(value: object, literal: Any, path: str) -> Any:
    """`value`, checked to be one of the `Literal` type's values (so typed as that Literal)."""
    choices = get_args(literal)
    if value not in choices:
        raise DatasetSpecError(f"{path}: {value!r} is not one of {', '.join(choices)}")
    return value


def _parse_feature(name: str, values: object) -> FeatureSpec:
    path = f"features.{name}"
    values = _mapping(values, path)
    kind = _choice(values.get("kind"), FeatureKind, f"{path}.kind")
    given = {k: v for k, v in values.items() if k != "kind"}
    _reject_unknown(given, ["kind", *FEATURE_SETTINGS[kind]], path)
    settings = {**FEATURE_SETTINGS[kind], **given}
    if kind == "id" and settings["num_values"] is None:
        raise DatasetSpecError(f"{path}.num_values: required for kind id (ids are 0..num_values-1)")
    minimums = {"buckets": 2, "max_values": 1, "oov_buckets": 1, "num_values": 2}
    markers = _str_list(settings.pop("missing_markers", None) or None, f"{path}.missing_markers")
    closed = settings.pop("closed", False)
    if not isinstance(closed, bool):
        raise DatasetSpecError(f"{path}.closed: expected true or false, got {closed!r}")
    return FeatureSpec(
        kind=kind,
        missing_markers=markers,
        closed=closed,
        **{k: _int(v, f"{path}.{k}", minimum=minimums[k]) for k, v in settings.items()},
    )


def _parse_label(values: object) -> LabelSpec:
    values = _mapping(values, "label")
    _reject_unknown(
        values, ["task", "column", "derive", "columns", "classes", "mean", "std"], "label"
    )
    task = _choice(values.get("task"), Task, "label.task")
    column = values.get("column")
    derive = values.get("derive")
    if (column is None) == (derive is None):
        raise DatasetSpecError("label: give exactly one of `column` (a raw column) or `derive`")
    if column is not None:
        column = _str(column, "label.column")
        if "columns" in values:
            raise DatasetSpecError("label.columns: only for a derived label (`derive`)")
    else:
        derive = _str(derive, "label.derive")
        if not derive.isidentifier():
            raise DatasetSpecError(
                f"label.derive: {derive!r} is not a function name in trainer/custom.py"
            )
        if not values.get("columns"):
            raise DatasetSpecError("label.columns: a derived label names the raw columns it reads")
    columns = _str_list(values.get("columns"), "label.columns")
    raw_classes = values.get("classes")
    if raw_classes is not None and not isinstance(raw_classes, list):
        raise DatasetSpecError(f"label.classes: expected a list, got {_type_name(raw_classes)}")
    classes = tuple(str(c) for c in raw_classes or ())
    mean = std = None
    if task == "regression":
        if classes:
            raise DatasetSpecError("label.classes: a regression label has no classes")
        mean = _float(values.get("mean"), "label.mean")
        std = _float(values.get("std"), "label.std")
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
    return LabelSpec(
        task=task,
        column=column,
        derive=derive,
        columns=columns,
        classes=classes,
        mean=mean,
        std=std,
    )


def _parse_evaluation(values: object, task: str) -> EvaluationSpec:
    values = _mapping(values, "evaluation")
    _reject_unknown(values, ["metric", "naive_value", "margin", "max_drop"], "evaluation")
    metric, higher_is_better = GATE_METRICS[task]
    if values.get("metric", metric) != metric:
        raise DatasetSpecError(
            f"evaluation.metric: a {task} task is gated on {metric}, got {values['metric']!r}"
        )
    naive_value = _float(values.get("naive_value"), "evaluation.naive_value")
    if higher_is_better and not 0.0 <= naive_value <= 1.0:
        raise DatasetSpecError(f"evaluation.naive_value: {metric} is in [0, 1], got {naive_value}")
    if not higher_is_better and naive_value <= 0:
        raise DatasetSpecError(f"evaluation.naive_value: an RMSE must be > 0, got {naive_value}")
    margin = _float(values.get("margin", 0.1), "evaluation.margin")
    if not 0.0 <= margin <= 1.0:
        raise DatasetSpecError(
            f"evaluation.margin: the share of the naive model's error to remove, in [0, 1]; "
            f"got {margin}"
        )
    max_drop = _float(values.get("max_drop", 0.01), "evaluation.max_drop")
    if max_drop < 0 or (higher_is_better and max_drop > 1):
        raise DatasetSpecError(
            f"evaluation.max_drop: must be >= 0{' and <= 1' if higher_is_better else ''}, "
            f"got {max_drop}"
        )
    return EvaluationSpec(metric=metric, naive_value=naive_value, margin=margin, max_drop=max_drop)


def parse_input(values: object) -> InputSpec:
    """The `input:` section (None: a plain directory of CSV files); errors name the field."""
    if values is None:
        return InputSpec()
    values = _mapping(values, "input")
    _reject_unknown(values, ["pattern", "spans"], "input")
    spans = _int(values.get("spans", 1), "input.spans", minimum=1)
    if values.get("pattern") is None:
        if spans != 1:
            raise DatasetSpecError(
                "input.spans: a window of spans needs input.pattern, e.g. span-{SPAN}/*.csv"
            )
        return InputSpec()
    pattern = _str(values["pattern"], "input.pattern")
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
    return InputSpec(pattern=pattern, spans=spans)


def _parse_drift(values: object, features: Mapping[str, FeatureSpec]) -> DriftSpec:
    if values is None:
        return DriftSpec(features={})
    values = _mapping(values, "drift")
    _reject_unknown(values, ["mode", "features"], "drift")
    default_mode = _choice(values.get("mode", "fail"), DriftMode, "drift.mode")
    measures = get_args(DriftMeasure)
    parsed = {}
    for name, entry in _mapping(values.get("features") or {}, "drift.features").items():
        path = f"drift.features.{name}"
        if name not in features:
            raise DatasetSpecError(
                f"{path}: {name!r} is not under `features:`; drift is checked on features"
            )
        entry = _mapping(entry, path)
        _reject_unknown(entry, [*measures, "mode"], path)
        given = [m for m in measures if m in entry]
        if len(given) != 1:
            raise DatasetSpecError(f"{path}: give exactly one of {', '.join(measures)}")
        threshold = _float(entry[given[0]], f"{path}.{given[0]}")
        maximum = DRIFT_MEASURE_MAXIMUM[given[0]]
        if not 0.0 < threshold <= maximum:
            raise DatasetSpecError(
                f"{path}.{given[0]}: a threshold in (0, {maximum:g}], got {threshold}"
            )
        mode = _choice(entry.get("mode", default_mode), DriftMode, f"{path}.mode")
        parsed[str(name)] = FeatureDrift(measure=given[0], threshold=threshold, mode=mode)
    return DriftSpec(features=parsed)


def parse_spec(values: object) -> DatasetSpec:
    """A DatasetSpec from plain values (parsed YAML or JSON); errors name the field."""
    values = _mapping(values, "dataset spec")
    _reject_unknown(
        values,
        ["name", "label", "features", "ignore", "slices", "evaluation", "input", "drift"],
        "",
    )
    name = _str(values.get("name"), "name")
    if not PIPELINE_NAME_PATTERN.fullmatch(name):
        raise DatasetSpecError(
            f"name: {name!r} must match {PIPELINE_NAME_PATTERN.pattern} (it is the pipeline "
            "name, and Kubeflow Pipelines' rule applies locally too)"
        )
    label = _parse_label(values.get("label"))
    raw_features = _mapping(values.get("features"), "features")
    if not raw_features:
        raise DatasetSpecError("features: the model needs at least one feature")
    features = {str(k): _parse_feature(str(k), v) for k, v in raw_features.items()}
    by_model_name: dict[str, str] = {}
    for column in features:
        other = by_model_name.setdefault(transformed_name(column), column)
        if other != column:
            raise DatasetSpecError(
                f"features.{column}: {column!r} and {other!r} both become model input "
                f"{transformed_name(column)!r}; rename a column or ignore one"
            )
    ignore = _str_list(values.get("ignore"), "ignore")
    slices = _str_list(values.get("slices"), "slices")
    if label.column in features:
        raise DatasetSpecError(f"features.{label.column}: the label cannot also be a feature")
    both = sorted(set(ignore) & (set(features) | set(label.source_columns)))
    if both:
        raise DatasetSpecError(f"ignore: {both} are also used as the label or a feature")
    evaluation = _parse_evaluation(values.get("evaluation"), label.task)
    return DatasetSpec(
        name=name,
        label=label,
        features=features,
        evaluation=evaluation,
        ignore=ignore,
        slices=slices,
        input=parse_input(values.get("input")),
        drift=_parse_drift(values.get("drift"), features),
    )


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
