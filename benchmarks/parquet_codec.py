"""The codec of ExampleGen's Parquet copy (components/example_gen/blocks.py, PARQUET_COMPRESSION):
each codec's write and read-back of the same feature columns, in one process.

    ./dev exec python -m benchmarks.parquet_codec                 # 1.5M rows
    ./dev exec python -m benchmarks.parquet_codec --rows 150000

The rows are the embedded taxi sample repeated (benchmarks/scale.py's `write_rows`),
parsed by pyarrow and turned into the feature columns ExampleGen writes
(components/example_gen/parquet_examples.py, `feature_columns`) in blocks of BLOCK_ROWS rows, a
row group each, as ExampleGen writes them. Per codec: the seconds to write every
block to one file, the file's size, and the seconds to read it back row group by row
group, as Beam's Parquet source reads for StatisticsGen and Transform. A local run
writes and reads on one machine: the codec's cost is CPU both ways, its gain is bytes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from tfx_bsl.coders.csv_decoder import ColumnType

from benchmarks.scale import LARGE_ROWS, write_rows
from benchmarks.targets import load_average
from components.example_gen.blocks import PARQUET_COMPRESSION
from components.example_gen.parquet_examples import feature_columns

CODECS = ("none", "snappy", "lz4", "zstd")
BLOCK_ROWS = 8_000  # about the rows of one of ExampleGen's CSV blocks (1 MiB of taxi CSV)


def _kind(arrow_type: pa.DataType) -> ColumnType:
    if pa.types.is_integer(arrow_type):
        return ColumnType.INT
    if pa.types.is_floating(arrow_type):
        return ColumnType.FLOAT
    if pa.types.is_null(arrow_type):
        return ColumnType.UNKNOWN
    return ColumnType.STRING


def feature_blocks(csv: Path) -> list[pa.RecordBatch]:
    table = pa_csv.read_csv(csv)
    kinds = {field.name: _kind(field.type) for field in table.schema}
    return [feature_columns(b, kinds) for b in table.to_batches(max_chunksize=BLOCK_ROWS)]


def measure(blocks: list[pa.RecordBatch], path: Path, codec: str) -> tuple[float, int, float]:
    started = time.perf_counter()
    with pq.ParquetWriter(path, blocks[0].schema, compression=codec) as writer:
        for block in blocks:
            writer.write_batch(block, row_group_size=block.num_rows)
    written = time.perf_counter() - started
    started = time.perf_counter()
    file = pq.ParquetFile(path)
    rows = sum(file.read_row_group(i).num_rows for i in range(file.num_row_groups))
    read = time.perf_counter() - started
    assert rows == sum(b.num_rows for b in blocks)
    return written, path.stat().st_size, read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=LARGE_ROWS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_parquet_codec_") as tmp:
        csv = Path(tmp) / "data.csv"
        write_rows(csv, args.rows)
        blocks = feature_blocks(csv)
        print(f"{args.rows:,} rows, {len(blocks)} blocks; ExampleGen writes: {PARQUET_COMPRESSION}")
        print("| codec  | write s | MB    | read s | write + read s | load |")
        print("| ------ | ------- | ----- | ------ | -------------- | ---- |")
        for codec in CODECS:
            written, size, read = measure(blocks, Path(tmp) / f"{codec}.parquet", codec)
            print(
                f"| {codec:<6} | {written:7.2f} | {size / 1e6:5.0f} | {read:6.2f} | "
                f"{written + read:14.2f} | {load_average():.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
