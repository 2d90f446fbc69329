"""ExampleGen's pyarrow reader against TFX's own CSV executor: the same examples in each split."""

from __future__ import annotations

import gzip
import itertools
import math
import random
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from tfx.components.example_gen.csv_example_gen import executor as stock_csv_executor
from tfx.proto import example_gen_pb2
from tfx.utils import io_utils, proto_utils
from tfx_bsl.coders.csv_decoder import ColumnType

from components.example_gen import blocks as example_blocks
from components.example_gen import csv_to_examples, read_examples
from components.example_gen.blocks import (
    RowsLostError,
    name_staged_files,
    staging_dir,
)
from components.example_gen.csv_to_examples import (
    CsvError,
    column_type,
    merge_types,
    python_cell_type,
    read_blocks,
    typed_batch,
)
from components.example_gen.encoding import encode_examples
from components.example_gen.executor import SpanResolvingExecutor
from components.example_gen.input_settings import input_config
from components.example_gen.read_examples import InOrderThread
from components.tfrecords import tfrecord_frames
from pipeline.beam import beam_pipeline_args
from tests.conftest import read_taxi_rows, write_csv
from tests.harness import run_example_gen, split_records

# Each column is a corner of TFX's type rule (tfx_bsl's ColumnTypeInferrer):
# ints that Python's int() reads but arrow's cast does not, an int beyond 64
# bits (a string, not a float), floats Python reads (nan, inf, 1e999, "1_0.5"),
# a column empty throughout (a Feature with no kind), quoting, line breaks and
# commas inside quotes, non-ASCII text, 64-bit bounds, exponents.
CORNERS = '''\
plain_int,odd_int,big_int,float_mix,odd_float,empty,text,bounds,exp
1,+5,1,1,nan,,"a, quoted",-9223372036854775808,1e5
2, 7,99999999999999999999,2.5,inf,,"two
lines",9223372036854775807,-1.5E-3
-3,1_000,3,,1e999,,ünïcödé,0,.5
,,,-0,1_0.5,,"",-0,5.
04,-0,4,1e-45,-inf,,"say ""hi""",00012,3e38

5,6,5,3.4028235e38,+1.5,,x,1,-.5e-3
'''


def corner_root(tmp_path: Path, text: str = CORNERS, name: str = "data.csv") -> Path:
    root = tmp_path / "data"
    root.mkdir(exist_ok=True)
    (root / name).write_text(text, encoding="utf-8")
    return root


def run_both(root: Path, tmp_path: Path):
    properties = {"input_config": proto_utils.proto_to_json(input_config(None))}
    ours = run_example_gen(SpanResolvingExecutor, root, tmp_path / "ours", properties)
    stock = run_example_gen(stock_csv_executor.Executor, root, tmp_path / "stock", properties)
    return ours, stock


def test_the_corners_of_the_type_rule_give_tfx_s_examples_in_tfx_s_splits(tmp_path):
    ours, stock = run_both(corner_root(tmp_path), tmp_path)
    assert split_records(ours) == split_records(stock)
    records = [r for split in split_records(ours).values() for r in split]
    assert len(records) == 6  # the blank line is skipped
    for record in records:
        empty = tf.train.Example.FromString(record).features.feature["empty"]
        assert empty.WhichOneof("kind") is None
    # The artifact says what TFX's does.
    for prop in ("payload_format", "file_format"):
        assert ours.get_string_custom_property(prop) == stock.get_string_custom_property(prop)
    assert ours.split_names == stock.split_names
    written = sorted(p.name for p in Path(ours.uri, "Split-train").iterdir())
    assert written and all(n.startswith("data_tfrecord-") and n.endswith(".gz") for n in written)


def test_encoded_examples_are_protobufs_deterministic_serialization(tmp_path):
    """ExampleGen's split hashes these bytes: they must be the ones TFX hashes."""
    path = str(corner_root(tmp_path) / "data.csv")
    names = io_utils.load_csv_column_names(path)
    blocks = list(read_blocks(path, names))
    types = merge_types(names, [{n: column_type(b.column(n)) for n in names} for b in blocks])
    assert types == {
        "plain_int": ColumnType.INT,
        "odd_int": ColumnType.INT,
        "big_int": ColumnType.STRING,
        "float_mix": ColumnType.FLOAT,
        "odd_float": ColumnType.FLOAT,
        "empty": ColumnType.UNKNOWN,
        "text": ColumnType.STRING,
        "bounds": ColumnType.INT,
        "exp": ColumnType.FLOAT,
    }
    encoded = [e for b in blocks for e in encode_examples(typed_batch(b, types), types)]
    assert encoded == [
        tf.train.Example.FromString(e).SerializeToString(deterministic=True) for e in encoded
    ]


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        (b"", ColumnType.UNKNOWN),
        (b"12", ColumnType.INT),
        (b" 12 ", ColumnType.INT),
        (b"18446744073709551616", ColumnType.STRING),
        (b"1.5", ColumnType.FLOAT),
        (b"nan", ColumnType.FLOAT),
        (b"0x10", ColumnType.STRING),
        (b"NA", ColumnType.STRING),
    ],
)
def test_a_cell_is_typed_as_tfx_types_it(cell, expected):
    assert python_cell_type(cell) == expected
    assert column_type(pa.array([cell.decode()])) == expected


# Every string of up to three of the characters a number's grammar turns on (digits,
# signs, point, exponent, hex's x, inf's letters, the underscore and space Python
# allows), and words: where Arrow's casts and Python's rule could part.
GRAMMAR = "09+-.eExinf_ "
CELLS = [
    "".join(chars) for n in range(1, 4) for chars in itertools.product(GRAMMAR, repeat=n)
] + [
    "Infinity", "-inf", "+nan", "NaN", "nan", "-nan", "INF", "0X1F", "1_000", " 12 ",
    "0x1F", "0X1f", "-0x10", "1e999", "4.9e-324",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", "99999999999999999999", "1e20", "9.3e18", "١٢",
]  # fmt: skip


def test_a_column_is_typed_and_its_cells_read_as_python_s_int_and_float_read_them():
    """The regular expressions and Arrow's casts decide most cells; each cell alone, and
    beside a column of ints or of floats, gets TFX's type (Python's int()/float() rule:
    python_cell_type) and, typed as a number, Python's value."""
    for cell in CELLS:
        assert column_type(pa.array([cell])) == python_cell_type(cell.encode()), cell
        for numbers in (["1", "-2", ""], ["1.5", "2", ""]) if len(cell) < 3 else ():
            mixed = pa.array([*numbers, cell])
            kind = max(python_cell_type(c.encode()) for c in [*numbers, cell])
            assert column_type(mixed) == kind, (numbers, cell)
            if kind in (ColumnType.INT, ColumnType.FLOAT):
                typed = typed_batch(pa.RecordBatch.from_arrays([mixed], ["c"]), {"c": kind})
                parse = int if kind == ColumnType.INT else float
                dtype = np.int64 if kind == ColumnType.INT else np.float32
                want = [None if c == "" else dtype(parse(c)) for c in [*numbers, cell]]
                got = typed.column(0).to_pylist()
                for g, w in zip(got, want, strict=True):
                    assert (g is None and w is None) or g == w or (math.isnan(g) and math.isnan(w))


def test_a_column_typed_differently_in_two_files_takes_the_wider_type(tmp_path):
    root = corner_root(tmp_path, "a,b\n1,x\n2,y\n", "part-1.csv")
    corner_root(tmp_path, "a,b\n3.5,z\n", "part-2.csv")
    ours, stock = run_both(root, tmp_path)
    assert split_records(ours) == split_records(stock)
    values = sorted(
        tf.train.Example.FromString(r).features.feature["a"].float_list.value[0]
        for records in split_records(ours).values()
        for r in records
    )
    assert values == [1.0, 2.0, 3.5]


@pytest.mark.slow  # two ExampleGen Beam pipelines over the taxi slice, ours and the stock's
def test_the_taxi_rows_are_the_stock_executor_s_examples_in_its_splits(taxi_slice, tmp_path):
    ours, stock = run_both(taxi_slice, tmp_path)
    assert split_records(ours) == split_records(stock)
    assert sum(len(r) for r in split_records(ours).values()) == 3000


@pytest.mark.slow  # Beam's multi-processing runner: two worker processes
def test_two_worker_processes_write_every_row_once_in_tfx_s_splits(tmp_path):
    """The path above the in-memory threshold (pipeline/beam.py): Beam's
    multi-processing runner, whose workers each write the blocks of the files
    they read, and the staged files are gathered and named after them all."""
    header, rows = read_taxi_rows(limit=3000)
    root = tmp_path / "data"
    for part in range(4):
        write_csv(root / f"part-{part}.csv", header, rows[part::4])
    properties = {"input_config": proto_utils.proto_to_json(input_config(None))}
    workers = tuple(beam_pipeline_args("multi_processing", num_workers=2))
    ours = run_example_gen(SpanResolvingExecutor, root, tmp_path / "ours", properties, workers)
    stock = run_example_gen(stock_csv_executor.Executor, root, tmp_path / "stock", properties)
    assert split_records(ours) == split_records(stock)
    assert sum(len(r) for r in split_records(ours).values()) == 3000
    assert not list(Path(ours.uri).glob(".staging-*"))


@pytest.mark.slow  # two ExampleGen Beam pipelines, ours and the stock executor's
def test_a_split_is_written_in_several_files_for_parallel_readers(
    taxi_slice, tmp_path, monkeypatch
):
    monkeypatch.setattr(csv_to_examples, "BLOCK_BYTES", 64 * 1024)  # 3,000 rows: 6 blocks
    monkeypatch.setattr(example_blocks, "FILE_BLOCKS", 2)
    properties = {"input_config": proto_utils.proto_to_json(input_config(None))}
    ours = run_example_gen(SpanResolvingExecutor, taxi_slice, tmp_path / "ours", properties)
    stock = run_example_gen(stock_csv_executor.Executor, taxi_slice, tmp_path / "stock", properties)
    assert split_records(ours) == split_records(stock)
    for split in ("train", "eval"):
        assert sorted(p.name for p in Path(ours.uri, f"Split-{split}").iterdir()) == [
            f"data_tfrecord-0000{i}-of-00003.gz" for i in range(3)
        ]


def test_rows_lost_between_read_and_write_fail_the_run(taxi_slice, tmp_path, monkeypatch):
    """As when Beam's multi-processing runner drops elements between stages:
    the executor compares the rows read with the rows in the split files."""
    encode = read_examples.encode_examples
    monkeypatch.setattr(
        read_examples, "encode_examples", lambda block, types: encode(block, types)[:-10]
    )
    properties = {"input_config": proto_utils.proto_to_json(input_config(None))}
    with pytest.raises(RowsLostError, match=r"read 3000 rows but its split files hold 2990"):
        run_example_gen(SpanResolvingExecutor, taxi_slice, tmp_path / "ours", properties)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n1,2\n3\n", r"data\.csv: .*Expected 2 columns, got 1"),
        ('a,b\n1,"open\n2,3\n', r"data\.csv: a quoted cell is never closed"),
    ],
)
def test_a_malformed_file_is_named_in_the_error(tmp_path, text, message):
    root = corner_root(tmp_path, text)
    with pytest.raises(CsvError, match=message):
        list(read_blocks(str(root / "data.csv"), ["a", "b"]))


def test_bytes_that_are_not_utf8_are_refused_with_the_file_and_line_named(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "data.csv").write_bytes(b"a,b\n1,2\n1,caf\xe9\n")
    with pytest.raises(CsvError, match=r"data\.csv: line 3 is not UTF-8 \(byte 0xe9 at column 6\)"):
        list(read_blocks(str(root / "data.csv"), ["a", "b"]))


def test_a_header_alone_gives_empty_splits_as_tfx_s_executor_does(tmp_path):
    ours, stock = run_both(corner_root(tmp_path, "a,b\n"), tmp_path)
    assert split_records(ours) == split_records(stock) == {"train": [], "eval": []}
    for split in ("train", "eval"):
        assert [p.name for p in Path(ours.uri, f"Split-{split}").iterdir()] == [
            "data_tfrecord-00000-of-00001.gz"
        ]


def test_staged_files_are_named_in_the_split_and_leftovers_removed(tmp_path):
    split = tmp_path / "examples" / "Split-train"
    staging = Path(staging_dir(str(split)))
    staging.mkdir(parents=True)
    for name in ("b.gz", "a.gz", "orphan-of-a-failed-bundle.gz"):
        (staging / name).write_bytes(name.encode())
    name_staged_files([str(staging / "b.gz"), str(staging / "a.gz")], str(split))
    assert sorted(p.name for p in split.iterdir()) == [
        "data_tfrecord-00000-of-00002.gz",
        "data_tfrecord-00001-of-00002.gz",
    ]
    assert (split / "data_tfrecord-00000-of-00002.gz").read_bytes() == b"a.gz"
    assert not staging.exists()
    assert sorted(p.name for p in (tmp_path / "examples").iterdir()) == ["Split-train"]


def with_columns(records: list[bytes]) -> tuple[list[bytes], pa.RecordBatch]:
    """A block as ExampleGen's writer takes it: its records, and a feature column per
    row (here each record's index, to follow the rows' order into the Parquet)."""
    index = pa.array([[i] for i in range(len(records))], pa.large_list(pa.int64()))
    return list(records), pa.RecordBatch.from_arrays([index], names=["index"])


def split_writer(path: Path) -> example_blocks._WriteBlocksFn:
    return example_blocks._WriteBlocksFn(str(path / "Split-train"), str(path / "parquet-train"))


def test_a_block_is_shuffled_alike_every_time_it_is_written(tmp_path):
    """A rerun of the same input writes the same bytes; so do the same rows read from
    another format in the same block (tests/test_parquet_to_examples.py). The Parquet
    holds the same rows in the same order."""
    block = [f"record {i}".encode() for i in range(200)]

    def written(attempt: str) -> tuple[bytes, list[int]]:
        write = split_writer(tmp_path / attempt)
        write.start_bundle()
        write.process(with_columns(block))
        ((staged, parquet, rows, parquet_rows),) = [value.value for value in write.finish_bundle()]
        assert rows == parquet_rows == len(block)
        order = [i for (i,) in pq.read_table(parquet).column("index").to_pylist()]
        return gzip.decompress(Path(staged).read_bytes()), order

    first, order = written("first")
    assert (first, order) == written("second")
    assert first != tfrecord_frames(block)  # shuffled, not in the order read
    assert first == tfrecord_frames([block[i] for i in order])  # row for row
    (tmp_path / "frames").write_bytes(first)
    read_back = tf.data.TFRecordDataset(str(tmp_path / "frames")).as_numpy_iterator()
    assert sorted(read_back) == sorted(block)  # every record, once


def test_blocks_written_on_the_writing_thread_are_framed_in_order_file_by_file(
    tmp_path, monkeypatch
):
    """Three blocks, two to a file: each file holds its blocks' frames in the order they
    came, each block in its seeded order, as one thread would write them."""
    monkeypatch.setattr(example_blocks, "FILE_BLOCKS", 2)
    blocks = [[f"block {b} record {i}".encode() for i in range(300)] for b in range(3)]
    write = split_writer(tmp_path)
    write.start_bundle()
    for block in blocks:
        write.process(with_columns(block))
    staged = [value.value for value in write.finish_bundle()]
    assert [rows for _path, _parquet, rows, _parquet_rows in staged] == [600, 300]
    assert [pq.ParquetFile(parquet).metadata.num_row_groups for _, parquet, _, _ in staged] == [
        2,
        1,
    ]

    def frames(block: list[bytes]) -> bytes:
        shuffled = list(block)
        random.Random(example_blocks._block_seed(shuffled)).shuffle(shuffled)
        return tfrecord_frames(shuffled)

    contents = [gzip.decompress(Path(path).read_bytes()) for path, *_rest in staged]
    assert contents == [frames(blocks[0]) + frames(blocks[1]), frames(blocks[2])]


def test_the_examples_files_are_gzip_at_level_1_that_tfx_s_readers_read(tmp_path):
    """zlib marks a level-1 stream in the gzip header (RFC 1952: XFL 4, "fastest
    algorithm"; the default level writes 0); TensorFlow's GZIP reader, the Trainer's and
    the Evaluator's, reads every record back."""
    block = [f"record {i}".encode() * 40 for i in range(500)]
    write = split_writer(tmp_path)
    write.start_bundle()
    write.process(with_columns(block))
    ((staged, *_rest),) = [value.value for value in write.finish_bundle()]
    data = Path(staged).read_bytes()
    assert data[:3] == b"\x1f\x8b\x08" and data[8] == 4, data[:10]
    default = gzip.compress(gzip.decompress(data), compresslevel=6)
    assert default[8] == 0 and len(default) < len(data)  # the default: smaller, slower
    read_back = tf.data.TFRecordDataset(staged, compression_type="GZIP").as_numpy_iterator()
    assert sorted(read_back) == sorted(block)


def test_a_failed_write_fails_the_bundle(tmp_path, monkeypatch):
    def full_disk(file, records):
        raise OSError("No space left on device")

    monkeypatch.setattr(example_blocks, "_write_block", full_disk)
    write = split_writer(tmp_path)
    write.start_bundle()
    with pytest.raises(OSError, match="No space left"):
        for _ in range(example_blocks.WRITE_AHEAD + 1):
            write.process(with_columns([b"record"]))
    write.teardown()


def test_work_on_the_thread_keeps_its_order_and_at_most_ahead_pieces_wait():
    thread = InOrderThread("test", ahead=2)
    release = threading.Event()
    started = []

    def work(value):
        started.append(value)
        release.wait(5)
        return value * 10

    assert thread.submit("a", work, 1) == []
    assert thread.submit("b", work, 2) == []
    release.set()
    assert thread.submit("c", work, 3) == [("a", 10)]  # the third waits for the first
    assert thread.drain() == [("b", 20), ("c", 30)]
    assert started == [1, 2, 3]


def test_an_error_on_the_thread_is_raised_to_the_caller():
    thread = InOrderThread("test", ahead=0)
    with pytest.raises(ZeroDivisionError):
        thread.submit("a", lambda: 1 / 0)
    thread.close()


@pytest.mark.slow  # two ExampleGen Beam pipelines
def test_a_split_by_a_feature_s_value_is_tfx_s_split(taxi_slice, tmp_path):
    output = example_gen_pb2.Output(
        split_config=example_gen_pb2.SplitConfig(
            splits=[
                example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=3),
                example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=1),
            ],
            partition_feature_name="payment_type",
        )
    )
    properties = {
        "input_config": proto_utils.proto_to_json(input_config(None)),
        "output_config": proto_utils.proto_to_json(output),
    }
    ours = run_example_gen(SpanResolvingExecutor, taxi_slice, tmp_path / "ours", properties)
    stock = run_example_gen(stock_csv_executor.Executor, taxi_slice, tmp_path / "stock", properties)
    assert split_records(ours) == split_records(stock)
    payment = {
        split: {
            tf.train.Example.FromString(r).features.feature["payment_type"].bytes_list.value[0]
            for r in records
        }
        for split, records in split_records(ours).items()
    }
    assert payment["train"] and payment["eval"] and not payment["train"] & payment["eval"]
