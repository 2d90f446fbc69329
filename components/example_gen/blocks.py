"""ExampleGen's split and write, over blocks of serialized examples.

TFX's ExampleGen hands Beam one element per example: a partition, then a
`Reshuffle` and a TFRecord write per example. On the local DirectRunner each
of those crosses a stage boundary, encoded and decoded one at a time, which
was most of ExampleGen's time once the CSV was parsed in C++
(docs/where-the-time-goes.md). Here the elements are blocks (lists of serialized examples)
from the reader to the files, all in one stage:

- the split of each example is TFX's own (`_PartitionFn`: a hash of its bytes
  into the output config's buckets), so each lands where the stock executor
  puts it;
- TFX's writer reshuffles every example before writing; that holds the
  whole dataset in the runner's memory at once (the peak of a 1.5M-row run:
  5.8 GB), and the local DirectRunner's `Reshuffle` keeps its input order
  anyway, so locally TFX's files are in CSV order. Here each block is
  shuffled and written in the stage that encoded it: memory stays a few
  blocks per worker, examples are mixed within blocks of ~8,000 rows, and
  the Trainer shuffles the files and a 10,000-example buffer on top. A
  block's order is seeded by its records, so a rerun of the same input writes
  the same files, and the same rows read from CSV and from Parquet in one
  block are written alike (tests/test_parquet_to_examples.py);
- a run is framed as TFRecords and compressed in one piece, at zlib's level
  1 (`GZIP_LEVEL`; Beam's writer takes no level and uses zlib's default, 6);
  the files are TFX's: gzipped TFRecords, `data_tfrecord-?????-of-?????.gz` under
  `Split-<name>`, a new one every FILE_BLOCKS blocks so that the steps
  downstream read a large split on every worker;
- the rows read and the rows in the named files are counted, and a run whose
  counts differ fails (`check_rows_written`).
"""

from __future__ import annotations

import os
import random
import uuid
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import apache_beam as beam
import google_crc32c
import pyarrow as pa
import pyarrow.parquet as pq
from absl import logging
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics, MetricsFilter
from apache_beam.runners.runner import PipelineResult
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue
from tensorflow.core.example import example_pb2
from tfx.components.example_gen import base_example_gen_executor, write_split
from tfx.proto import example_gen_pb2

from components.example_gen.parquet_examples import PARQUET_FILE_NAME, PARQUET_SUFFIX
from components.example_gen.read_examples import METRICS_NAMESPACE, ROWS_READ, InOrderThread
from components.tfrecords import tfrecord_frames

# zlib's level for the examples' files. Level 1 compresses the framed records about
# three times faster than the default 6, and they decompress as fast (or faster):
# docs/scale.md, "Profile of StatisticsGen's work", has the figures. The files are
# 30% larger, read once or twice by the steps after ExampleGen.
GZIP_LEVEL = 1

# Rows are counted where the source reads them and where a split's files are
# named; the executor compares the two once the pipeline is done. Beam's
# multi-processing DirectRunner has been seen to drop elements between stages
# (8 of 184 blocks of a 1.5M-row file in one run of two, without an error):
# such a run must fail, not publish a split with rows missing.
# (components/example_gen/read_examples.py counts the rows read.)
ROWS_WRITTEN = "rows_written"
# The rows in the named Parquet files (ExampleGen's `parquet_examples`), compared too.
PARQUET_ROWS_WRITTEN = "parquet_rows_written"

# The Parquet files' codec. They are read back by StatisticsGen and Transform on the
# same machine or object store, where reading fewer bytes saves less than inflating
# them costs (docs/scale.md, "Statistics and analysis read Parquet").
PARQUET_COMPRESSION = "none"


class RowsLostError(RuntimeError):
    """ExampleGen's files hold fewer rows than its source read."""


def check_rows_written(result: PipelineResult) -> int:
    """The rows written, once the pipeline is done; RowsLostError unless every row read was."""
    try:
        counters = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))
    except NotImplementedError:
        logging.warning("This Beam runner reports no metrics; ExampleGen's row count is unchecked.")
        return -1

    def total(name: str) -> int:
        found = [c for c in counters["counters"] if c.key.metric.name == name]
        # Committed counts leave out failed bundles' attempts; not every runner has them.
        return sum(c.committed if c.committed is not None else c.attempted for c in found)

    read, written = total(ROWS_READ), total(ROWS_WRITTEN)
    parquet = total(PARQUET_ROWS_WRITTEN)
    for held, files in ((written, "split files"), (parquet, "Parquet split files")):
        if read != held:
            raise RowsLostError(
                f"ExampleGen read {read} rows but its {files} hold {held}: the Beam runner "
                f"lost {read - held} between stages. Nothing is published; run it again "
                "(only the multi-processing DirectRunner has been seen to lose rows; a local "
                "run keeps ExampleGen in memory)."
            )
    return written


# Records framed and compressed in one piece.
WRITE_RUN = 256
# Blocks handed to a split's writing thread and not yet written: memory stays
# this many blocks ahead of the files.
WRITE_AHEAD = 2
# Blocks per file (about 16 MiB of CSV, 125k taxi rows): 1.5M rows make 12
# files per split, which StatisticsGen, Transform and the Evaluator read on
# every worker.
FILE_BLOCKS = 16


def split_buckets(split_config: example_gen_pb2.SplitConfig) -> list[int]:
    """Cumulative hash buckets of the output splits, as TFX's executor counts them."""
    buckets, total = [], 0
    for split in split_config.splits:
        total += split.hash_buckets
        buckets.append(total)
    return buckets


class _PartitionBlock(beam.DoFn):
    """Each example of a block, and its row of the block's feature columns, into its
    split, by TFX's partition function."""

    def __init__(self, split_names: list[str], split_config: example_gen_pb2.SplitConfig):
        self._split_names = split_names
        self._split_config = split_config
        self._buckets = split_buckets(split_config)

    def process(
        self, block: tuple[list[bytes], pa.RecordBatch]
    ) -> Iterator[beam.pvalue.TaggedOutput]:
        records, columns = block
        per_split: list[list[int]] = [[] for _ in self._split_names]
        # A split by a feature's value needs the Example itself; a hash split, its bytes.
        by_feature = self._split_config.HasField("partition_feature_name")
        for row, record in enumerate(records):
            index = base_example_gen_executor._PartitionFn(
                example_pb2.Example.FromString(record) if by_feature else record,
                len(self._buckets),
                self._buckets,
                self._split_config,
            )
            per_split[index].append(row)
        for name, rows in zip(self._split_names, per_split, strict=True):
            if rows:
                yield beam.pvalue.TaggedOutput(
                    name, ([records[r] for r in rows], columns.take(pa.array(rows)))
                )


def partition_blocks(
    blocks: beam.PCollection,
    split_names: list[str],
    split_config: example_gen_pb2.SplitConfig,
) -> dict[str, beam.PCollection]:
    """Blocks of (examples, feature columns) -> such blocks per output split, keyed by
    split name."""
    tagged = blocks | "SplitData" >> beam.ParDo(
        _PartitionBlock(split_names, split_config)
    ).with_outputs(*split_names)
    return {name: tagged[name] for name in split_names}


def staging_dir(output_split_path: str) -> str:
    """Where a split's files are written before they are named: beside the split, not in it
    (readers glob the split's directory; a failed bundle's file must not be read)."""
    parent, split = os.path.split(output_split_path.rstrip("/"))
    return os.path.join(parent, f".staging-{split}")


def _block_seed(records: list[bytes]) -> int:
    """A block's shuffle seed, from its records: the same block, the same order. Its
    ends and length tell blocks apart enough for a seed, at no cost per record."""
    return google_crc32c.value(records[0] + records[-1]) ^ len(records) if records else 0


class GzipFile:
    """A file being written through gzip at GZIP_LEVEL: Beam's `CompressedFile` writes
    at zlib's default level and takes none (apache_beam 2.74.0, io/filesystem.py,
    `_initialize_compressor`). The same gzip format (RFC 1952), so every reader of
    TFX's `.gz` TFRecords reads it."""

    def __init__(self, path: str):
        self._raw = FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
        self._compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS | 16)

    def write(self, data: bytes) -> None:
        self._raw.write(self._compressor.compress(data))

    def close(self) -> None:
        self._raw.write(self._compressor.flush())
        self._raw.close()


def _write_block(file: Any, records: list[bytes]) -> None:
    for start in range(0, len(records), WRITE_RUN):
        file.write(tfrecord_frames(records[start : start + WRITE_RUN]))


class _ParquetFile:
    """One staged Parquet file: a row group per block, in the feature columns' schema."""

    def __init__(self, path: str, schema: pa.Schema):
        self._file = FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
        self._writer = pq.ParquetWriter(self._file, schema, compression=PARQUET_COMPRESSION)

    def write(self, columns: pa.RecordBatch) -> None:
        self._writer.write_batch(columns, row_group_size=max(columns.num_rows, 1))

    def close(self) -> None:
        self._writer.close()
        self._file.close()


class _WriteBlocksFn(beam.DoFn):
    """A bundle's blocks, each shuffled, into gzipped TFRecord files and, row for row in
    the same order, Parquet files, in the staging directories, a new file every
    FILE_BLOCKS blocks.

    Written in the stage that encodes the examples, without Beam's file sink:
    its side input splits the stage, and the runner would hold every example
    in memory in between. Several files per split let the steps downstream
    read in parallel: a gzipped file is read by one worker.

    The framing, compression and writes happen on a thread of their own, in
    the order the blocks came, at most WRITE_AHEAD blocks behind: zlib and
    Parquet's writer let go of the GIL, so that runs beside the next block's read
    and encoding (Arrow's kernels let go of it too) on a second core. The
    bytes are those written on one thread: the same writes to the same file,
    in the same order.
    """

    def __init__(self, output_split_path: str, parquet_split_path: str):
        self._staging = staging_dir(output_split_path)
        self._parquet_staging = staging_dir(parquet_split_path)
        self._file: Any = None
        self._parquet: _ParquetFile | None = None
        self._file_blocks = 0  # blocks in the open file
        # (staged path, staged Parquet path, rows, Parquet rows) per file
        self._written: list[tuple[str, str, int, int]] = []
        self._writer: InOrderThread | None = None

    def start_bundle(self) -> None:
        self._file = None
        self._parquet = None
        self._written = []
        self._writer = InOrderThread("WriteBlocks", WRITE_AHEAD)

    def _in_order(self, work: Callable[..., None], *args: Any) -> None:
        """`work` on the writing thread, after all work handed to it before."""
        assert self._writer is not None
        self._writer.submit(None, work, *args)  # a failed write raises here

    def process(self, block: tuple[list[bytes], pa.RecordBatch]) -> None:
        records, columns = block
        if self._file is None:
            name = uuid.uuid4().hex
            path = os.path.join(self._staging, f"{name}.gz")
            parquet_path = os.path.join(self._parquet_staging, f"{name}{PARQUET_SUFFIX}")
            self._file = GzipFile(path)
            self._parquet = _ParquetFile(parquet_path, columns.schema)
            self._written.append((path, parquet_path, 0, 0))
            self._file_blocks = 0
        order = list(range(len(records)))
        random.Random(_block_seed(records)).shuffle(order)
        shuffled = columns.take(pa.array(order, pa.int64()))
        path, parquet_path, rows, parquet_rows = self._written[-1]
        self._written[-1] = (
            path,
            parquet_path,
            rows + len(order),
            parquet_rows + shuffled.num_rows,
        )
        assert self._parquet is not None  # opened with self._file
        self._in_order(_write_block, self._file, [records[i] for i in order])
        self._in_order(self._parquet.write, shuffled)
        self._file_blocks += 1
        if self._file_blocks == FILE_BLOCKS:
            self._close()

    def _close(self) -> None:
        if self._file is not None:
            assert self._parquet is not None  # opened with self._file
            self._in_order(self._file.close)
            self._in_order(self._parquet.close)
            self._file = None
            self._parquet = None

    def finish_bundle(self) -> Iterator[WindowedValue]:
        self._close()
        assert self._writer is not None
        self._writer.drain()
        for staged_file in self._written:
            yield WindowedValue(staged_file, MIN_TIMESTAMP, [GlobalWindow()])

    def teardown(self) -> None:
        # After a failed bundle: its files are left for name_staged_files to delete.
        if self._writer is not None:
            self._writer.close()


def name_staged_files(
    staged: list[str],
    output_split_path: str,
    file_name: str = write_split.DEFAULT_TF_RECORD_FILE_NAME,
    suffix: str = ".gz",
    write_empty: Callable[[str], None] | None = None,
) -> None:
    """Staged files -> `data_tfrecord-00000-of-0000N.gz` in the split, as TFX names them
    (`file_name` and `suffix` for other formats); then the staging directory goes, with
    any file a failed bundle left there. No rows: one empty file (`write_empty`; by
    default an empty gzip, as Beam's TFRecord sink writes)."""
    if not FileSystems.exists(output_split_path):
        FileSystems.mkdirs(output_split_path)
    prefix = os.path.join(output_split_path, file_name)
    if not staged:
        empty = f"{prefix}-00000-of-00001{suffix}"
        if write_empty is None:
            FileSystems.create(empty, compression_type=CompressionTypes.GZIP).close()
        else:
            write_empty(empty)
    count = len(staged)
    FileSystems.rename(
        sorted(staged), [f"{prefix}-{i:05d}-of-{count:05d}{suffix}" for i in range(count)]
    )
    staging = staging_dir(output_split_path)
    (leftovers,) = FileSystems.match([os.path.join(staging, "*")])
    if leftovers.metadata_list:
        logging.warning(
            "Deleting %d file(s) of failed bundles under %s",
            len(leftovers.metadata_list),
            staging,
        )
        FileSystems.delete([m.path for m in leftovers.metadata_list])
    if FileSystems.exists(staging):  # a local directory; object stores have none
        FileSystems.delete([staging])


@beam.ptransform_fn
def WriteExampleBlocks(
    blocks: beam.PCollection,
    output_split_path: str,
    parquet_split_path: str,
    parquet_schema: beam.PCollection,
) -> beam.pvalue.PDone:
    """Blocks of (serialized examples, feature columns) -> one split's gzipped TFRecord
    files, and its Parquet files under `parquet_split_path`. `parquet_schema`: the
    feature columns' schema (one element), for the empty file of a split without rows."""
    staged = (
        blocks
        | "WriteBlocks" >> beam.ParDo(_WriteBlocksFn(output_split_path, parquet_split_path))
        # Gathered by a GroupByKey, as Beam's own file sink does: a combine is
        # lifted into the writing stage, where (multi-processing runner) a
        # path emitted by finish_bundle could miss it, and its file be taken
        # for a failed bundle's and deleted.
        | "Pair" >> beam.Map(lambda staged_file: (None, staged_file))
        | "Gather" >> beam.GroupByKey()
        | "StagedFiles" >> beam.FlatMap(lambda keyed: keyed[1])
    )
    # Once, after every bundle (an empty split too), as Beam's sink finalizes.
    return (
        blocks.pipeline
        | "Once" >> beam.Create([None])
        | "NameFiles"
        >> beam.Map(
            _name_split_files,
            beam.pvalue.AsList(staged),
            output_split_path,
            parquet_split_path,
            beam.pvalue.AsSingleton(parquet_schema),
        )
    )


def _empty_parquet(schema: pa.Schema) -> Callable[[str], None]:
    def write(path: str) -> None:
        _ParquetFile(path, schema).close()

    return write


def _name_split_files(
    _once,
    staged: list[tuple[str, str, int, int]],
    output_split_path: str,
    parquet_split_path: str,
    parquet_schema: pa.Schema,
) -> None:
    name_staged_files([staged_file[0] for staged_file in staged], output_split_path)
    name_staged_files(
        [staged_file[1] for staged_file in staged],
        parquet_split_path,
        PARQUET_FILE_NAME,
        PARQUET_SUFFIX,
        _empty_parquet(parquet_schema),
    )
    Metrics.counter(METRICS_NAMESPACE, ROWS_WRITTEN).inc(sum(f[2] for f in staged))
    Metrics.counter(METRICS_NAMESPACE, PARQUET_ROWS_WRITTEN).inc(sum(f[3] for f in staged))
