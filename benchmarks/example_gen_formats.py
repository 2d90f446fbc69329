"""ExampleGen on the same rows as CSV and as Parquet, beside stock TFX's Parquet executor
and the floor (each part of the work alone).

    ./dev exec python -m benchmarks.example_gen_formats                 # 1.5M rows
    ./dev exec python -m benchmarks.example_gen_formats --rows 150000
    ./dev exec python -m benchmarks.example_gen_formats --no-stock      # without TFX's executor
    ./dev exec python -m benchmarks.example_gen_formats --stock-rows 150000  # TFX's on a part
    ./dev exec python -m benchmarks.example_gen_formats --rounds 3 --no-stock --no-floor

The rows are the embedded taxi sample repeated (benchmarks/scale.py's
`write_rows`), written once as CSV and once as Parquet as Spark writes a
table: snappy, row groups of ROW_GROUP_ROWS rows, a `_SUCCESS` marker. Each
run is a fresh process, as a local run's step is: our ExampleGen executor
(`SpanResolvingExecutor`, in memory as the local runner runs it) on each
folder, and TFX 1.16's `custom_executors.parquet_executor` on the Parquet
folder. Peak memory is the process's maximum resident size. Ours runs in
both of the local runner's Beam modes (pipeline/beam.py): in memory, and on
the multi-processing runner's workers, one per core. `--stock-rows N` runs
TFX's executor on the first N rows only and scales its time to the whole
(it holds every row as a Python dict: its time grows with the rows).

The floor, per format, in one process, each part timed alone: our reader's
read of the file into typed Arrow columns (components/example_gen/csv_to_examples.py,
components/example_gen/parquet_columns.py); their encoding into serialized tf.Examples
(components/example_gen/encoding.py); TFRecord framing; gzip of the framed
bytes in memory; and the write of the compressed bytes to a file.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.scale import LARGE_ROWS, measured_in_python, write_rows

ROW_GROUP_ROWS = 131_072
MODES = ("in_memory", "multi_processing")

# Each measurement in a fresh process; prints "seconds peak_bytes". The peak is
# this process's; the multi-processing runner's workers are processes of their own.
_RUN = """
import resource, sys, time
from pathlib import Path
from tfx.components.example_gen.custom_executors import parquet_executor
from tfx.utils import proto_utils
from components.example_gen.executor import SpanResolvingExecutor
from components.example_gen.input_settings import input_config
from pipeline.beam import beam_pipeline_args
from tests.harness import run_example_gen
executor = {"ours": SpanResolvingExecutor, "stock": parquet_executor.Executor}[sys.argv[1]]
properties = {"input_config": proto_utils.proto_to_json(input_config(None))}
args = tuple(beam_pipeline_args(sys.argv[4]))
started = time.monotonic()
run_example_gen(executor, Path(sys.argv[2]), Path(sys.argv[3]), properties, args)
print(time.monotonic() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

# argv: format, file, output file; prints the seconds of each part.
_FLOOR = """
import sys, time, zlib
from tfx_bsl.coders.csv_decoder import ColumnType
from components.example_gen.csv_to_examples import (
    column_type,
    merge_types,
    read_blocks,
    typed_batch,
)
from components.example_gen.csv_header import read_header
from components.tfrecords import tfrecord_frames
from components.example_gen.encoding import encode_examples
from components.example_gen.parquet_columns import plan_files, read_row_group
fmt, path, out = sys.argv[1:4]
opener = lambda p: open(p, "rb")
started = time.monotonic()
if fmt == "parquet":
    plan = plan_files([path], opener)
    batches = [b for unit in plan.row_groups for b in read_row_group(unit, plan, opener)]
    kinds = {name: ColumnType[kind] for name, kind in plan.kinds.items()}
else:
    names = list(read_header(path, opener).columns)
    blocks = list(read_blocks(path, names))
    kinds = merge_types(names, [{n: column_type(b.column(n)) for n in names} for b in blocks])
    batches = [typed_batch(block, kinds) for block in blocks]
read = time.monotonic()
records = [r for b in batches for r in encode_examples(b, kinds)]
encoded = time.monotonic()
framed = [tfrecord_frames(records[i : i + 256]) for i in range(0, len(records), 256)]
framing = time.monotonic()
compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
compressed = [compressor.compress(f) for f in framed] + [compressor.flush()]
compressing = time.monotonic()
with open(out, "wb") as f:
    f.writelines(compressed)
written = time.monotonic()
print(read - started, encoded - read, framing - encoded, compressing - framing,
      written - compressing)
"""


def write_parquet(csv: Path, root: Path, rows: int | None = None) -> Path:
    """The CSV's rows (the first `rows`) as a Spark-written table: snappy row groups and
    a _SUCCESS marker."""
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    table = pa_csv.read_csv(csv, convert_options=pa_csv.ConvertOptions(strings_can_be_null=True))
    root.mkdir(parents=True)
    pq.write_table(
        table if rows is None else table.slice(0, rows),
        root / "part-00000.snappy.parquet",
        compression="snappy",
        row_group_size=ROW_GROUP_ROWS,
    )
    (root / "_SUCCESS").write_bytes(b"")
    return root / "part-00000.snappy.parquet"


def median_run(runs: list[list[float]]) -> list[float]:
    """[median seconds, the largest peak, each run's seconds in order]."""
    seconds = [run[0] for run in runs]
    return [statistics.median(seconds), max(run[1] for run in runs), *seconds]


FLOOR_PARTS = (
    "our reader: the file into typed Arrow columns",
    "encode as serialized tf.Examples",
    "TFRecord framing",
    "gzip, in memory",
    "write the compressed bytes",
)


def table(
    rows: int, results: dict[str, list[float]], floors: dict[str, list[float]], sizes: dict
) -> str:
    lines = [
        f"ExampleGen on {rows:,} rows (1 file each: CSV {sizes['csv'] / 1e6:.1f} MB; Parquet "
        f"{sizes['parquet'] / 1e6:.1f} MB, snappy, row groups of {ROW_GROUP_ROWS:,})",
        "",
        "| run | seconds | peak memory (launching process) |",
        "| --- | --- | --- |",
    ]
    for name, (seconds, peak, *each) in results.items():
        runs = f" ({' / '.join(f'{s:.1f}' for s in each)})" if len(each) > 1 else ""
        lines.append(f"| {name} | {seconds:.1f}{runs} | {peak / 1e9:.2f} GB |")
    if not floors:
        return "\n".join(lines)
    lines += ["", "| floor (one process, each part alone) | CSV | Parquet |", "| --- | --- | --- |"]
    for i, part in enumerate(FLOOR_PARTS):
        lines.append(f"| {part} | {floors['csv'][i]:.2f} | {floors['parquet'][i]:.2f} |")
    lines.append(f"| total | {sum(floors['csv']):.2f} | {sum(floors['parquet']):.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=LARGE_ROWS)
    parser.add_argument("--no-stock", action="store_true", help="skip TFX's Parquet executor")
    parser.add_argument(
        "--stock-rows", type=int, help="run TFX's executor on the first N rows and scale it"
    )
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument(
        "--rounds", type=int, default=1, help="our runs, CSV and Parquet alternating"
    )
    parser.add_argument("--no-floor", action="store_true", help="skip the floor")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="example-gen-formats-") as work:
        workdir = Path(work)
        csv_root, parquet_root = workdir / "csv", workdir / "parquet"
        write_rows(csv_root / "data.csv", args.rows)
        parquet_file = write_parquet(csv_root / "data.csv", parquet_root)
        sizes = {
            "csv": (csv_root / "data.csv").stat().st_size,
            "parquet": parquet_file.stat().st_size,
        }
        runs: dict[str, list[list[float]]] = {}
        for mode in args.modes:
            for _ in range(args.rounds):
                for name, root in (("CSV", csv_root), ("Parquet", parquet_root)):
                    out = workdir / f"out-{name}-{mode}"
                    runs.setdefault(f"ours, {name}, {mode}", []).append(
                        measured_in_python(_RUN, "ours", str(root), str(out), mode)
                    )
                    shutil.rmtree(out)
        results = {name: median_run(measured) for name, measured in runs.items()}
        if not args.no_stock:
            stock_rows = min(args.stock_rows or args.rows, args.rows)
            stock_root = parquet_root
            if stock_rows < args.rows:
                stock_root = workdir / "parquet-part"
                write_parquet(csv_root / "data.csv", stock_root, stock_rows)
            seconds, peak = measured_in_python(
                _RUN, "stock", str(stock_root), str(workdir / "out-stock"), "in_memory"
            )
            name = "TFX parquet_executor, Parquet, in_memory"
            if stock_rows < args.rows:
                name += f" (run on {stock_rows:,} rows: {seconds:.1f} s; time scaled)"
                seconds *= args.rows / stock_rows
            results[name] = [seconds, peak]
        floors = {}
        if not args.no_floor:
            floors = {
                "csv": measured_in_python(
                    _FLOOR, "csv", str(csv_root / "data.csv"), str(workdir / "floor.gz")
                ),
                "parquet": measured_in_python(
                    _FLOOR, "parquet", str(parquet_file), str(workdir / "floor.gz")
                ),
            }
    print(table(args.rows, results, floors, sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
