"""Drafts a schema and a dataset spec from CSV data, so a new dataset runs unedited.

    python -m schemas.draft --data-root DIR --label COLUMN --output-dir SCHEMA_DIR
    python local_runner.py --data-root DIR --schema-dir SCHEMA_DIR --output-dir OUT

With `--input-pattern 'span-{SPAN}/*.csv'` (and `--spans N`), DIR holds spans:
the draft reads the spans a run would, and writes the spec's `input:` section.
With `--closed COLUMN`, a categorical column's domain is closed: the schema
lists every value, and a new one stops a run. Other string domains tolerate a
small share of new values, and drift thresholds come from the data's own
noise (see each file's comments).

Writes SCHEMA_DIR/schema.pbtxt (TFDV's inference, curated as far as the data
allows) and SCHEMA_DIR/dataset.yaml (label, task, each column's kind, slices,
thresholds from the data), then reads both back through the same checks the
runner applies. Review and curate both: each file's comments say what was
decided from the data and why.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import re
import statistics
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

from components.spans import SpanPattern
from pipeline import object_store
from pipeline.inputs import InputDataError, check_csv_data_root, check_utf8
from trainer.dataset import (
    FEATURE_SETTINGS,
    GATE_METRICS,
    PIPELINE_NAME_PATTERN,
    SCHEMA_FILE_NAME,
    SPEC_FILE_NAME,
    DatasetSpecError,
    DriftMeasure,
    EvaluationSpec,
    InputSpec,
    Task,
    parse_input,
)

# An int label with at most this many values is a class; more is a quantity.
MAX_INT_CLASSES = 20
# A string label with more values than this is not a classification target.
MAX_STRING_CLASSES = 100
# Int columns with at most this many values are categories (codes, levels).
MAX_INT_CATEGORIES = 10
# Up to this many distinct values a learned vocabulary; above, hash buckets.
MAX_VOCABULARY = 1000
# Columns whose values are (nearly) all distinct carry no signal to learn.
IDENTIFIER_UNIQUE_SHARE = 0.95
IDENTIFIER_MIN_ROWS = 50
# Slices: string columns with few values, up to this many columns.
MAX_SLICE_VALUES = 10
MAX_SLICES = 2
# Cells that mean "no value" in exports that do not leave them empty. A column of
# numbers with such cells is typed as strings; the spec reads it as numbers.
MISSING_MARKERS = ("NA", "N/A", "NaN", "nan", "NULL", "null", "None", "?", "-", ".")
# Rows read for the spec's decisions; the schema's statistics use all rows.
MAX_ROWS_READ = 200_000
DEFAULT_MARGIN = 0.1
# Drift thresholds come from the data's own noise: each feature's measure between
# the two halves of NOISE_REPEATS random splits of (at most NOISE_ROWS of) the
# rows, the largest value times NOISE_MULTIPLE, and never below the measure's
# floor. Halves are smaller than the training splits a run compares, so noisier:
# the margin errs against false alarms.
NOISE_ROWS = 50_000
NOISE_REPEATS = 5
NOISE_MULTIPLE = 3.0
DRIFT_FLOORS = {"l_infinity": 0.03, "quantile_shift": 0.1}
# A numeric threshold lets a decile move this many of the column's smallest steps
# (a day of the week, a tenth of a mile) without alarm.
ONE_STEP_MARGIN = 1.5
# Open string domains tolerate values the draft has not seen, up to a share of
# UNSEEN_MULTIPLE times the Good-Turing estimate of that share (the share of
# values seen once), within these bounds. A larger share of new values is a
# domain change and stops the run.
UNSEEN_MULTIPLE = 3.0
UNSEEN_SHARE_BOUNDS = (0.02, 0.2)


class DraftError(ValueError):
    """The data cannot be drafted as asked; the message says why."""


@dataclass(frozen=True)
class ColumnProfile:
    """What the draft knows of one column, from the rows it read."""

    name: str
    value_type: str  # int | float | string, as CsvExampleGen types it
    rows: int
    missing: int
    counts: Counter

    @property
    def present(self) -> int:
        return self.rows - self.missing

    @property
    def distinct(self) -> int:
        return len(self.counts)

    def numbers(self) -> list[float]:
        """Every present value, as a float (a numeric column's)."""
        return [float(v) for v, n in self.counts.items() for _ in range(n)]

    @property
    def nan_count(self) -> int:
        """Cells that read as NaN (a float column's "NaN", "nan")."""
        if self.value_type != "float":
            return 0
        return sum(n for v, n in self.counts.items() if math.isnan(v))

    @property
    def singletons(self) -> int:
        """Values seen exactly once."""
        return sum(1 for n in self.counts.values() if n == 1)

    def unseen_share(self) -> float:
        """The share of values a new sample may hold that this one has not shown: the
        Good-Turing estimate (values seen once, over all values), with a margin."""
        estimate = UNSEEN_MULTIPLE * self.singletons / max(self.present, 1)
        low, high = UNSEEN_SHARE_BOUNDS
        return min(high, max(low, math.ceil(estimate * 100) / 100))

    def describe(self) -> str:
        text = f"{self.value_type}, {self.distinct} distinct"
        if self.missing:
            text += f", {self.missing} of {self.rows} missing"
        if self.value_type != "string" and self.counts:
            finite = _finite(self.counts)
            text += f", {_number(min(finite))}..{_number(max(finite))}"
        if self.nan_count:
            text += f", {self.nan_count} NaN"
        return text


def _number(value: float) -> str:
    return f"{value:.6g}"


def _typed(value: str, value_type: str):
    if value_type == "int":
        return int(value)
    if value_type == "float":
        return float(value)
    return value


# Value types from narrowest to widest: a column is the narrowest every value parses as.
VALUE_TYPES = ("int", "float", "string")


def _typed_counts(counts: Counter, at_least: str) -> tuple[str, Counter]:
    """The narrowest of VALUE_TYPES, no narrower than `at_least`, that parses every value
    counted in `counts`, and the counts keyed by the values so parsed."""
    for value_type in VALUE_TYPES[VALUE_TYPES.index(at_least) :]:
        typed: Counter = Counter()
        try:
            for value, n in counts.items():
                typed[_typed(value, value_type)] += n
        except ValueError:
            continue
        return value_type, typed
    raise AssertionError("every value parses as a string")


def read_profiles(csv_files: Sequence[str], types: dict[str, str]) -> dict[str, ColumnProfile]:
    """Each column's profile over the rows of `csv_files` (at most MAX_ROWS_READ).

    `types` are TFDV's, inferred from one span's statistics; a column is
    widened where the rows read here hold a value that type cannot take (a
    `2.5` in an older span of a column the latest types int): the draft's
    types come from the same rows as its profiles. A file that is not CSV is
    a DraftError naming the file and line.
    """
    raw: dict[str, Counter[str]] = {name: Counter() for name in types}
    missing: Counter[str] = Counter()
    rows = 0
    for path in csv_files:
        with object_store.open_text(path) as f:
            reader = csv.DictReader(f)
            try:
                for row in reader:
                    rows += 1
                    for name in types:
                        value = row.get(name) or ""
                        if value == "":
                            missing[name] += 1
                        else:
                            raw[name][value] += 1
                    if rows >= MAX_ROWS_READ:
                        break
            except csv.Error as err:
                # DictReader's own line_num lags a line behind its reader's on an error.
                raise DraftError(f"{path}: line {reader.reader.line_num}: {err}") from None
        if rows >= MAX_ROWS_READ:
            break
    profiles = {}
    for name, counts in raw.items():
        value_type, typed = _typed_counts(counts, at_least=types[name])
        profiles[name] = ColumnProfile(name, value_type, rows, missing[name], typed)
    return profiles


def widen_schema(schema, widened: dict[str, str]) -> None:
    """Retypes `widened`'s columns (name -> float | string) in TFDV's inferred schema,
    dropping the domain the narrower type had."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    proto_types = {"float": schema_pb2.FLOAT, "string": schema_pb2.BYTES}
    for feature in schema.feature:
        if feature.name in widened:
            feature.type = proto_types[widened[feature.name]]
            feature.ClearField("domain_info")


def infer_task(label: ColumnProfile, requested: Task | None) -> Task:
    """The task for `label`: 2 values binary; a few strings or ints multiclass; else regression."""
    if label.missing:
        raise DraftError(
            f"label {label.name!r} is empty in {label.missing} of {label.rows} rows: "
            "drop those rows (a label is required in training data)"
        )
    if label.distinct < 2:
        only = next(iter(label.counts), "")
        raise DraftError(
            f"label {label.name!r} has one value ({only!r}) in all {label.rows} rows: "
            "nothing to learn"
        )
    if requested:
        if requested == "regression" and label.value_type == "string":
            raise DraftError(f"--task regression: label {label.name!r} holds strings")
        if requested == "binary" and label.distinct != 2:
            raise DraftError(
                f"--task binary: label {label.name!r} has {label.distinct} values, not 2"
            )
        if requested == "multiclass" and label.distinct < 3:
            raise DraftError(
                f"--task multiclass: label {label.name!r} has {label.distinct} values "
                "(a multiclass label needs at least 3; with 2 it is binary)"
            )
        if requested != "regression" and label.distinct > MAX_STRING_CLASSES:
            raise DraftError(
                f"--task {requested}: label {label.name!r} has {label.distinct} values, "
                f"more than {MAX_STRING_CLASSES} classes"
            )
        return requested
    if label.distinct == 2:
        return "binary"
    if label.value_type == "string":
        if label.distinct > MAX_STRING_CLASSES:
            raise DraftError(
                f"label {label.name!r} holds {label.distinct} distinct strings: too many "
                f"classes (at most {MAX_STRING_CLASSES}); is it the right column?"
            )
        return "multiclass"
    if label.value_type == "int" and label.distinct <= MAX_INT_CLASSES:
        return "multiclass"
    return "regression"


def decide_column(profile: ColumnProfile) -> tuple[dict | None, str]:
    """(feature settings or None to ignore, the reason in words)."""
    if profile.present == 0:
        return None, "always empty"
    if profile.distinct == 1:
        return None, f"one value only ({next(iter(profile.counts))!r})"
    looks_unique = (
        profile.present >= IDENTIFIER_MIN_ROWS
        and profile.distinct >= IDENTIFIER_UNIQUE_SHARE * profile.present
    )
    if profile.value_type == "float":
        return {"kind": "numeric"}, "float values"
    if profile.value_type == "int":
        if looks_unique:
            return None, "a different value in (nearly) every row: an identifier"
        if profile.distinct <= MAX_INT_CATEGORIES:
            return _categorical(profile), f"{profile.distinct} integer codes"
        return {"kind": "numeric"}, "integer quantity"
    markers = number_markers(profile)
    if markers:
        marked = sum(profile.counts[m] for m in markers)
        return {"kind": "numeric", "missing_markers": markers}, (
            f"numbers, with {', '.join(markers)} for missing ({marked} cells)"
        )
    if looks_unique:
        return None, "a different string in (nearly) every row: an identifier or free text"
    if profile.distinct <= MAX_VOCABULARY:
        return _categorical(profile), f"{profile.distinct} string values"
    buckets = 2 ** math.ceil(math.log2(profile.distinct))
    return {"kind": "hashed", "buckets": min(buckets, 1 << 16)}, (
        f"{profile.distinct} string values: hashed, no vocabulary"
    )


def number_markers(profile: ColumnProfile) -> list[str]:
    """The missing-value markers of a string column that otherwise holds numbers, else []."""
    markers, numbers = [], 0
    for value in profile.counts:
        try:
            float(value)
        except ValueError:
            if value not in MISSING_MARKERS:
                return []
            markers.append(value)
        else:
            numbers += 1
    return sorted(markers) if markers and numbers >= 2 else []


def _categorical(profile: ColumnProfile) -> dict:
    # Room for values the sample has not shown yet; unseen ones go to OOV buckets.
    max_values = min(MAX_VOCABULARY, max(10, 2 * profile.distinct))
    return {"kind": "categorical", "max_values": max_values, "oov_buckets": 10}


def _class_names(label: ColumnProfile) -> list[str]:
    values = sorted(label.counts)
    return [str(v) for v in values]


def naive_value(label: ColumnProfile, task: str) -> tuple[float, str]:
    """The gate metric of a naive model on the data, and what that model is."""
    if task == "regression":
        std = statistics.pstdev(label.numbers())
        return std, "always predicting the mean: its RMSE is the std dev"
    value, count = label.counts.most_common(1)[0]
    share = count / label.present
    return share, f"always answering {str(value)!r} ({count} of {label.present} rows)"


def pipeline_name_for(data_root: Path) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", data_root.resolve().name.lower()).strip("-")
    name = name[:128] or "my-dataset"
    return name if PIPELINE_NAME_PATTERN.fullmatch(name) else "my-dataset"


# --- The schema ----------------------------------------------------------------


def _finite(values) -> list[float]:
    """The values that are not NaN (min() of a list holding NaN depends on its order)."""
    return [v for v in values if not (isinstance(v, float) and math.isnan(v))] or [0]


def curate_schema(
    inferred,
    profiles: dict[str, ColumnProfile],
    label: str,
    task: str,
    ignored: set[str],
    marked_numbers: set[str],
    closed: AbstractSet[str] = frozenset(),
):
    """TFDV's inferred schema, tightened and loosened where the data says so (a copy).

    `closed`: categorical columns whose every value is listed (a new one stops a
    run); the other string domains tolerate a small share of new values.
    """
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    schema.CopyFrom(inferred)
    schema.ClearField("default_environment")
    schema.default_environment.extend(["TRAINING", "SERVING"])
    for feature in schema.feature:
        profile = profiles[feature.name]
        if feature.type == schema_pb2.FLOAT and feature.name not in ignored:
            # A "NaN" cell is a float to CSV type inference; unchecked, it trains a model
            # that answers one constant. The validation gate names the feature and count.
            feature.float_domain.disallow_nan = True
        if feature.name == label:
            # Required in training data, absent from serving requests.
            feature.value_count.min = 1
            feature.value_count.max = 1
            feature.presence.min_fraction = 1.0
            feature.presence.min_count = 1
            feature.not_in_environment.append("SERVING")
            if task != "regression":
                # Every class seen: a new label value stops the run instead of
                # training as class 0.
                _close_domain(schema, feature, profile)
            continue
        # CsvExampleGen writes an empty cell as a feature with no values, and TFDV's
        # `min: 1` would call every empty cell an anomaly: the next span may have one
        # where this data had none, and Transform fills them (the mean, an empty
        # category). Only the label is required.
        feature.value_count.ClearField("min")
        feature.value_count.max = 1
        # Ignored columns, and numbers read as strings: no closed string domain.
        if (feature.name in ignored or feature.name in marked_numbers) and feature.HasField(
            "domain"
        ):
            feature.ClearField("domain")
        if feature.name in ignored:
            feature.presence.Clear()
            feature.presence.min_count = 0
            # Validation and Transform skip it: a column empty in the draft (typed as
            # strings) that fills with numbers later must not stop a run.
            feature.lifecycle_stage = schema_pb2.DEPRECATED
        elif (
            feature.type in (schema_pb2.INT, schema_pb2.FLOAT)
            and profile.counts
            and min(_finite(profile.counts)) >= 0
        ):
            # Counts, amounts and sizes: a negative value is a broken export.
            if feature.type == schema_pb2.INT:
                feature.int_domain.min = 0
            else:
                feature.float_domain.min = 0.0
        if feature.name in closed:
            _close_domain(schema, feature, profile)
        elif feature.name != label and feature.HasField("domain"):
            # Companies come and go: a few unseen values go to Transform's OOV buckets.
            mass = round(1.0 - profile.unseen_share(), 2)
            feature.distribution_constraints.min_domain_mass = mass
    used = {f.domain for f in schema.feature if f.HasField("domain")}
    kept = [d for d in schema.string_domain if d.name in used]
    schema.ClearField("string_domain")
    schema.string_domain.extend(kept)
    return schema


def _close_domain(schema, feature, profile: ColumnProfile) -> None:
    """Every value seen, and no other: strings listed in a domain, int codes bounded."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    if feature.type == schema_pb2.BYTES:
        name = feature.domain or feature.name
        for domain in list(schema.string_domain):
            if domain.name == name:
                schema.string_domain.remove(domain)
        domain = schema.string_domain.add(name=name)
        domain.value.extend(sorted(str(v) for v in profile.counts))
        feature.domain = name
        feature.ClearField("distribution_constraints")
    elif feature.type == schema_pb2.INT:
        feature.int_domain.min = min(profile.counts)
        feature.int_domain.max = max(profile.counts)


SCHEMA_HEADER = """\
# Schema drafted by `python -m schemas.draft` from {data_root} ({rows} rows) on {date}.
# TFDV inferred types, domains and presence from the data; the draft then:
#   * requires the label `{label}` in training data and leaves it out of
#     serving requests (SERVING environment){label_domain};
#   * gives every other column `value_count {{ max: 1 }}`: CsvExampleGen writes
#     an empty cell as a feature with no values, the next span may have one
#     where this data had none, and Transform fills them (the mean, an empty
#     category);
#   * bounds numeric columns that are never negative below by 0, and refuses
#     NaN in float columns (`disallow_nan`): CSV type inference reads a "NaN"
#     cell as a float, and unchecked it trains a model that answers a constant;
#   * leaves string domains open to a few new values, as the next span brings
#     them (a new company, a new street): `distribution_constraints {{
#     min_domain_mass }}` lets that share of values fall outside the domain.
#     The share is three times the Good-Turing estimate of how much of a new
#     sample this one has not seen (the share of values seen once), between 2%
#     and 20%; Transform maps such values to out-of-vocabulary buckets. A larger
#     share of new values is a domain change and stops the run:
{open_domains}
#   * closes the domains of the columns dataset.yaml marks `closed: true`
#     (every value listed: a new one is news and stops the run): {closed};
#   * marks the columns dataset.yaml ignores `lifecycle_stage: DEPRECATED`:
#     validation and Transform skip them, so an ignored column that was empty
#     here and fills with numbers later stops nothing.
# Review it: tighten ranges and domains where the world is closed (and mark
# those columns closed in dataset.yaml). The ExampleValidator stops a run on
# any anomaly against this file.

"""


def _open_domain_lines(schema, profiles: dict[str, ColumnProfile]) -> str:
    lines = [
        f"#       {f.name}: at least {f.distribution_constraints.min_domain_mass:g} in the "
        f"domain ({profiles[f.name].singletons} of "
        f"{profiles[f.name].present} values seen once)"
        for f in schema.feature
        if f.distribution_constraints.HasField("min_domain_mass")
    ]
    return "\n".join(lines) or "#       (none: no string column has a domain)"


# --- The dataset spec ------------------------------------------------------------


def _yaml_scalar(value) -> str:
    import yaml

    return (
        yaml.safe_dump(value, default_flow_style=True, width=10_000)
        .strip()
        .removesuffix("\n...")
        .strip()
    )


def _flow(settings: dict) -> str:
    return "{" + ", ".join(f"{k}: {_yaml_scalar(v)}" for k, v in settings.items()) + "}"


def render_spec(
    *,
    name: str,
    data_root: Path,
    label: ColumnProfile,
    task: str,
    decisions: dict[str, tuple[dict | None, str]],
    slices: list[str],
    profiles: dict[str, ColumnProfile],
    drift_thresholds: Mapping[str, tuple[str, float, float]],
    data_input: InputSpec | None = None,
) -> str:
    """The dataset spec's text. `drift_thresholds`: feature -> (measure, threshold, the
    noise it was derived from)."""
    metric, higher_is_better = GATE_METRICS[task]
    naive, naive_model = naive_value(label, task)
    lines = [
        f"# Dataset spec drafted by `python -m schemas.draft` from {data_root} "
        f"({label.rows} rows) on {datetime.date.today().isoformat()}.",
        "# Every field: trainer/dataset.py. Curate it: kinds, slices, thresholds.",
        "",
        f"name: {name}",
        "",
        "label:",
        f"  task: {task}   # binary | multiclass | regression",
        f"  column: {_yaml_scalar(label.name)}   # {label.describe()}",
    ]
    if task == "regression":
        lines += [
            "  # The model predicts in standard units and rescales with these.",
            f"  mean: {_number(statistics.fmean(label.numbers()))}",
            f"  std: {_number(naive)}",  # The naive model's RMSE is the std dev.
        ]
    else:
        classes = _class_names(label)
        order = "[negative, positive]" if task == "binary" else "in probability order"
        lines.append(f"  classes: {_yaml_scalar(classes)}   # {order}")
    if data_input is not None and data_input.has_spans:
        lines += [
            "",
            "# Where a run's files are under the data root: the latest span"
            + (f" and the {data_input.spans - 1} before it." if data_input.spans > 1 else "."),
            "input:",
            f"  pattern: {_yaml_scalar(data_input.pattern)}",
            f"  spans: {data_input.spans}",
        ]
    lines += ["", "features:"]
    ignored = []
    for column, (settings, reason) in decisions.items():
        if settings is None:
            ignored.append((column, reason))
            continue
        full = dict(settings)  # `kind` first, as decide_column builds it.
        for key, default in FEATURE_SETTINGS[settings["kind"]].items():
            if default != ():  # Optional lists (missing_markers) only where needed.
                full.setdefault(key, default)
        lines.append(
            f"  {_yaml_scalar(column)}: {_flow(full)}   # {profiles[column].describe()}: {reason}"
        )
    lines += ["", "ignore:"]
    if ignored:
        lines += [f"  - {_yaml_scalar(c)}   # {reason}" for c, reason in ignored]
    else:
        lines[-1] = "ignore: []"
    lines += [
        "",
        "# Metrics are reported per value of these columns; only the whole eval set is gated.",
        f"slices: {_yaml_scalar(slices)}",
        "",
        "evaluation:",
        f"  metric: {metric}",
        f"  # The naive model: {naive_model}.",
        f"  naive_value: {_number(naive)}",
    ]
    threshold = EvaluationSpec(metric=metric, naive_value=naive, margin=DEFAULT_MARGIN).threshold
    lines += [
        f"  # Blessed only when it removes this share of the naive model's error: "
        f"{metric} {'>=' if higher_is_better else '<='} {_number(threshold)}.",
        f"  margin: {DEFAULT_MARGIN}",
    ]
    max_drop = 0.01 if higher_is_better else float(_number(0.01 * naive))
    lines += [
        f"  # And at most this much worse than the model being served ({metric} units).",
        f"  max_drop: {_number(max_drop)}",
        "",
        "# New data against the data that trained the served model: a feature beyond its",
        "# threshold stops the run before training (mode: warn only reports it).",
        "# l_infinity: the largest change in one value's share (string columns);",
        "# quantile_shift: the largest move of a decile (10th..90th percentile), over the",
        "# old data's 10th-to-90th percentile range (numeric columns).",
        f"# Each threshold is {NOISE_MULTIPLE:g} times the noise: the largest value its measure",
        f"# took between the halves of {NOISE_REPEATS} random splits of these rows, as between",
        "# two samples of unchanged data (at least "
        + ", ".join(f"{m} {v:g}" for m, v in DRIFT_FLOORS.items())
        + "; and for numbers",
        f"# {ONE_STEP_MARGIN:g} times the column's smallest step, as a decile of rounded or "
        "integer",
        "# values moves a step at a time). Spans much smaller than the rows drafted from",
        "# are noisier: raise a threshold, or set its mode: warn, if unchanged data trips it.",
        "drift:",
        "  mode: fail",
        "  features:",
    ]
    for column, (measure, threshold, noise) in drift_thresholds.items():
        lines.append(
            f"    {_yaml_scalar(column)}: {{{measure}: {_number(threshold)}}}   # noise {noise:.2g}"
        )
    lines.append("")
    return "\n".join(lines)


def drift_thresholds(
    csv_files: Sequence[str], types: dict[str, str], schema, measures: dict[str, DriftMeasure]
) -> dict[str, tuple[DriftMeasure, float, float]]:
    """Feature -> (measure, threshold, noise): the noise is the largest value the
    measure takes between two random halves of the rows (the drift gate's own code
    measures it), the threshold NOISE_MULTIPLE times that, above the measure's floor."""
    import numpy as np
    import tensorflow_data_validation as tfdv

    from components.drift_gate import compare
    from trainer.dataset import DRIFT_MEASURE_MAXIMUM, DriftSpec, FeatureDrift

    frame = _sample_frame(csv_files, {c: types[c] for c in measures}, NOISE_ROWS)
    spec = DriftSpec(features={c: FeatureDrift(m, 1.0, "warn") for c, m in measures.items()})
    noise = dict.fromkeys(measures, 0.0)
    random = np.random.default_rng(0)  # The same draft from the same data.
    for _ in range(NOISE_REPEATS):
        order = random.permutation(len(frame))
        half = len(order) // 2
        first = tfdv.generate_statistics_from_dataframe(frame.iloc[order[:half]])
        second = tfdv.generate_statistics_from_dataframe(frame.iloc[order[half:]])
        for comparison in compare(first, second, schema, spec):
            if comparison.value is not None and math.isfinite(comparison.value):
                noise[comparison.feature] = max(noise[comparison.feature], comparison.value)
    thresholds = {}
    for column, measure in measures.items():
        lowest = DRIFT_FLOORS[measure]
        if measure == "quantile_shift":
            # A decile of rounded or integer values moves a whole step at a time: one
            # step is noise that 5 splits may not show, two are a shift.
            lowest = max(lowest, ONE_STEP_MARGIN * _step_share(frame[column]))
        threshold = _round_up(max(lowest, NOISE_MULTIPLE * noise[column]))
        threshold = min(DRIFT_MEASURE_MAXIMUM[measure], threshold)
        thresholds[column] = (measure, threshold, noise[column])
    return thresholds


def _step_share(values) -> float:
    """The smallest gap between two distinct values, over the 10th-to-90th percentile
    range: how far one step moves a decile in quantile_shift's units (0 if no spread)."""
    import numpy as np

    present = np.asarray(values.dropna(), dtype=float)
    if present.size < 2:
        return 0.0
    low, high = np.quantile(present, [0.1, 0.9])
    distinct = np.unique(present)
    if high <= low or distinct.size < 2:
        return 0.0
    return float(np.min(np.diff(distinct)) / (high - low))


def _round_up(value: float) -> float:
    """`value` rounded up to two significant digits (0.0291 -> 0.03, 0.4217 -> 0.43)."""
    if value <= 0:
        return 0.0
    digits = 1 - math.floor(math.log10(value))
    step = 10.0**-digits
    return round(math.ceil(round(value / step, 9)) * step, digits)


def _sample_frame(csv_files: Sequence[str], types: dict[str, str], limit: int):
    """`limit` rows drawn evenly across all of `csv_files` (a reservoir sample, seeded:
    the same draft from the same data), `types`' columns as a DataFrame: numbers as
    floats (NaN where empty), strings as text (None where empty).

    Drawn across the data, not taken from its head: sorted or time-ordered data
    would otherwise measure the noise of its first rows only.
    """
    import random

    import pandas as pd

    names = list(types)
    sample: list[tuple[str, ...]] = []
    chooser = random.Random(0)
    seen = 0
    for path in csv_files:
        with object_store.open_text(path) as f:
            for row in csv.DictReader(f):
                values = tuple(row.get(name) or "" for name in names)
                if len(sample) < limit:
                    sample.append(values)
                else:
                    slot = chooser.randrange(seen + 1)
                    if slot < limit:
                        sample[slot] = values
                seen += 1
    columns: dict[str, list] = {name: [] for name in names}
    for values in sample:
        for name, value in zip(names, values, strict=True):
            if types[name] == "string":
                columns[name].append(value or None)
            else:
                columns[name].append(float(value) if value else math.nan)
    return pd.DataFrame(columns)


def drift_measure(value_type: str) -> DriftMeasure:
    """The drift measure the draft writes for a column of `value_type`."""
    return "l_infinity" if value_type == "string" else "quantile_shift"


def choose_slices(decisions: dict[str, tuple[dict | None, str]], profiles) -> list[str]:
    candidates = [
        profiles[c]
        for c, (settings, _) in decisions.items()
        if settings is not None
        and profiles[c].value_type == "string"
        and 2 <= profiles[c].distinct <= MAX_SLICE_VALUES
    ]
    candidates.sort(key=lambda p: (p.distinct, p.name))
    return [p.name for p in candidates[:MAX_SLICES]]


def draft(
    data_root: Path,
    label: str,
    output_dir: Path,
    *,
    task: Task | None = None,
    name: str | None = None,
    force: bool = False,
    input_pattern: str | None = None,
    spans: int = 1,
    closed: Sequence[str] = (),
) -> str:
    """Writes OUTPUT_DIR/schema.pbtxt and dataset.yaml; returns a summary to print.

    `input_pattern`, `spans`: the data root holds spans (the spec's `input:`);
    the draft reads the spans a run would read. `closed`: categorical columns
    whose every value the schema lists (a new value stops a run).
    """
    import tensorflow_data_validation as tfdv

    from schemas import column_types, load_schema_dir

    try:
        data_input = parse_input({"pattern": input_pattern, "spans": spans})
    except DatasetSpecError as err:
        raise DraftError(f"--input-pattern/--spans: {err}") from None
    try:
        data = check_csv_data_root(data_root, data_input.pattern, data_input.spans)
        # TFDV's statistics and the profiles below read every row.
        for path in data.files:
            check_utf8(path)
    except InputDataError as err:
        raise DraftError(str(err)) from None
    if label not in data.header:
        raise DraftError(
            f"--label {label!r} is not a column of the data (columns: {', '.join(data.header)})"
        )
    targets = [output_dir / SCHEMA_FILE_NAME, output_dir / SPEC_FILE_NAME]
    existing = [str(p) for p in targets if p.exists()]
    if existing and not force:
        raise DraftError(
            f"{', '.join(existing)} already exist(s); a draft never overwrites a curated "
            "file: choose another --output-dir, or pass --force"
        )
    name = name or pipeline_name_for(data_root)
    if not PIPELINE_NAME_PATTERN.fullmatch(name):
        raise DraftError(f"--name {name!r} must match {PIPELINE_NAME_PATTERN.pattern}")

    # Types as TFDV (and so CsvExampleGen) infers them from the data.
    inferred = tfdv.infer_schema(
        tfdv.generate_statistics_from_csv(
            data_location=_statistics_location(data_root, data_input, data)
        ),
        infer_feature_shape=False,
    )
    types = column_types(inferred)
    profiles = read_profiles(data.files, types)
    widened = {c: p.value_type for c, p in profiles.items() if p.value_type != types[c]}
    widen_schema(inferred, widened)
    types.update(widened)
    label_profile = profiles[label]
    task = infer_task(label_profile, task)
    decisions = {c: decide_column(profiles[c]) for c in types if c != label}
    if all(settings is None for settings, _ in decisions.values()):
        raise DraftError(
            "no column can be a feature: "
            + "; ".join(f"{c}: {reason}" for c, (_, reason) in decisions.items())
        )
    for column in closed:
        settings = decisions.get(column, (None, ""))[0]
        if settings is None or settings["kind"] != "categorical":
            kind = settings["kind"] if settings else "not a feature"
            raise DraftError(
                f"--closed {column!r}: only a categorical feature's domain can be closed; "
                f"the draft makes {column!r} {kind}"
                + ("" if column in decisions or column == label else " (no such column)")
            )
        settings["closed"] = True
    slices = choose_slices(decisions, profiles)
    ignored = {c for c, (settings, _) in decisions.items() if settings is None}
    marked_numbers = {
        c for c, (settings, _) in decisions.items() if settings and settings.get("missing_markers")
    }
    schema = curate_schema(
        inferred, profiles, label, task, ignored, marked_numbers, closed=set(closed)
    )
    measures: dict[str, DriftMeasure] = {
        c: drift_measure(profiles[c].value_type)
        for c, (settings, _) in decisions.items()
        if settings is not None
    }
    spec_text = render_spec(
        name=name,
        data_root=data_root,
        label=label_profile,
        task=task,
        decisions=decisions,
        slices=slices,
        profiles=profiles,
        drift_thresholds=drift_thresholds(data.files, types, schema, measures),
        data_input=data_input,
    )

    from google.protobuf import text_format

    output_dir.mkdir(parents=True, exist_ok=True)
    label_domain = "" if task == "regression" else ", with every class in its domain"
    header_text = SCHEMA_HEADER.format(
        data_root=data_root,
        rows=label_profile.rows,
        date=datetime.date.today().isoformat(),
        label=label,
        label_domain=label_domain,
        open_domains=_open_domain_lines(schema, profiles),
        closed=", ".join(closed) or "none (draft with --closed COLUMN to close one)",
    )
    (output_dir / SCHEMA_FILE_NAME).write_text(header_text + text_format.MessageToString(schema))
    (output_dir / SPEC_FILE_NAME).write_text(spec_text)
    # The runner's own checks, so a draft that would not run fails here.
    checked = load_schema_dir(output_dir)
    spec = checked.spec
    kinds = Counter(f.kind for f in spec.features.values())
    gate = spec.evaluation
    return "\n".join(
        [
            f"Drafted {spec.name}: {spec.task} on label {label!r}"
            + (f" (classes {list(spec.label.classes)})" if spec.label.classes else ""),
            "  features: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())),
            f"  ignored: {', '.join(spec.ignore) or 'none'}",
            f"  slices: {', '.join(spec.slices) or 'none'}",
            *(
                [
                    f"  input: {spec.input.pattern}, drafted from span(s) "
                    + ", ".join(str(s.span) for s in data.spans)
                ]
                if spec.input.has_spans
                else []
            ),
            *(
                f"  typed {column} {value_type}: the spans read hold values the latest "
                "span's types cannot take"
                for column, value_type in sorted(widened.items())
            ),
            f"  blessed when {gate.metric} {'>=' if gate.higher_is_better else '<='} "
            f"{gate.threshold:.4f} (naive model: {gate.naive_value:.4f})",
            *(
                f"  warning: {p.name} holds {p.nan_count} NaN cell(s); the schema refuses NaN "
                "(disallow_nan), so a run on this data stops at validation: drop or fill them"
                for p in profiles.values()
                if p.nan_count and p.name not in spec.ignore
            ),
            f"Wrote {output_dir / SCHEMA_FILE_NAME} and {output_dir / SPEC_FILE_NAME}.",
            f"Next: ./dev run --data-root {data_root} --schema-dir {output_dir} --output-dir OUT",
        ]
    )


def _statistics_location(data_root: Path, data_input: InputSpec, data) -> str:
    """The glob TFDV infers types from: the data root's CSVs, or the latest span's files."""
    if not data_input.has_spans or data_input.pattern is None:
        return str(data_root / "*.csv")
    latest = data.spans[-1]
    return str(data_root / SpanPattern(data_input.pattern).for_span(latest.span, latest.version))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m schemas.draft", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--data-root", type=Path, required=True, help="directory of CSV files")
    parser.add_argument("--label", required=True, help="the column to predict")
    parser.add_argument(
        "--output-dir",
        type=Path,
        required=True,
        help="where to write schema.pbtxt and dataset.yaml (the runner's --schema-dir)",
    )
    parser.add_argument(
        "--task",
        choices=("binary", "multiclass", "regression"),
        help="default: from the label (2 values binary; a few strings or ints multiclass; "
        "else regression)",
    )
    parser.add_argument("--name", help="pipeline name (default: from the data root's name)")
    parser.add_argument(
        "--input-pattern",
        help="the data root holds spans: their pattern, e.g. 'span-{SPAN}/*.csv' or "
        "'{YYYY}-{MM}-{DD}/*.csv' (written to the spec's input.pattern)",
    )
    parser.add_argument(
        "--spans",
        type=int,
        default=1,
        help="with --input-pattern: how many latest spans a run reads",
    )
    parser.add_argument(
        "--closed",
        action="append",
        default=[],
        metavar="COLUMN",
        help="a categorical column whose every value the schema lists: a new value stops "
        "a run (repeat for several; default: domains tolerate a few new values)",
    )
    parser.add_argument(
        "--force", action="store_true", help="overwrite existing files in --output-dir"
    )
    args = parser.parse_args(argv)
    try:
        summary = draft(
            args.data_root.resolve(),
            args.label,
            args.output_dir.resolve(),
            task=args.task,
            name=args.name,
            force=args.force,
            input_pattern=args.input_pattern,
            spans=args.spans,
            closed=args.closed,
        )
    except (DraftError, DatasetSpecError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
