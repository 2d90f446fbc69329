"""Parquet files as features: each column's type over the files, and its values cast by Arrow.

ExampleGen's Parquet reader (components/example_gen/parquet_to_examples.py) and the data
root's check (pipeline/inputs.py, before anything heavy is imported) read
the files through this module: pyarrow and numpy only.

TFX's Parquet executor (`custom_executors/parquet_executor.py`) turns each row
into a Python dict and each value into a Feature with `if not pyval:` in the
way, so 0, 0.0, False and "" become missing (tensorflow/tfx#6407). Here no row
is ever a Python object: each column of a row group is cast with Arrow kernels
to what components/example_gen/encoding.py encodes, by this mapping (the type table
in docs/parquet-and-partitions.md; tests/test_parquet_to_examples.py asserts it
column by column):

- int8..int64, uint8..uint64 -> INT (a uint64 beyond int64 is refused: `check_values`);
- bool -> INT 0 or 1;
- float16, float32, float64 -> FLOAT (rounded to float32, as the CSV path);
  pyarrow 15 and later write float16 with Parquet's FLOAT16 type, which pyarrow
  10 cannot parse: such a file is opened with that type cut from its footer
  (components/example_gen/parquet_footer.py) and its half floats decoded
  (components/example_gen/parquet_files.py);
- decimal128/256: scale 0 -> INT (beyond int64 stops the run), else FLOAT;
- string, large_string, binary, large_binary, fixed_size_binary -> STRING;
- dictionary -> as its values;
- timestamp, any unit, with or without a time zone -> INT microseconds since
  1970-01-01 UTC (a naive timestamp is taken as UTC, as Arrow stores it);
  sub-microsecond digits are refused (`check_values`, before any row is encoded);
- date32, date64 -> INT days since 1970-01-01;
- null (empty throughout) -> a Feature with no kind, as an empty CSV column;
- list, large_list, fixed_size_list of one of these -> every value, as its
  values' kind; null elements are dropped.

A null (and an empty list) is missing: the feature with no values, as an
empty CSV cell is written. Struct, map, a list of lists and every other type
are refused when the run is planned, before any row is read, naming the
column, the file and what to do.

Schema evolution: the columns are the union over every file read, and a file
that lacks one has it missing in its rows; each column's type is merged over
the files (int32 and int64 are INT; float32 and float64 are FLOAT; an int in
one file and a float in another is FLOAT, as the CSV type rule has it, and an
integer a float32 would change stops the run, naming file, column and value); a
column that changes family (int64 to string, timestamp to int) stops the run
naming both files.

Each row group is a Beam element, so a large file is read by several workers.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from components.example_gen.parquet_files import ParquetError, is_list_type, opened_parquet

# Rows per record batch read from a row group (~ the CSV reader's blocks).
BATCH_ROWS = 8192
_DAY_MS = 86_400_000
# Feature kinds, narrowest first: an INT column read as FLOAT in another file is FLOAT.
KINDS = ("UNKNOWN", "INT", "FLOAT", "STRING")
# The Arrow type of each kind's values once cast; a column empty throughout is
# binary, as TFDV types an empty CSV column (BYTES).
VALUE_TYPES = {
    "UNKNOWN": pa.binary(),
    "INT": pa.int64(),
    "FLOAT": pa.float64(),
    "STRING": pa.binary(),
}


@dataclass(frozen=True)
class FeatureType:
    """What an Arrow type becomes: its family (which types merge), kind, and whether a list."""

    family: str  # number | bytes | timestamp | date | null
    kind: str  # a tfx_bsl ColumnType's name: UNKNOWN, INT, FLOAT or STRING
    is_list: bool = False

    def describe(self) -> str:
        return f"{'list of ' if self.is_list else ''}{self.family}"


def _scalar_type(arrow_type: pa.DataType) -> FeatureType | None:
    t = arrow_type
    if pa.types.is_dictionary(t):
        return _scalar_type(t.value_type)
    if pa.types.is_null(t):
        return FeatureType("null", "UNKNOWN")
    if pa.types.is_boolean(t) or pa.types.is_integer(t):
        return FeatureType("number", "INT")
    if pa.types.is_floating(t):
        return FeatureType("number", "FLOAT")
    if pa.types.is_decimal(t):
        return FeatureType("number", "INT" if t.scale == 0 else "FLOAT")
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return FeatureType("bytes", "STRING")
    if pa.types.is_timestamp(t):
        return FeatureType("timestamp", "INT")
    if pa.types.is_date(t):
        return FeatureType("date", "INT")
    return None


def feature_type(arrow_type: pa.DataType) -> FeatureType | None:
    """The feature an Arrow type becomes (module doc's table), or None: unsupported."""
    if is_list_type(arrow_type):
        inner = _scalar_type(arrow_type.value_type)
        return None if inner is None else FeatureType(inner.family, inner.kind, is_list=True)
    return _scalar_type(arrow_type)


def merge(a: FeatureType, b: FeatureType) -> FeatureType | None:
    """One column's feature type over two files, or None: they cannot be one feature."""
    if a.family == "null":
        return FeatureType(b.family, b.kind, a.is_list or b.is_list)
    if b.family == "null":
        return FeatureType(a.family, a.kind, a.is_list or b.is_list)
    if a.family != b.family or a.is_list != b.is_list:
        return None
    return FeatureType(a.family, max(a.kind, b.kind, key=KINDS.index), a.is_list)


@dataclass(frozen=True)
class ParquetPlan:
    """What a run reads: each column's feature type over every file, and the row groups."""

    types: dict[str, FeatureType]
    row_groups: tuple[tuple[str, int], ...]  # (file, row group index)
    skipped: tuple[str, ...] = ()  # unsupported columns left out (ignored, or scoring's)
    not_read: tuple[str, ...] = ()  # every column of the files left out, in their order

    @property
    def kinds(self) -> dict[str, str]:
        return {name: t.kind for name, t in self.types.items()}

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(self.types)


def plan_files(
    files: Iterable[str],
    open_binary: Callable[[str], IO[bytes]],
    ignore: Iterable[str] = (),
    *,
    columns: Iterable[str] | None = None,
    skip_unsupported: bool = False,
) -> ParquetPlan:
    """Every file's footer read (no rows): the columns' merged types and the row groups.

    Only the columns read are planned, and only those are ever read (pyarrow's column
    projection, `read_row_group`): never a column in `ignore` (the dataset spec's), nor
    one outside `columns` when given (scoring: the columns the model and its keys use),
    whatever its type or values. `skip_unsupported` (scoring): a column no feature can
    hold is left out too. ParquetError for a file that is not Parquet, an unsupported
    column read, and a column read whose type changes family.
    """
    ignore = set(ignore)
    wanted = None if columns is None else set(columns)
    types: dict[str, FeatureType] = {}
    seen_in: dict[str, tuple[str, pa.DataType]] = {}  # column -> (first file, its type)
    row_groups: list[tuple[str, int]] = []
    skipped: list[str] = []
    not_read: dict[str, None] = {}
    for path in files:
        with open_binary(path) as f:
            opened = opened_parquet(path, f)
            metadata = opened.parquet.metadata
            schema = opened.schema
        for field in schema:
            newer = opened.newer.get(field.name)
            found = None if newer else feature_type(field.type)
            if field.name in ignore or (wanted is not None and field.name not in wanted):
                not_read[field.name] = None
                if found is None:
                    skipped.append(field.name)
                continue
            if found is None:
                if skip_unsupported:
                    not_read[field.name] = None
                    skipped.append(field.name)
                    continue
                if newer:
                    raise ParquetError(
                        f"column {field.name!r} in {path} has Parquet's {newer} type, newer "
                        "than this pyarrow (10, TFX's) and no feature's: write it as a type "
                        "the table in docs/parquet-and-partitions.md lists, or list it under "
                        "`ignore:` in the dataset spec"
                    )
                raise ParquetError(
                    f"column {field.name!r} in {path} is {field.type}, which a tf.Example "
                    "feature cannot hold (one value or a flat list of numbers or strings): "
                    f"{_fix_for(field.type)} when writing the data, or list it under "
                    "`ignore:` in the dataset spec"
                )
            if field.name in types:
                merged = merge(types[field.name], found)
                if merged is None:
                    first, first_type = seen_in[field.name]
                    raise ParquetError(
                        f"column {field.name!r} is {field.type} in {path} but {first_type} in "
                        f"{first}: a {found.describe()} cannot be read as a "
                        f"{types[field.name].describe()}; write it with one type in every file "
                        "(or read the files apart: input.pattern)"
                    )
                types[field.name] = merged
            else:
                types[field.name] = found
                seen_in[field.name] = (path, field.type)
        row_groups += [(path, i) for i in range(metadata.num_row_groups)]
    return ParquetPlan(
        types=types,
        row_groups=tuple(row_groups),
        skipped=tuple(sorted(set(skipped))),
        not_read=tuple(n for n in not_read if n not in types),
    )


# --- values no feature can take, found before the pipeline starts -------------

_INT64_MAX = 2**63 - 1
# Rows of one column scanned per file where its statistics cannot clear it: the runner's
# check stays quick on a large file; a bad value past them stops ExampleGen's read
# instead, with the same line.
SCAN_ROWS = 1 << 20


def _values_type(arrow_type: pa.DataType) -> pa.DataType:
    """A column's values' type: a list's elements', a dictionary's values'."""
    t = arrow_type.value_type if is_list_type(arrow_type) else arrow_type
    return t.value_type if pa.types.is_dictionary(t) else t


def _may_fail(t: pa.DataType, feature: FeatureType) -> bool:
    """Whether values of `t` read as `feature` can fail to convert (module doc)."""
    if pa.types.is_uint64(t):
        return True
    if pa.types.is_timestamp(t):
        return t.unit == "ns"
    return pa.types.is_decimal(t) and t.scale == 0 and t.precision > 18 and feature.kind == "INT"


def _cleared(t: pa.DataType, statistics) -> bool:
    """Whether a row group's statistics show that no value of the column can fail."""
    if statistics is None or not statistics.has_min_max or pa.types.is_timestamp(t):
        return False  # the digits below a microsecond are in no statistic
    return statistics.max <= _INT64_MAX and statistics.min >= -_INT64_MAX - 1


def _proven(t: pa.DataType, statistics) -> bool:
    """Whether a row group's statistics show that a value of the column fails."""
    if statistics is None or not statistics.has_min_max or pa.types.is_timestamp(t):
        return False
    return not _cleared(t, statistics)


def _first_bad(values: pa.Array, t: pa.DataType) -> Any:
    """The first value of `values` (of type `t`) no feature can take, or None."""
    if pa.types.is_timestamp(t):
        nanos = values.cast(pa.int64())
        bad = pc.not_equal(pc.multiply(pc.divide(nanos, 1000), 1000), nanos)
    elif pa.types.is_decimal(t):
        bad = pc.or_(
            pc.greater(values, pa.scalar(decimal.Decimal(_INT64_MAX), t)),
            pc.less(values, pa.scalar(decimal.Decimal(-_INT64_MAX - 1), t)),
        )
    else:
        bad = pc.greater(values, pa.scalar(_INT64_MAX, t))
    bad = bad.fill_null(False)
    if not pc.any(bad).as_py():
        return None
    return values[int(pc.index(bad, True).as_py())]


def _value_fix(name: str, t: pa.DataType, value: Any) -> str:
    """What a column's bad value is, and the cast to write instead."""
    ignore = f"or list it under `ignore:` in the dataset spec (the draft: --ignore {name})"
    if pa.types.is_timestamp(t):
        return (
            f"holds {value} (timestamp[ns]), whose digits below the microsecond a feature "
            "(microseconds since 1970) would lose: write it in microseconds (pandas: "
            f"df[{name!r}] = df[{name!r}].dt.floor('us').astype('datetime64[us]'); pyarrow: "
            f"cast to pa.timestamp('us') with safe=False), {ignore}"
        )
    what = "decimal" if pa.types.is_decimal(t) else "uint64"
    return (
        f"holds {value.as_py()} ({what}), beyond int64 (2^63-1), which an int feature "
        f"cannot hold: write it as a string if it is an id (pandas: df[{name!r}] = "
        f"df[{name!r}].astype('string'); pyarrow: cast to pa.string()), as float64 if an "
        f"approximation will do, {ignore}"
    )


def check_values(
    plan: ParquetPlan,
    files: Iterable[str],
    open_binary: Callable[[str], IO[bytes]],
    scan_rows: int | None = None,
) -> None:
    """ParquetError for the first value of a column read that no feature can take (a
    uint64 beyond int64, a timestamp[ns] with digits below the microsecond, a decimal of
    scale 0 beyond int64), naming file, column, value and the cast to write instead.
    Each row group is cleared by its statistics where they can; else its column alone is
    read, up to `scan_rows` (SCAN_ROWS) rows of each file, and past them in a row group whose
    statistics show a bad value. Before any Beam work: the runner's check of the data
    root runs it, and ExampleGen's reader again where no runner checked; a bad value
    past the scan stops ExampleGen's read with the same line (`_as_kind`)."""
    scan_rows = SCAN_ROWS if scan_rows is None else scan_rows
    for path in files:
        with open_binary(path) as f:
            opened = opened_parquet(path, f)
            parquet, schema, metadata = opened.parquet, opened.schema, opened.parquet.metadata
            paths = [
                metadata.schema.column(i).path.split(".")[0] for i in range(metadata.num_columns)
            ]
            for name in schema.names:
                if name not in plan.types:
                    continue
                t = _values_type(schema.field(name).type)
                if not _may_fail(t, plan.types[name]):
                    continue
                index = paths.index(name)
                scanned = 0
                for group in range(metadata.num_row_groups):
                    statistics = metadata.row_group(group).column(index).statistics
                    if _cleared(t, statistics):
                        continue
                    if scanned >= scan_rows and not _proven(t, statistics):
                        continue
                    for batch in parquet.iter_batches(
                        batch_size=BATCH_ROWS, row_groups=[group], columns=[name], use_threads=False
                    ):
                        column = batch.column(0)
                        if is_list_type(column.type):
                            column = column.flatten()
                        if pa.types.is_dictionary(column.type):
                            column = column.dictionary_decode()
                        value = _first_bad(column, t)
                        if value is not None:
                            raise ParquetError(
                                f"{path}: column {name!r} {_value_fix(name, t, value)}"
                            )
                        scanned += batch.num_rows
                        if scanned >= scan_rows and not _proven(t, statistics):
                            break


def _fix_for(arrow_type: pa.DataType) -> str:
    """What to write instead of a type no feature holds."""
    if pa.types.is_time(arrow_type) or pa.types.is_duration(arrow_type):
        return "cast it to an integer (seconds or microseconds)"
    return "flatten it into columns"


# --- casting a column to its feature ------------------------------------------


def _as_kind(values: pa.Array, kind: str, path: str, name: str) -> pa.Array:
    """A flat (non-list) column's values as the encoder takes `kind`: int64, float64, binary."""
    where = f"{path}: column {name!r}"
    t = values.type
    if pa.types.is_dictionary(t):
        values = values.dictionary_decode()
        t = values.type
    if pa.types.is_null(t) or kind == "UNKNOWN":
        return pa.nulls(len(values), VALUE_TYPES[kind])
    try:
        if pa.types.is_timestamp(t):
            # Safe cast: refuses to drop sub-microsecond digits.
            return values.cast(pa.timestamp("us", t.tz)).cast(pa.int64())
        if pa.types.is_date32(t):
            return values.cast(pa.int32()).cast(pa.int64())
        if pa.types.is_date64(t):
            millis = values.cast(pa.int64())
            days = np.floor_divide(millis.fill_null(0).to_numpy(zero_copy_only=False), _DAY_MS)
            return pa.array(days, pa.int64(), mask=millis.is_null().to_numpy(zero_copy_only=False))
        if kind == "STRING":
            return values.cast(pa.binary())
        if kind == "INT":
            return values.cast(pa.int64())  # bool -> 0/1; safe: refuses values beyond int64
        if pa.types.is_float16(t):  # Arrow 10 has no cast from half floats
            mask = values.is_null().to_numpy(zero_copy_only=False)
            halves = values.to_numpy(zero_copy_only=False)
            return pa.array(np.where(mask, 0, halves).astype(np.float64), mask=mask)
        if pa.types.is_integer(t) or pa.types.is_decimal(t):
            # A FLOAT column that is an integer in this file (module doc: evolution).
            return _whole_numbers_as_floats(values, where)
        # float32 -> float64 is exact; the encoder rounds to float32, as the CSV path.
        return values.cast(pa.float64(), safe=False)
    except pa.ArrowInvalid as err:
        # A value past the runner's scan (`check_values`): the same line as its.
        value = _first_bad(values, t) if _may_fail(t, FeatureType("number", kind)) else None
        if value is not None:
            raise ParquetError(f"{where} {_value_fix(name, t, value)}") from None
        raise ParquetError(f"{where}: {err}; such values have no {kind} feature") from None


def _whole_numbers_as_floats(values: pa.Array, where: str) -> pa.Array:
    """Integers (or decimals of scale 0) of a column that is FLOAT over the files, as
    float64; ParquetError for the first that a float feature (float32) cannot hold."""
    if pa.types.is_decimal(values.type) and values.type.scale:
        return values.cast(pa.float64(), safe=False)
    ints = values.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    with np.errstate(over="ignore", invalid="ignore"):
        floats = ints.astype(np.float32)
        wide = floats.astype(np.float64)
        held = (wide >= -(2.0**63)) & (wide < 2.0**63)
        exact = held & (np.where(held, floats, 0).astype(np.int64) == ints)
    if not exact.all():
        at = int(np.argmin(exact))
        raise ParquetError(
            f"{where}: the integer {ints[at]} would be stored as {floats[at]:.0f}: the column is "
            "a float in another file of the run, and a float feature is a float32, exact for "
            "integers up to 2^24; write the column with one type in every file: int64 if its "
            "values are whole numbers (pandas writes an int column holding a NaN as float64: "
            "make it astype('Int64')), else float64"
        )
    return pa.array(ints.astype(np.float64), mask=values.is_null().to_numpy(zero_copy_only=False))


def feature_column(column: pa.Array, feature: FeatureType, path: str, name: str) -> pa.Array:
    """One column (`name`) of a batch of file `path`, as the encoder takes it
    (components/example_gen/encoding.py)."""
    if not is_list_type(column.type):
        return _as_kind(column, feature.kind, path, name)
    flat = column.flatten()
    parents = pc.list_parent_indices(column).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(column) + 1, dtype=np.int32)
    np.cumsum(np.bincount(parents, minlength=len(column)), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), _as_kind(flat, feature.kind, path, name))


def read_row_group(
    unit: tuple[str, int], plan: ParquetPlan, open_binary
) -> Iterator[pa.RecordBatch]:
    """One row group of one file, in batches of columns cast to their features."""
    path, index = unit
    with open_binary(path) as f:
        opened = opened_parquet(path, f)
        present = [n for n in opened.schema.names if n in plan.types]
        for batch in opened.parquet.iter_batches(
            batch_size=BATCH_ROWS, row_groups=[index], columns=present, use_threads=False
        ):
            columns = opened.columns(batch)
            yield pa.RecordBatch.from_arrays(
                [feature_column(columns[name], plan.types[name], path, name) for name in present],
                present,
            )
