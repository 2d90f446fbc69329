"""The cost curve of a local run: the whole DAG at growing row counts, beside a floor.

    ./dev exec python -m benchmarks.scale                       # 15k, 150k, 1.5M, above threshold
    ./dev exec python -m benchmarks.scale --rows 15000 150000   # chosen sizes
    ./dev exec python -m benchmarks.scale --no-anchor             # without the TFX taxi template
    ./dev exec python -m benchmarks.scale --chosen-mode-only      # no forced other-mode runs

Each size is the embedded taxi sample repeated to that many rows (one
header), as a user's first larger CSV. One default size is the first one
whose file is above the in-memory Beam threshold (pipeline/beam.py:
IN_MEMORY_MAX_BYTES). The sizes on either side of the threshold run in both
Beam modes, the mode the runner would not choose forced with `--beam-mode`:
that is the check of the threshold.

For each size, `local_runner.py --data-root DIR --no-report` runs in a fresh
process on a fresh output directory (its defaults: Beam mode chosen by size).
Per-step seconds come from ML Metadata. Peak memory, sampled twice a
second over the runner and all its child processes: the sum of their
proportional set sizes (what the machine gives them: a shared page counts
once in all), and in brackets the sum of their resident sizes (which counts
TensorFlow's libraries once per process).

The floor, measured in the same run on the same file:

* ExampleGen: the CSV parsed with pyarrow, encoded as `tf.Example`s by
  tfx_bsl's record-batch encoder, and written as gzipped TFRecords (what
  ExampleGen writes), in one process;
* Evaluator: the exported model's serving signature scoring ExampleGen's
  eval split in batches of 8192 serialized examples.

With the anchor, TFX 1.16's taxi template (benchmarks/local_pipeline.py's)
runs at 150k rows too, on the same file, for the ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.local_pipeline import (
    ANCHOR_PIPELINE,
    DATA_ROOT,
    OUR_PIPELINE,
    _summary,
    make_anchor,
    template_environment,
)
from benchmarks.targets import Target, targets_table
from pipeline.beam import IN_MEMORY_MAX_BYTES

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE = DATA_ROOT / "data.csv"
# Issue 43's targets at the largest default size (docs/benchmarks.md).
LARGE_ROWS = 1_500_000
LARGE_TO_ANCHOR_TARGET = 0.6  # our wall time at 1.5M rows over the template's at 150k (issue 70)
EVALUATOR_FLOOR_TARGET = 10.0  # our Evaluator over its floor at 1.5M rows
PEAK_MEMORY_TARGET_GB = 4.0  # the run's peak (proportional set sizes) at 1.5M rows
BASE_SIZES = (15_000, 150_000, LARGE_ROWS)
ANCHOR_ROWS = 150_000
EVAL_BATCH = 8192
STEPS = ("ExampleGen", "StatisticsGen", "Transform", "Trainer", "Evaluator")


def write_rows(path: Path, rows: int) -> int:
    """The sample's rows repeated to `rows` data rows under one header; returns the file's bytes."""
    header, *lines = SAMPLE.read_text().splitlines(keepends=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        f.write(header)
        written = 0
        while written < rows:
            chunk = lines[: rows - written]
            f.writelines(chunk)
            written += len(chunk)
    return path.stat().st_size


def _bytes_per_row() -> float:
    header, *lines = SAMPLE.read_text().splitlines(keepends=True)
    return (SAMPLE.stat().st_size - len(header)) / len(lines)


def rows_above_threshold() -> int:
    """The first round number of rows whose file is above the in-memory Beam threshold."""
    return int(math.ceil(IN_MEMORY_MAX_BYTES * 1.1 / _bytes_per_row() / 100_000) * 100_000)


def threshold_pair(sizes: list[int]) -> set[int]:
    """The largest size at or below the threshold and the smallest above it."""
    below = [n for n in sizes if n * _bytes_per_row() <= IN_MEMORY_MAX_BYTES]
    above = [n for n in sizes if n * _bytes_per_row() > IN_MEMORY_MAX_BYTES]
    return {*below[-1:], *above[:1]}


class PeakMemory(threading.Thread):
    """The largest memory of a process and its descendants while it runs, two ways.

    `peak`: the sum of their proportional set sizes (PSS: a page shared by N
    processes counts 1/N in each), what the tree takes from the machine.
    `peak_rss`: the sum of their resident sizes, which counts TensorFlow's
    shared libraries and Beam's forked pages once per process.
    """

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.peak_rss, self.done = pid, 0, 0, threading.Event()

    def run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self.done.is_set():
            pss = rss = 0
            try:
                for process in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                        memory = process.memory_full_info()
                        pss, rss = pss + memory.pss, rss + memory.rss
            except psutil.NoSuchProcess:
                return
            self.peak, self.peak_rss = max(self.peak, pss), max(self.peak_rss, rss)
            self.done.wait(0.5)  # reading smaps is slower than RSS; twice a second


def run_measured(
    command: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[float, tuple[int, int], str]:
    """(wall seconds, (peak tree PSS, peak tree RSS) bytes, output) of a command that must
    succeed."""
    started = time.monotonic()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    memory = PeakMemory(process.pid)
    memory.start()
    output, _ = process.communicate()
    seconds = time.monotonic() - started
    memory.done.set()
    memory.join()
    if process.returncode:
        sys.stderr.write(output[-6000:])
        raise SystemExit(f"{' '.join(command)} failed with exit code {process.returncode}")
    return seconds, (memory.peak, memory.peak_rss), output


def run_ours(data_dir: Path, out: Path, beam_mode: str = "auto") -> dict:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "local_runner.py", "--data-root", str(data_dir)]
    command += ["--output-dir", str(out), "--no-report", "--beam-mode", beam_mode]
    wall, peak, output = run_measured(command, REPO_ROOT)
    mode = next(
        (line.split("(Beam ", 1)[1].split(",", 1)[0] for line in output.splitlines()
         if line.startswith("Running ") and "(Beam " in line),
        "?",
    )  # fmt: skip
    summary = _summary(out / "metadata.sqlite", OUR_PIPELINE, REPO_ROOT)
    return {"wall": wall, "peak": peak[0], "peak_rss": peak[1], "beam_mode": mode, **summary}


def run_anchor(anchor: Path, csv: Path) -> dict:
    """The taxi template on `csv` (its data directory holds one CSV)."""
    data = anchor / "data"
    for old in data.glob("*.csv"):
        old.unlink()
    shutil.copy2(csv, data / "data.csv")
    for name in ("tfx_pipeline_output", "tfx_metadata"):
        shutil.rmtree(anchor / name, ignore_errors=True)
    env = template_environment(anchor / "tmp")
    wall, peak, _ = run_measured([sys.executable, "local_runner.py"], anchor, env)
    metadata_path = anchor / "tfx_metadata" / ANCHOR_PIPELINE / "metadata.db"
    summary = _summary(metadata_path, ANCHOR_PIPELINE, anchor)
    return {"wall": wall, "peak": peak[0], "peak_rss": peak[1], **summary}


# Run in a fresh process each: the floors are one process's work, as a user's script would be.
# Each cell becomes a feature of one value, an empty cell one of none, as ExampleGen
# encodes them: floats as float32, strings as bytes (a column empty in the rows
# pyarrow infers types from has the null type: its values are none).
_EXAMPLE_GEN_FLOOR = """
import sys, time
import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import tensorflow as tf
from tfx_bsl.coders import example_coder

def as_lists(batch):
    arrays = []
    for column in batch.columns:
        if pa.types.is_floating(column.type) or pa.types.is_null(column.type):
            column = column.cast(pa.float32())
        elif pa.types.is_string(column.type):
            column = column.cast(pa.binary())
        present = np.logical_not(column.is_null().to_numpy(zero_copy_only=False))
        offsets = np.concatenate([[0], np.cumsum(present)]).astype(np.int32)
        arrays.append(pa.ListArray.from_arrays(pa.array(offsets), column.drop_null()))
    return pa.RecordBatch.from_arrays(arrays, batch.schema.names)

started = time.monotonic()
table = pa_csv.read_csv(sys.argv[1])
parsed = time.monotonic()
with tf.io.TFRecordWriter(sys.argv[2], options="GZIP") as writer:
    for batch in table.to_batches(max_chunksize=65536):
        for example in example_coder.RecordBatchToExamples(as_lists(batch)):
            writer.write(example)
print(parsed - started, time.monotonic() - started)
"""

_EVALUATOR_FLOOR = """
import glob, sys, time
import tensorflow as tf
from trainer.export import SERVING_SIGNATURE
serve = tf.saved_model.load(sys.argv[1]).signatures[SERVING_SIGNATURE]
files = sorted(glob.glob(sys.argv[2] + "/Split-eval/*.gz"))
records = list(tf.data.TFRecordDataset(files, compression_type="GZIP").batch(int(sys.argv[3])))
serve(examples=records[0])  # traced and warmed up before the clock starts
started = time.monotonic()
count = 0
for batch in records:
    serve(examples=batch)
    count += int(batch.shape[0])
print(time.monotonic() - started, count)
"""


def measured_in_python(code: str, *args: str) -> list[float]:
    """The numbers the last line `code` prints, run in a fresh Python at the repository root."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO_ROOT, capture_output=True, text=True
    )
    if proc.returncode:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"a measurement failed with exit code {proc.returncode}")
    return [float(v) for v in proc.stdout.strip().splitlines()[-1].split()]


def floors(csv: Path, out: Path, workdir: Path) -> dict:
    parse, example_gen = measured_in_python(
        _EXAMPLE_GEN_FLOOR, str(csv), str(workdir / "floor.tfrecord.gz")
    )
    (workdir / "floor.tfrecord.gz").unlink()
    pushed = max((out / "serving_model").iterdir(), key=lambda p: p.name)
    examples = max((out / "pipeline_root").glob("ExampleGen/examples/*"), key=lambda p: int(p.name))
    evaluator, eval_rows = measured_in_python(
        _EVALUATOR_FLOOR, str(pushed), str(examples), str(EVAL_BATCH)
    )
    return {
        "parse": parse,
        "example_gen": example_gen,
        "evaluator": evaluator,
        "eval_rows": eval_rows,
    }


# Our step ids that the TFX taxi template (the anchor) names otherwise.
_ANCHOR_IDS = {"ExampleGen": "CsvExampleGen"}


def _step_seconds(run: dict, step: str) -> float:
    found = run["steps"].get(step) or run["steps"].get(_ANCHOR_IDS.get(step, step))
    return (found or [None, float("nan")])[1]


def table(results: list[dict], anchor: dict | None) -> str:
    rows: list[tuple[str, ...]] = [
        ("rows", "CSV MB", "Beam", "wall s", "rows/s", *STEPS, "peak GB (RSS sum)", "accuracy",
         "ExampleGen floor s", "Evaluator floor s", "ExampleGen / floor", "Evaluator / floor")
    ]  # fmt: skip
    for r in results:
        run, floor = r["ours"], r["floor"]
        rows.append(
            (
                f"{r['rows']:,}",
                f"{r['bytes'] / 1e6:.0f}",
                run["beam_mode"] + (" (forced)" if r.get("forced") else ""),
                f"{run['wall']:.0f}",
                f"{r['rows'] / run['wall']:,.0f}",
                *(f"{_step_seconds(run, c):.1f}" for c in STEPS),
                f"{run['peak'] / 1e9:.2f} ({run['peak_rss'] / 1e9:.2f})",
                f"{run['metrics'].get('binary_accuracy', float('nan')):.4f}",
                f"{floor['example_gen']:.2f} (parse {floor['parse']:.2f})",
                f"{floor['evaluator']:.2f} ({floor['eval_rows']:,.0f} rows)",
                f"{_step_seconds(run, 'ExampleGen') / floor['example_gen']:.1f}x",
                f"{_step_seconds(run, 'Evaluator') / floor['evaluator']:.1f}x",
            )
        )
    if anchor is not None:
        ours = next(r for r in results if r["rows"] == ANCHOR_ROWS and not r["forced"])["ours"]
        rows.append(
            (
                f"{ANCHOR_ROWS:,} (TFX taxi template)",
                "",
                "",
                f"{anchor['wall']:.0f}",
                f"{ANCHOR_ROWS / anchor['wall']:,.0f}",
                *(f"{_step_seconds(anchor, c):.1f}" for c in STEPS),
                f"{anchor['peak'] / 1e9:.2f} ({anchor['peak_rss'] / 1e9:.2f})",
                f"{anchor['metrics'].get('binary_accuracy', float('nan')):.4f}",
                f"ratio ours / template: {ours['wall'] / anchor['wall']:.2f}x",
                "",
                "",
                "",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)


def scale_targets(results: list[dict], anchor: dict | None) -> list[Target]:
    """The targets at LARGE_ROWS, where that size ran in the mode the runner chose."""
    large = next((r for r in results if r["rows"] == LARGE_ROWS and not r["forced"]), None)
    if large is None:
        return []
    run, floor = large["ours"], large["floor"]
    targets = [
        Target(
            f"Evaluator at {LARGE_ROWS:,} rows / its floor",
            _step_seconds(run, "Evaluator") / floor["evaluator"],
            EVALUATOR_FLOOR_TARGET,
        ),
        Target(
            f"peak memory at {LARGE_ROWS:,} rows", run["peak"] / 1e9, PEAK_MEMORY_TARGET_GB, "GB"
        ),
    ]
    if anchor is not None:
        targets.insert(
            0,
            Target(
                f"{LARGE_ROWS:,} rows / TFX taxi template on {ANCHOR_ROWS:,}",
                run["wall"] / anchor["wall"],
                LARGE_TO_ANCHOR_TARGET,
            ),
        )
    return targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, nargs="+", help="sizes (default: 15k, 150k, 1.5M, above the threshold)"
    )
    parser.add_argument("--no-anchor", action="store_true", help="skip the TFX taxi template")
    parser.add_argument(
        "--chosen-mode-only",
        action="store_true",
        help="skip the forced runs in the other Beam mode (the threshold's check)",
    )
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args(argv)
    sizes = sorted(set(args.rows or [*BASE_SIZES, rows_above_threshold()]))
    results = []
    anchor_result = None
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        workdir = Path(tmp)
        for rows in sizes:
            data_dir = workdir / f"data-{rows}"
            size = write_rows(data_dir / "data.csv", rows)
            print(f"{rows:,} rows ({size / 1e6:.0f} MB): this template ...", flush=True)
            out = workdir / f"out-{rows}"
            if rows in threshold_pair(sizes) and not args.chosen_mode_only:
                other = "in_memory" if size > IN_MEMORY_MAX_BYTES else "multi_processing"
                print(f"  forced {other} ...", flush=True)
                forced = run_ours(data_dir, out, other)
                print(f"  {forced['wall']:.0f} s; floors ...", flush=True)
                floor = floors(data_dir / "data.csv", out, workdir)
                results.append(
                    {"rows": rows, "bytes": size, "ours": forced, "floor": floor, "forced": True}
                )
            ours = run_ours(data_dir, out)
            print(f"  {ours['wall']:.0f} s; floors ...", flush=True)
            floor = floors(data_dir / "data.csv", out, workdir)
            results.append(
                {"rows": rows, "bytes": size, "ours": ours, "floor": floor, "forced": False}
            )
            if rows == ANCHOR_ROWS and not args.no_anchor:
                print(f"{rows:,} rows: TFX taxi template ...", flush=True)
                anchor_result = run_anchor(make_anchor(workdir), data_dir / "data.csv")
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(data_dir, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"results": results, "anchor": anchor_result}, indent=2))
    print(table(results, anchor_result))
    targets = scale_targets(results, anchor_result)
    if targets:
        print()
        print(targets_table(targets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
