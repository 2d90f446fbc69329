"""ExampleGen on the same rows as CSV and as Parquet, beside stock TFX's Parquet executor
and the floor (each part of the work alone).

    ./dev exec python -m benchmarks.example_gen_formats                 # 1.5M rows
    ./dev exec python -m benchmarks.example_gen_formats --rows 150000
    ./dev exec python -m benchmarks.example_gen_formats --no-stock      # without TFX's executor

The rows are the embedded taxi sample repeated (benchmarks/scale.py's
`write_rows`), written once as CSV and once as Parquet as Spark writes a
table: snappy, row groups of ROW_GROUP_ROWS rows, a `_SUCCESS` marker. Each
run is a fresh process, as a local run's step is: our ExampleGen executor
(`SpanResolvingExecutor`, in memory as the local runner runs it) on each
folder, and TFX 1.16's `custom_executors.parquet_executor` on the Parquet
folder. Peak memory is the process's maximum resident size.

The floor, on the Parquet file, in one process, each part timed alone:
Arrow's read of every row group; the encoding of those batches into
serialized tf.Examples (components/example_encoding.py); TFRecord framing
and gzip of those records into one file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks.scale import LARGE_ROWS, measured_in_python, write_rows

ROW_GROUP_ROWS = 131_072

# Each measurement in a fresh process; prints "seconds peak_bytes".
_RUN = """
import resource, sys, time
from pathlib import Path
from tfx.components.example_gen.custom_executors import parquet_executor
from tfx.utils import proto_utils
from components.example_gen import SpanResolvingExecutor, input_config
from tests.harness import run_example_gen
executor = {"ours": SpanResolvingExecutor, "stock": parquet_executor.Executor}[sys.argv[1]]
properties = {"input_config": proto_utils.proto_to_json(input_config(None))}
started = time.monotonic()
run_example_gen(executor, Path(sys.argv[2]), Path(sys.argv[3]), properties)
print(time.monotonic() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

_FLOOR = """
import gzip, sys, time
import pyarrow.parquet as pq
from tfx_bsl.coders.csv_decoder import ColumnType
from components.example_blocks import tfrecord_frames
from components.example_encoding import encode_examples
from components.parquet_columns import plan_files, read_row_group
started = time.monotonic()
plan = plan_files([sys.argv[1]], lambda p: open(p, "rb"))
opener = lambda p: open(p, "rb")
batches = [b for unit in plan.row_groups for b in read_row_group(unit, plan, opener)]
read = time.monotonic()
kinds = {name: ColumnType[kind] for name, kind in plan.kinds.items()}
records = [r for b in batches for r in encode_examples(b, kinds)]
encoded = time.monotonic()
with gzip.open(sys.argv[2], "wb", compresslevel=6) as f:
    for start in range(0, len(records), 256):
        f.write(tfrecord_frames(records[start : start + 256]))
written = time.monotonic()
print(read - started, encoded - read, written - encoded)
"""


def write_parquet(csv: Path, root: Path) -> None:
    """The CSV's rows as a Spark-written table: snappy row groups and a _SUCCESS marker."""
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    table = pa_csv.read_csv(csv, convert_options=pa_csv.ConvertOptions(strings_can_be_null=True))
    root.mkdir(parents=True)
    pq.write_table(
        table,
        root / "part-00000.snappy.parquet",
        compression="snappy",
        row_group_size=ROW_GROUP_ROWS,
    )
    (root / "_SUCCESS").write_bytes(b"")


def table(rows: int, results: dict[str, list[float]], floor: list[float]) -> str:
    lines = [
        f"ExampleGen on {rows:,} rows (1 file; Parquet in row groups of {ROW_GROUP_ROWS:,})",
        "",
        "| run | seconds | peak memory |",
        "| --- | --- | --- |",
    ]
    for name, (seconds, peak) in results.items():
        lines.append(f"| {name} | {seconds:.1f} | {peak / 1e9:.2f} GB |")
    read, encode, write = floor
    lines += [
        "",
        "| floor (Parquet file, one process) | seconds |",
        "| --- | --- |",
        f"| Arrow read of every row group, columns cast | {read:.2f} |",
        f"| encode as serialized tf.Examples | {encode:.2f} |",
        f"| TFRecord framing and gzip, one file | {write:.2f} |",
        f"| total | {read + encode + write:.2f} |",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=LARGE_ROWS)
    parser.add_argument("--no-stock", action="store_true", help="skip TFX's Parquet executor")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="example-gen-formats-") as work:
        workdir = Path(work)
        csv_root, parquet_root = workdir / "csv", workdir / "parquet"
        write_rows(csv_root / "data.csv", args.rows)
        write_parquet(csv_root / "data.csv", parquet_root)
        results = {
            "ours, CSV": measured_in_python(_RUN, "ours", str(csv_root), str(workdir / "out-csv")),
            "ours, Parquet": measured_in_python(
                _RUN, "ours", str(parquet_root), str(workdir / "out-pq")
            ),
        }
        if not args.no_stock:
            results["TFX parquet_executor, Parquet"] = measured_in_python(
                _RUN, "stock", str(parquet_root), str(workdir / "out-stock")
            )
        floor = measured_in_python(
            _FLOOR, str(parquet_root / "part-00000.snappy.parquet"), str(workdir / "floor.gz")
        )
    print(table(args.rows, results, floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
