"""The sections of a dataset spec: `label:`, `features:`, `evaluation:`, `input:`, `drift:`.

Each is a dataclass whose fields are declared once (kind, default, meaning:
contract/fields.py); that declaration reads it (contract/dataset/parse.py),
refuses unknown fields beside it, writes it back (`to_dict`), lists it in the
docs' field reference (docs/dataset-spec.md) and gives the schema draft its
defaults. The whole file is `DatasetSpec` (contract/dataset/spec.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, get_args

from contract.dataset.error import DatasetSpecError
from contract.dataset.task_metrics import TASK_METRICS
from contract.fields import (
    BOOLEAN,
    LIST,
    NUMBER,
    STRING,
    STRINGS,
    Kind,
    choice,
    declare,
    defaults_by,
    integer,
    plain,
    without_defaults,
)

Task = Literal["binary", "multiclass", "regression"]
FeatureKind = Literal["numeric", "bucketized", "categorical", "hashed", "id"]

# The metric each task is gated on, and whether higher is better (contract/dataset/task_metrics.py).
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
