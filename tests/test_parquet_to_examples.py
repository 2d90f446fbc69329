"""ExampleGen's Parquet reader: every Arrow type's feature, nulls and zeros, schema
evolution, refusals before any Beam work, and the same examples as the CSV path."""

from __future__ import annotations

import datetime
import decimal
import math
import os
import re
import shutil
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from google.protobuf import json_format
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx.utils import proto_utils
from tfx_bsl.coders.csv_decoder import ColumnType

from components.example_gen.csv_to_examples import column_type, read_blocks, typed_batch
from components.example_gen.encoding import encode_examples
from components.example_gen.executor import SpanResolvingExecutor
from components.example_gen.input_settings import input_config, input_window
from components.example_gen.parquet_columns import (
    FeatureType,
    feature_column,
    feature_type,
    plan_files,
    read_row_group,
)
from components.example_gen.parquet_files import ParquetError
from components.example_gen.parquet_footer import footer_for_pyarrow_10, unknown_logical_types
from components.example_gen.span_resolution import resolve_input
from kubeflow.steps.input_snapshot.component import InputSnapshot
from pipeline.beam import beam_pipeline_args
from pipeline.inputs import InputDataError, check_data_root
from tests import row_group_probe
from tests.conftest import taxi_as_parquet
from tests.harness import run_example_gen, split_records
from tests.parquet_logical_types import FLOAT16, GEOMETRY, half_floats, with_logical_type

UTC = datetime.timezone.utc
MOMENT = datetime.datetime(2024, 3, 1, 12, 30, 15, 250000, tzinfo=UTC)
SECONDS = int(MOMENT.timestamp())
MICROS = SECONDS * 1_000_000 + 250000


def write(path: Path, table: pa.Table, **options) -> Path:
    """Written as Parquet 2.6 (pyarrow 10's default, 2.4, stores nanoseconds as micros)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, version="2.6", **options)
    return path


def open_binary(path: str):
    return open(path, "rb")


def read_examples(*files: Path, ignore=()) -> list[tf.train.Example]:
    """The files as ExampleGen's Parquet reader and encoder see them, without Beam."""
    plan = plan_files([str(f) for f in files], open_binary, ignore)
    return [
        tf.train.Example.FromString(record)
        for unit in plan.row_groups
        for batch in read_row_group(unit, plan, open_binary)
        for record in encode_examples(batch, column_types(plan))
    ]


def column_types(plan) -> dict[str, ColumnType]:
    return {name: ColumnType[kind] for name, kind in plan.kinds.items()}


def values(example: tf.train.Example, name: str):
    """A feature's kind and values; None when the feature has no values (missing)."""
    feature = example.features.feature[name]
    kind = feature.WhichOneof("kind")
    found = list(getattr(feature, kind).value) if kind else []
    return (kind, found) if found else None


# Each Arrow type, its first row's value, and the feature it is read as (the
# type table of docs/parquet-and-partitions.md).
TYPE_TABLE = [
    ("int8", pa.array([-8, None], pa.int8()), ("int64_list", [-8])),
    ("int16", pa.array([-16, None], pa.int16()), ("int64_list", [-16])),
    ("int32", pa.array([-32, None], pa.int32()), ("int64_list", [-32])),
    ("int64", pa.array([-(2**63), None], pa.int64()), ("int64_list", [-(2**63)])),
    ("uint8", pa.array([255, None], pa.uint8()), ("int64_list", [255])),
    ("uint16", pa.array([65535, None], pa.uint16()), ("int64_list", [65535])),
    ("uint32", pa.array([2**32 - 1, None], pa.uint32()), ("int64_list", [2**32 - 1])),
    ("uint64", pa.array([2**63 - 1, None], pa.uint64()), ("int64_list", [2**63 - 1])),
    ("float32", pa.array([0.1, None], pa.float32()), ("float_list", [np.float32(0.1)])),
    ("float64", pa.array([0.1, None], pa.float64()), ("float_list", [np.float32(0.1)])),
    ("bool", pa.array([True, None]), ("int64_list", [1])),
    ("string", pa.array(["ünï", None]), ("bytes_list", ["ünï".encode()])),
    ("large_string", pa.array(["a", None], pa.large_string()), ("bytes_list", [b"a"])),
    ("binary", pa.array([b"\x00\xff", None], pa.binary()), ("bytes_list", [b"\x00\xff"])),
    ("large_binary", pa.array([b"b", None], pa.large_binary()), ("bytes_list", [b"b"])),
    ("dictionary", pa.array(["cab", None]).dictionary_encode(), ("bytes_list", [b"cab"])),
    ("timestamp_s", pa.array([SECONDS, None], pa.timestamp("s")), ("int64_list", [SECONDS * 10**6])),  # noqa: E501
    ("timestamp_ms", pa.array([MICROS // 1000, None], pa.timestamp("ms")), ("int64_list", [MICROS])),  # noqa: E501
    ("timestamp_us", pa.array([MICROS, None], pa.timestamp("us")), ("int64_list", [MICROS])),
    ("timestamp_ns", pa.array([MICROS * 1000, None], pa.timestamp("ns")), ("int64_list", [MICROS])),
    ("timestamp_us_utc", pa.array([MOMENT, None], pa.timestamp("us", "UTC")), ("int64_list", [MICROS])),  # noqa: E501
    (
        "timestamp_us_tokyo",  # the same instant in another zone: the same microseconds
        pa.array([MOMENT, None], pa.timestamp("us", "Asia/Tokyo")),
        ("int64_list", [MICROS]),
    ),
    ("date32", pa.array([datetime.date(2024, 3, 1), None], pa.date32()), ("int64_list", [19783])),
    ("date64", pa.array([datetime.date(1969, 12, 31), None], pa.date64()), ("int64_list", [-1])),
    ("decimal_int", pa.array([decimal.Decimal("-12"), None], pa.decimal128(20, 0)), ("int64_list", [-12])),  # noqa: E501
    ("decimal", pa.array([decimal.Decimal("12.34"), None], pa.decimal128(6, 2)), ("float_list", [np.float32(12.34)])),  # noqa: E501
    (
        "list_int",  # null elements are dropped; a null list is missing
        pa.array([[1, None, 0], None], pa.list_(pa.int64())),
        ("int64_list", [1, 0]),
    ),
    ("large_list_string", pa.array([["a", ""], None], pa.large_list(pa.string())), ("bytes_list", [b"a", b""])),  # noqa: E501
    ("list_float", pa.array([[0.5, 2.0], []], pa.list_(pa.float32())), ("float_list", [0.5, 2.0])),
]  # fmt: skip


def test_every_arrow_type_is_read_as_its_documented_feature_and_a_null_is_missing(tmp_path):
    table = pa.table({name: array for name, array, _ in TYPE_TABLE})
    first, second = read_examples(write(tmp_path / "types.parquet", table))
    for name, _, expected in TYPE_TABLE:
        assert values(first, name) == expected, name
        feature = second.features.feature[name]
        # A null is written as the CSV path writes an empty cell: the kind, no values.
        assert feature.WhichOneof("kind") == expected[0] and values(second, name) is None, name


def test_half_floats_and_fixed_size_lists_are_read_as_their_values():
    """Two types pyarrow 10 does not round-trip through Parquet (it writes no float16,
    and fails reading a null fixed-size list back), read from other writers' files."""
    halves = pa.array(np.array([1.5, 0], np.float16), mask=np.array([False, True]))
    column = feature_column(halves, FeatureType("number", "FLOAT"), "file", "column")
    assert column.to_pylist() == [1.5, None]
    pairs = pa.array([[MICROS, MICROS], None], pa.list_(pa.timestamp("us"), 2))
    int_list = FeatureType("timestamp", "INT", is_list=True)
    batch = pa.RecordBatch.from_arrays([feature_column(pairs, int_list, "file", "column")], ["at"])
    first, second = encode_examples(batch, {"at": ColumnType.INT})
    assert values(tf.train.Example.FromString(first), "at") == ("int64_list", [MICROS, MICROS])
    assert values(tf.train.Example.FromString(second), "at") is None


def test_date64_arrays_are_days_since_1970_read_directly():
    """pyarrow reads a date64 column back from a file as date32, so only an array
    another reader hands over (an Arrow dataset, Spark's Arrow batches) takes this cast."""
    day_ms = 86_400_000
    millis = pa.array([19783 * day_ms, 0, -day_ms, -1, 3 * day_ms + 1, None], pa.date64())
    column = feature_column(millis, FeatureType("date", "INT"), "file", "column")
    # Floor division: one millisecond before 1970 is in 1969-12-31, day -1.
    assert column.type == pa.int64() and column.to_pylist() == [19783, 0, -1, -1, 3, None]
    listed = pa.array([[datetime.date(2024, 3, 1), None], None], pa.list_(pa.date64()))
    as_list = feature_column(listed, FeatureType("date", "INT", is_list=True), "file", "column")
    assert as_list.to_pylist() == [[19783, None], []]


def test_a_union_or_an_interval_is_refused_and_no_parquet_file_can_hold_either(tmp_path):
    """The type table's union and interval rows: Arrow types Parquet has no column
    for (pyarrow, 10 and the newest alike, refuses to write them), refused as types."""
    union = pa.UnionArray.from_sparse(pa.array([0], pa.int8()), [pa.array([1]), pa.array(["a"])])
    interval = pa.array([pa.MonthDayNano([1, 2, 3])], pa.month_day_nano_interval())
    for array in (union, interval):
        assert feature_type(array.type) is None, array.type
        with pytest.raises(pa.ArrowNotImplementedError, match="Arrow to Parquet"):
            write(tmp_path / "u.parquet", pa.table({"u": array}))


def test_zeros_false_and_empty_strings_are_values_unlike_tfx_s_parquet_executor(tmp_path):
    """tfx#6407: the stock executor's `if not pyval:` makes each of these missing."""
    table = pa.table({"i": [0, None], "f": [0.0, None], "b": [False, None], "s": ["", None]})
    present, null = read_examples(write(tmp_path / "zeros.parquet", table))
    assert [values(present, c) for c in "ifbs"] == [
        ("int64_list", [0]),
        ("float_list", [0.0]),
        ("int64_list", [0]),
        ("bytes_list", [b""]),
    ]
    assert [values(null, c) for c in "ifbs"] == [None] * 4


def test_examples_are_protobufs_deterministic_serialization(tmp_path):
    """ExampleGen's split hashes these bytes: they must be the ones TFX hashes."""
    table = pa.table({name: array for name, array, _ in TYPE_TABLE})
    path = str(write(tmp_path / "types.parquet", table))
    plan = plan_files([path], open_binary)
    encoded = [
        e
        for b in read_row_group(plan.row_groups[0], plan, open_binary)
        for e in encode_examples(b, column_types(plan))
    ]
    assert encoded == [
        tf.train.Example.FromString(e).SerializeToString(deterministic=True) for e in encoded
    ]


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (pa.array([{"x": 1}]), r"column 'bad' in .*bad\.parquet is struct<x: int64>"),
        (pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())), r"is map<string, int64"),
        (pa.array([[[1]]], pa.list_(pa.list_(pa.int64()))), r"is list<item: list<item: int64>>"),
    ],
)
def test_a_column_no_feature_holds_is_refused_before_any_row_is_read(tmp_path, array, message):
    path = write(tmp_path / "bad.parquet", pa.table({"bad": array, "ok": [1]}))
    with pytest.raises(ParquetError, match=message + r".*flatten it .* or list it under `ignore:`"):
        plan_files([str(path)], open_binary)
    # Ignored in the dataset spec, it is skipped; the other columns are read.
    plan = plan_files([str(path)], open_binary, ignore=["bad"])
    assert plan.column_names == ("ok",) and plan.skipped == ("bad",)
    assert [values(e, "ok") for e in read_examples(path, ignore=["bad"])] == [("int64_list", [1])]


REFUSED = [
    ("struct", pa.array([{"x": 1}]), "struct<x: int64>"),
    ("map", pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())), "map<string, int64"),
    ("nested_list", pa.array([[[1]]], pa.list_(pa.list_(pa.int64()))), "list<item: list<item: int64>>"),  # noqa: E501
    ("time32", pa.array([datetime.time(1, 2, 3)], pa.time32("ms")), "time32[ms]"),
    ("time64", pa.array([datetime.time(1, 2, 3, 4)], pa.time64("us")), "time64[us]"),
    ("duration", pa.array([5], pa.duration("s")), "duration[s]"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "array", "described"), REFUSED, ids=[r[0] for r in REFUSED])
def test_example_gen_refuses_each_unsupported_type_before_any_beam_work(
    tmp_path, monkeypatch, name, array, described
):
    """The executor, not just its planner: the refusal names the column and the file,
    and comes while the pipeline is built, so Beam never runs it."""
    root = tmp_path / "data"
    write(root / "dt=2024-01-01" / "part-0.parquet", pa.table({"fare": [1.5]}))
    bad = write(root / "dt=2024-01-02" / "part-0.parquet", pa.table({"fare": [2.5], name: array}))
    runs = []

    def run(pipeline, *args, **kwargs):
        runs.append(pipeline)
        raise AssertionError("Beam ran the pipeline")

    monkeypatch.setattr(beam.Pipeline, "run", run)
    pattern = "dt={YYYY}-{MM}-{DD}/*.parquet"
    properties = {
        "input_config": proto_utils.proto_to_json(input_config(pattern)),
        "input_window": input_window(pattern, spans=2),
    }
    with pytest.raises(
        ParquetError, match=rf"^column '{name}' in {re.escape(f'{bad} is {described}')}"
    ):
        run_example_gen(SpanResolvingExecutor, root, tmp_path / "out", properties)
    assert runs == [] and not list((tmp_path / "out").glob("Split-*"))


# Files a current pandas and pyarrow wrote, with the scripts that wrote them.
EXPORTS = Path(__file__).parent / "data" / "exports"


def test_float16_columns_from_a_current_pyarrow_are_read_as_their_values(tmp_path):
    """pyarrow 10 cannot parse the file's footer at all (its FLOAT16 type); the footer,
    rewritten without it, opens the file, and the half floats are decoded: each value
    is its float16 exactly (a float32 feature holds every float16)."""
    fixture = EXPORTS / "float16_columns.parquet"
    with pytest.raises(OSError, match=r"^Metadata contains Thrift LogicalType that is not"):
        pq.read_metadata(fixture)
    plan = plan_files([str(fixture)], open_binary)
    assert plan.kinds == {
        "species": "STRING",
        "bill_depth_mm": "FLOAT",
        "body_mass_g": "INT",
        "wing_spans_m": "FLOAT",
    }
    expected = [
        {"bill_depth_mm": [float(np.float16(18.7))], "wing_spans_m": [0.5, 0.25]},
        {"bill_depth_mm": [float(np.float16(13.2))], "wing_spans_m": None},
        {"bill_depth_mm": None, "wing_spans_m": None},  # NaN is missing; an empty list too
    ]
    examples = read_examples(fixture)
    for example, want in zip(examples, expected, strict=True):
        for name, floats in want.items():
            assert values(example, name) == (floats and ("float_list", floats)), name
    assert [values(e, "body_mass_g")[1] for e in examples] == [[3750], [4500], [3400]]
    root = tmp_path / "data"
    root.mkdir()
    shutil.copy(fixture, root / "part-0.parquet")
    assert check_data_root(root).header == tuple(plan.kinds)
    properties = {"input_config": proto_utils.proto_to_json(input_config(None))}
    out = run_example_gen(SpanResolvingExecutor, root, tmp_path / "out", properties)
    assert sorted(r for records in split_records(out).values() for r in records) == sorted(
        e.SerializeToString(deterministic=True) for e in examples
    )
    # Ignored, they are never read: the other columns alone.
    ignored = read_examples(fixture, ignore=("bill_depth_mm", "wing_spans_m"))
    assert [sorted(e.features.feature) for e in ignored] == [["body_mass_g", "species"]] * 3
    # The footer reader's answer for a file pyarrow 10 reads: nothing to rewrite.
    plain = write(tmp_path / "plain.parquet", pa.table({"x": [1.5], "t": [MOMENT]}))
    with open(plain, "rb") as f:
        assert unknown_logical_types(f) == [] and footer_for_pyarrow_10(f) is None


def test_a_float16_column_annotated_as_a_current_writer_does_reads_as_its_values(tmp_path):
    """The annotation tests/parquet_logical_types.py adds to a 2-byte column is what
    pyarrow 10 refuses in the real file; with it, each value is the float16's."""
    halves = [1.5, None, -2.0, 65504.0, 2.0**-24]
    table = pa.table({"h": half_floats(halves), "x": [1, 2, 3, 4, 5]})
    path = with_logical_type(write(tmp_path / "h.parquet", table), "h", FLOAT16)
    with pytest.raises(OSError, match=r"^Metadata contains Thrift LogicalType that is not"):
        pq.read_metadata(path)
    assert [values(e, "h") for e in read_examples(path)] == [
        None if v is None else ("float_list", [v]) for v in halves
    ]


def test_another_logical_type_newer_than_pyarrow_10_is_refused_when_read_only(tmp_path):
    """GEOMETRY (parquet-format 2.11.0): no feature's; read, the file is refused naming
    the column and the type; ignored (or outside a scoring's columns), never read."""
    table = pa.table({"where": pa.array([b"\x01", None]), "x": [1, 2]})
    path = with_logical_type(write(tmp_path / "g.parquet", table), "where", GEOMETRY)
    with pytest.raises(
        ParquetError,
        match=r"^column 'where' in .*g\.parquet has Parquet's GEOMETRY type, newer than this "
        r"pyarrow \(10, TFX's\) and no feature's: .* or list it under `ignore:`",
    ):
        plan_files([str(path)], open_binary)
    assert [values(e, "x") for e in read_examples(path, ignore=("where",))] == [
        ("int64_list", [1]),
        ("int64_list", [2]),
    ]
    assert plan_files([str(path)], open_binary, columns=("x",)).not_read == ("where",)


def test_a_newer_logical_type_the_footer_cannot_be_rewritten_around_names_the_cast(tmp_path):
    """The rewrite cuts a logical type only where it is its element's last field (the next
    field's header counts from the one before it); otherwise no column can be read, and
    the line names the column and what to write."""
    path = write(tmp_path / "h.parquet", pa.table({"h": half_floats([1.5]), "x": [1]}))
    with_logical_type(path, "h", FLOAT16, trailing=b"\x15\x02")  # then a field 11: i32 1
    with open(path, "rb") as f:
        assert unknown_logical_types(f) == [("h", FLOAT16)] and footer_for_pyarrow_10(f) is None
    with pytest.raises(
        ParquetError,
        match=r"^column 'h' in .*h\.parquet has Parquet's FLOAT16 type, newer than this pyarrow "
        r"\(10, TFX's\), in a footer the template cannot rewrite for it \(so no column of the "
        r"file can be read\): write float32 instead \(pandas: df\['h'\] = ",
    ):
        plan_files([str(path)], open_binary, ignore=("h",))


def test_a_footer_neither_pyarrow_nor_the_footer_reader_parses_gets_pyarrow_s_message(tmp_path):
    good = write(tmp_path / "good.parquet", pa.table({"x": [1.5]})).read_bytes()
    # The footer's bytes garbled, its length and magic kept.
    length = int.from_bytes(good[-8:-4], "little")
    garbled = good[: -8 - length] + b"\xff" * length + good[-8:]
    path = tmp_path / "garbled.parquet"
    path.write_bytes(garbled)
    with pytest.raises(
        ParquetError, match=r"garbled\.parquet is not a Parquet file pyarrow can read: "
    ):
        plan_files([str(path)], open_binary)


@pytest.mark.parametrize("narrow_first", [True, False], ids=["narrow-first", "wide-first"])
def test_a_wider_int_or_float_in_another_file_changes_no_value(tmp_path, narrow_first):
    """int32 with int64 is INT (int64) and float32 with float64 is FLOAT (a float32
    feature), in either order: each file's rows are the examples it gives read alone."""
    narrow = write(
        tmp_path / "narrow.parquet",
        pa.table({"n": pa.array([7, None], pa.int32()), "x": pa.array([0.1, None], pa.float32())}),
    )
    wide = write(tmp_path / "wide.parquet", pa.table({"n": [2**40, -(2**63)], "x": [0.1, 2.5]}))
    files = (narrow, wide) if narrow_first else (wide, narrow)
    assert plan_files([str(f) for f in files], open_binary).kinds == {"n": "INT", "x": "FLOAT"}
    assert read_examples(*files) == [e for f in files for e in read_examples(f)]
    alone = read_examples(wide)
    assert [values(e, "n") for e in alone] == [("int64_list", [2**40]), ("int64_list", [-(2**63)])]


@pytest.mark.parametrize("int_first", [True, False], ids=["int-first", "float-first"])
def test_an_int_column_meeting_a_float_file_is_float_while_every_integer_stays_exact(
    tmp_path, int_first
):
    """The FLOAT kind is a float32: exact for integers up to 2^24 (and beyond, for
    those with trailing zero bits), which are read as floats."""
    ints = write(
        tmp_path / "ints.parquet",
        pa.table({"n": pa.array([2**24, -(2**24), 2**40, 3, None], pa.int64())}),
    )
    floats = write(tmp_path / "floats.parquet", pa.table({"n": [0.5]}))
    files = (ints, floats) if int_first else (floats, ints)
    assert plan_files([str(f) for f in files], open_binary).kinds == {"n": "FLOAT"}
    read = [values(e, "n") for e in read_examples(*files)]
    from_ints = [("float_list", [float(v)]) for v in (2**24, -(2**24), 2**40, 3)] + [None]
    from_floats = [("float_list", [0.5])]
    assert read == (from_ints + from_floats if int_first else from_floats + from_ints)


@pytest.mark.parametrize("int_first", [True, False], ids=["int-first", "float-first"])
def test_an_integer_a_float_feature_would_round_stops_the_run_naming_file_and_column(
    tmp_path, int_first
):
    """An int64 beyond 2^24 meeting a float file: a float32 would keep 16777216 for
    16777217, so the run stops rather than train on another number."""
    ints = write(tmp_path / "ints.parquet", pa.table({"n": pa.array([1, 2**24 + 1], pa.int64())}))
    floats = write(tmp_path / "floats.parquet", pa.table({"n": [0.5]}))
    files = (ints, floats) if int_first else (floats, ints)
    with pytest.raises(
        ParquetError,
        match=r"ints\.parquet: column 'n': the integer 16777217 would be stored as 16777216: "
        r"the column is a float in another file of the run, .* astype\('Int64'\)\), else float64$",
    ):
        read_examples(*files)


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (
            pa.array([7, 2**63], pa.uint64()),
            r"column 'big' holds 9223372036854775808 \(uint64\), beyond int64 .* pa\.string\(\)\)",
        ),
        (
            pa.array([MICROS * 1000, MICROS * 1000 + 1], pa.timestamp("ns")),
            r"column 'big' holds 2024-03-01 12:30:15\.250000001 \(timestamp\[ns\]\), whose digits "
            r"below the microsecond .* pa\.timestamp\('us'\) with safe=False\)",
        ),
        (
            pa.array([decimal.Decimal(3), decimal.Decimal(10**20)], pa.decimal128(38, 0)),
            r"column 'big' holds 100000000000000000000 \(decimal\), beyond int64",
        ),
    ],
    ids=["uint64", "ns timestamp", "decimal"],
)
def test_a_value_no_int64_holds_stops_the_read_with_the_check_s_line(tmp_path, array, message):
    """Read with no check before it (a value past the check's scan): the same line as
    the check's, the first bad value and the cast to write."""
    path = write(tmp_path / "big.parquet", pa.table({"big": array}))
    with pytest.raises(
        ParquetError, match=r"big\.parquet: " + message + r".* or list it under `ignore:`"
    ):
        read_examples(path)


def test_columns_are_the_union_over_files_and_types_widen_as_the_csv_rule(tmp_path):
    old = write(
        tmp_path / "span-1.parquet",
        pa.table({"n": pa.array([1], pa.int32()), "x": pa.array([0.5], pa.float32()), "c": [3]}),
    )
    new = write(
        tmp_path / "span-2.parquet",
        pa.table({"n": pa.array([2], pa.int64()), "x": [2.25], "c": [3.5], "added": ["y"]}),
    )
    plan = plan_files([str(old), str(new)], open_binary)
    assert plan.kinds == {
        "n": "INT",  # int32 and int64
        "x": "FLOAT",  # float32 and float64
        "c": "FLOAT",  # an int in one file, a float in the other
        "added": "STRING",
    }
    first, second = read_examples(old, new)
    assert values(first, "c") == ("float_list", [3.0]) and values(second, "c") == (
        "float_list",
        [3.5],
    )
    # The old file lacks the new column: missing in its rows.
    assert values(first, "added") is None and values(second, "added") == ("bytes_list", [b"y"])


def test_a_column_that_changes_type_stops_the_run_naming_both_files(tmp_path):
    old = write(tmp_path / "dt=2024-01-01" / "a.parquet", pa.table({"fare": [1]}))
    new = write(tmp_path / "dt=2024-01-02" / "a.parquet", pa.table({"fare": ["1.00 USD"]}))
    with pytest.raises(
        ParquetError,
        match=r"column 'fare' is string in .*dt=2024-01-02/a\.parquet but int64 in "
        r".*dt=2024-01-01/a\.parquet",
    ):
        plan_files([str(old), str(new)], open_binary)


def test_row_groups_are_the_units_of_work(tmp_path):
    path = write(tmp_path / "a.parquet", pa.table({"i": list(range(10))}), row_group_size=3)
    plan = plan_files([str(path)], open_binary)
    assert plan.row_groups == tuple((str(path), i) for i in range(4))
    assert [values(e, "i")[1][0] for e in read_examples(path)] == list(range(10))


def test_a_timestamp_is_text_in_csv_and_microseconds_in_parquet(tmp_path):
    """The one place the formats differ by design (docs/parquet-and-partitions.md)."""
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("at\n2024-03-01 12:30:15.25\n")
    (block,) = read_blocks(str(csv_path), ["at"])
    kinds = {"at": column_type(block.column("at"))}
    (from_csv,) = encode_examples(typed_batch(block, kinds), kinds)
    parquet = write(
        tmp_path / "t.parquet", pa.table({"at": pa.array([MOMENT.replace(tzinfo=None)])})
    )
    (from_parquet,) = read_examples(parquet)
    assert values(tf.train.Example.FromString(from_csv), "at") == (
        "bytes_list",
        [b"2024-03-01 12:30:15.25"],
    )
    assert values(from_parquet, "at") == ("int64_list", [MICROS])


@pytest.mark.slow  # two ExampleGen Beam pipelines
def test_the_same_rows_as_csv_and_as_parquet_are_the_same_examples_in_each_split(
    taxi_slice, tmp_path
):
    parquet_root = taxi_as_parquet(taxi_slice / "data.csv", tmp_path / "parquet")
    properties = {"input_config": proto_utils.proto_to_json(input_config(None))}
    from_csv = run_example_gen(SpanResolvingExecutor, taxi_slice, tmp_path / "csv", properties)
    from_parquet = run_example_gen(
        SpanResolvingExecutor, parquet_root, tmp_path / "out", properties
    )
    csv_splits, parquet_splits = split_records(from_csv), split_records(from_parquet)
    assert parquet_splits == csv_splits
    assert sum(len(r) for r in parquet_splits.values()) == 3000
    # Partly null columns, a number and a string, are there to compare: present in
    # some rows and missing in others, alike in both formats.
    for column in ("dropoff_census_tract", "company"):
        for split, records in parquet_splits.items():
            read = [values(tf.train.Example.FromString(r), column) for r in records]
            missing = sum(v is None for v in read)
            assert 0 < missing < len(read), (column, split, missing)


@pytest.mark.slow  # Beam's multi-processing runner: two worker processes
def test_two_worker_processes_read_a_file_s_row_groups_and_write_every_row_once(
    taxi_slice, tmp_path, monkeypatch
):
    """ExampleGen on Kubeflow's default Beam engine (`direct`: Beam's multi-processing
    runner, kubeflow/settings/beam.py): one Parquet file's row groups are the Beam
    elements the workers share, read by two worker processes (tests/row_group_probe.py
    records the pid that reads each), and every row is written once, as the CSV path
    writes it in memory."""
    parquet_root = taxi_as_parquet(
        taxi_slice / "data.csv", tmp_path / "parquet", parts=1, row_group_size=500
    )
    properties = {"input_config": proto_utils.proto_to_json(input_config(None))}
    probe = tmp_path / "probe"
    probe.mkdir()
    monkeypatch.setenv(row_group_probe.PROBE_DIR, str(probe))
    workers = (
        *beam_pipeline_args("multi_processing", num_workers=2),
        "--beam_plugins=tests.row_group_probe",
    )
    ours = run_example_gen(
        SpanResolvingExecutor, parquet_root, tmp_path / "ours", properties, workers
    )
    reads = row_group_probe.reads(probe)
    # Each of the six row groups read once, by worker processes, two of them at least.
    assert {name for _, name, _ in reads} == {"part-00000-1b2c.c000.snappy.parquet"}, reads
    assert sorted(index for _, _, index in reads) == list(range(6)), reads
    pids = {pid for pid, _, _ in reads}
    assert len(pids) >= 2 and os.getpid() not in pids, reads
    from_csv = run_example_gen(SpanResolvingExecutor, taxi_slice, tmp_path / "csv", properties)
    assert split_records(ours) == split_records(from_csv)
    # Six row groups in bundles of their own files: more than one writer per split.
    for split in ("train", "eval"):
        assert len(list(Path(ours.uri, f"Split-{split}").glob("*.gz"))) > 1, split


def split_files(output_dir: Path, step: str, name: str) -> dict[str, bytes]:
    """Each split's files a step wrote in a local run, by split and file name (one
    execution: the second run of `two_local_runs` takes its data steps from cache)."""
    found = sorted((output_dir / "pipeline_root" / step).glob(f"*/*/Split-*/{name}"))
    executions = {p.parents[1] for p in found}
    assert len(executions) == 1, f"expected one {step} execution, found {sorted(executions)}"
    return {f"{p.parent.name}/{p.name}": p.read_bytes() for p in found}


def as_dict(serialized_statistics: bytes) -> dict:
    return json_format.MessageToDict(
        statistics_pb2.DatasetFeatureStatisticsList.FromString(serialized_statistics)
    )


def differences(a, b, path: str = "") -> list[str]:
    """Where two statistics (as dicts) differ; a mean or a deviation summed in another
    order (TFDV merges its accumulators as they come) is the same to 1e-9."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for k in sorted(a.keys() | b.keys())
            for d in differences(a.get(k), b.get(k), f"{path}.{k}")
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float):
        return [] if math.isclose(a, b, rel_tol=1e-9) else [f"{path}: {a} != {b}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


# Two local runs on the same ExampleGen files may still train two models a little
# apart: the default runtime reads its training input in whatever order keeps
# tf.data busiest (`deterministic_input`, trainer/config.py). The Evaluator's
# metrics then differ by a few of the ~1,000 eval rows (docs/parquet-and-partitions.md).
METRIC_TOLERANCE = 0.01


def test_a_run_on_the_rows_as_parquet_gets_the_csv_run_s_statistics_and_metrics(
    two_local_runs, parquet_local_run
):
    """The real runner on the same rows, as CSV (`two_local_runs`' first run) and as
    one Parquet file: the same files from ExampleGen, byte for byte (a block is
    shuffled by its content, not at random), so the same statistics; the
    Evaluator's metrics, up to the Trainer's own run-to-run variation."""
    csv_run, parquet_run = two_local_runs, parquet_local_run
    assert parquet_run.exit_code == 0 and "Blessing: BLESSED" in parquet_run.stdout
    examples = split_files(parquet_run.output_dir, "ExampleGen", "data_tfrecord-*.gz")
    assert sorted(examples) == [
        "Split-eval/data_tfrecord-00000-of-00001.gz",
        "Split-train/data_tfrecord-00000-of-00001.gz",
    ]
    assert examples == split_files(csv_run.output_dir, "ExampleGen", "data_tfrecord-*.gz")
    statistics = split_files(parquet_run.output_dir, "StatisticsGen", "FeatureStats.pb")
    assert sorted(statistics) == ["Split-eval/FeatureStats.pb", "Split-train/FeatureStats.pb"]
    csv_statistics = split_files(csv_run.output_dir, "StatisticsGen", "FeatureStats.pb")
    for split, serialized in statistics.items():
        assert differences(as_dict(serialized), as_dict(csv_statistics[split])) == [], split
    metrics, csv_metrics = parquet_run.report.metrics, csv_run.first.metrics
    assert metrics.keys() == csv_metrics.keys() and "binary_accuracy" in metrics
    assert metrics["example_count"] == csv_metrics["example_count"]
    assert metrics == pytest.approx(csv_metrics, abs=METRIC_TOLERANCE), (metrics, csv_metrics)


# --- the data root's checks and spans (pipeline/inputs.py, components/example_gen/executor.py) ---


def test_a_spark_output_folder_is_read_without_its_markers_and_checksums(tmp_path):
    write(tmp_path / "part-00000-1b2c.c000.snappy.parquet", pa.table({"fare": [1.5], "tips": [0]}))
    write(
        tmp_path / "part-00001-1b2c.c000.snappy.parquet", pa.table({"fare": [2.5], "extra": ["x"]})
    )
    for leftover in ("_SUCCESS", "_committed_123", "_started_123", ".part-00000.crc", "x.crc"):
        (tmp_path / leftover).write_bytes(b"")
    (tmp_path / "part-00002-1b2c.c000.snappy.parquet").write_bytes(b"")  # an empty file
    checked = check_data_root(tmp_path)
    assert checked.format == "parquet"
    assert [Path(f).name for f in checked.files] == [
        "part-00000-1b2c.c000.snappy.parquet",
        "part-00001-1b2c.c000.snappy.parquet",
    ]
    assert checked.header == ("fare", "tips", "extra")  # the union, in the order first seen


def test_a_folder_mixing_formats_is_refused_naming_both(tmp_path):
    write(tmp_path / "a.parquet", pa.table({"fare": [1]}))
    (tmp_path / "b.csv").write_text("fare\n1\n")
    with pytest.raises(
        InputDataError, match=r"mix formats: csv \(.*b\.csv\) and parquet \(.*a\.parquet\)"
    ):
        check_data_root(tmp_path)


def test_files_without_an_extension_are_read_in_the_spec_s_format(tmp_path):
    write(tmp_path / "000000_0", pa.table({"fare": [1]}))
    with pytest.raises(InputDataError, match=r"neither CSV nor Parquet: .*000000_0"):
        check_data_root(tmp_path)
    assert check_data_root(tmp_path, format="parquet").header == ("fare",)


def test_an_unsupported_column_is_refused_by_the_check_unless_ignored(tmp_path):
    write(tmp_path / "a.parquet", pa.table({"fare": [1], "trip": [{"km": 2.0}]}))
    with pytest.raises(InputDataError, match=r"column 'trip' in .*a\.parquet is struct"):
        check_data_root(tmp_path)
    assert check_data_root(tmp_path, ignore=("trip",)).header == ("fare",)


def hive_partitions(root: Path, partitions: list[str]) -> Path:
    for i, partition in enumerate(partitions):
        write(root / partition / "part-00000.snappy.parquet", pa.table({"fare": [float(i)]}))
        (root / partition / ".part-00000.snappy.parquet.crc").write_bytes(b"crc")
    (root / "_SUCCESS").write_bytes(b"")
    return root


@pytest.mark.parametrize(
    ("partitions", "pattern", "latest"),
    [
        (["dt=2024-01-30", "dt=2024-02-01"], "dt={YYYY}-{MM}-{DD}/*.parquet", 19754),
        (["span=2", "span=10"], "span={SPAN}/*.parquet", 10),
    ],
)
def test_hive_partitions_are_spans(tmp_path, partitions, pattern, latest):
    root = hive_partitions(tmp_path, partitions)
    checked = check_data_root(root, pattern, spans=2)
    assert [s.span for s in checked.spans][-1] == latest and len(checked.files) == 2
    # TFX's own resolution (the driver's; InputSnapshot's on Kubeflow) agrees.
    resolved = resolve_input(str(root), input_config(pattern), {"pattern": pattern, "spans": 2})
    assert resolved.latest.span == latest and len(resolved.spans) == 2


def test_a_new_partition_changes_the_input_snapshot(tmp_path):
    """InputSnapshot's fingerprint is TFX's over the latest span's files: a new
    partition is a new span, so ExampleGen's cache key changes on Kubeflow."""
    pattern = "dt={YYYY}-{MM}-{DD}/*.parquet"
    root = hive_partitions(tmp_path, ["dt=2024-01-30"])
    before = resolve_input(str(root), input_config(pattern), {"pattern": pattern, "spans": 1})
    hive_partitions(tmp_path, ["dt=2024-01-30", "dt=2024-01-31"])
    after = resolve_input(str(root), input_config(pattern), {"pattern": pattern, "spans": 1})
    assert after.latest.span == before.latest.span + 1
    assert after.to_json() != before.to_json()
    assert after.latest.patterns == {"single_split": "dt=2024-01-31/*.parquet"}


def test_a_file_rewritten_in_place_changes_the_input_snapshot(tmp_path):
    """A partition re-exported under the same file name, as InputSnapshot sees it on
    Kubeflow: TFX's fingerprint (tfx/utils/io_utils.py, generate_fingerprint) counts
    each file's size and its modification time in whole seconds, so a rewrite of another
    size, or a second later, is new data; the same size within the same second is not."""
    pattern = "dt={YYYY}-{MM}-{DD}/*.parquet"
    root = hive_partitions(tmp_path, ["dt=2024-01-30"])
    part = root / "dt=2024-01-30" / "part-00000.snappy.parquet"
    snapshot = InputSnapshot.EXECUTOR_SPEC.executor_class._FUNCTION
    config = proto_utils.proto_to_json(input_config(pattern))
    window = input_window(pattern, spans=1)

    def taken() -> str:
        return snapshot(input_base=str(root), input_config=config, input_window=window)["snapshot"]

    first, written = taken(), part.stat()
    # Other values, the same size: seen only once the clock has passed a second.
    write(part, pa.table({"fare": [9.0]}), compression="snappy")
    assert part.stat().st_size == written.st_size
    os.utime(part, ns=(written.st_atime_ns, written.st_mtime_ns))
    assert taken() == first
    os.utime(part, ns=(written.st_atime_ns, written.st_mtime_ns + 1_000_000_000))
    assert taken() != first
    # Another size, within the same second as the first write: seen.
    write(part, pa.table({"fare": [9.0, 10.0]}), compression="snappy")
    os.utime(part, ns=(written.st_atime_ns, written.st_mtime_ns))
    assert part.stat().st_size != written.st_size and taken() != first


def test_spark_s_unpadded_date_partitions_are_refused_with_the_pattern_to_use(tmp_path):
    root = hive_partitions(tmp_path, ["year=2024/month=1/day=5"])
    with pytest.raises(
        InputDataError,
        match=r"month=1/day=5/part-00000\.snappy\.parquet has its date unpadded.*"
        r"use the pattern 'dt=\{YYYY\}-\{MM\}-\{DD\}/\*\.parquet'",
    ):
        check_data_root(root, "year={YYYY}/month={MM}/day={DD}/*.parquet")


@pytest.mark.slow  # two drafts, each with TFDV's statistics
def test_the_draft_of_a_parquet_folder_is_the_csv_draft_of_the_same_rows(taxi_slice, tmp_path):
    from schemas.draft import draft

    parquet_root = taxi_as_parquet(taxi_slice / "data.csv", tmp_path / "parquet")
    drafted = {}
    for kind, root in (("csv", taxi_slice), ("parquet", parquet_root)):
        draft(root, "tips", tmp_path / kind, name="taxi")
        drafted[kind] = [
            (tmp_path / kind / name).read_text().replace(str(root), "DATA_ROOT")
            for name in ("dataset.yaml", "schema.pbtxt")
        ]
    csv_spec, csv_schema = drafted["csv"]
    parquet_spec, parquet_schema = drafted["parquet"]
    assert parquet_spec == csv_spec
    # One difference: pickup_census_tract is empty in these rows. The CSV's text
    # cannot type it (BYTES, as TFDV types an empty column); the Parquet file
    # says int64 (pyarrow typed it from the whole sample).
    tract = 'name: "pickup_census_tract"\n  value_count {\n    max: 1\n  }\n  type: '
    assert parquet_schema.replace(tract + "INT", tract + "BYTES") == csv_schema
