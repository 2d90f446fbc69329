"""Wall time per completed trial: `--parallel 2` against trials one at a time.

    ./dev exec python -m benchmarks.tuning_parallel                  # 6 trials of 200 steps
    ./dev exec python -m benchmarks.tuning_parallel --trials 4 --steps 100

On the embedded sample, in a temporary directory: one `tune_runner.py` run
first computes Transform's output (and is the sequential measurement); the
parallel run then starts from a copy of that output directory without its
search state, so its steps up to Transform come from cache and both searches
run the same seeded trials. Each run is a fresh process, as from the command
line; the figure is the search's own time (the runner's `Search:` line),
divided by the trials it completed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pipeline.local.tune import TUNING_DIR

REPO_ROOT = Path(__file__).resolve().parents[1]
_SEARCH_LINE = re.compile(r"^Search: (\d+) trials completed in this run in ([\d.]+) s", re.M)


def tune(output_dir: Path, schema_dir: Path, trials: int, steps: int, parallel: int) -> tuple:
    """(trials completed, search seconds) of one tune_runner.py process."""
    command = [
        sys.executable, str(REPO_ROOT / "tune_runner.py"),
        "--schema-dir", str(schema_dir), "--output-dir", str(output_dir),
        "--max-trials", str(trials), "--steps-per-trial", str(steps),
        "--parallel", str(parallel),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    match = _SEARCH_LINE.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"tune_runner.py failed: {done.stderr.strip().splitlines()[-1:]}")
    return int(match.group(1)), float(match.group(2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    from schemas import DEFAULT_SCHEMA_DIR

    with tempfile.TemporaryDirectory(prefix="tuning-bench-") as tmp:
        root = Path(tmp)
        schema_dir = shutil.copytree(DEFAULT_SCHEMA_DIR, root / "schema")
        sequential = root / "sequential"
        rows = [("sequential", *tune(sequential, schema_dir, args.trials, args.steps, 1))]
        parallel = shutil.copytree(sequential, root / "parallel")
        shutil.rmtree(parallel / TUNING_DIR)
        rows.append(("--parallel 2", *tune(parallel, schema_dir, args.trials, args.steps, 2)))
    print(f"{args.trials} trials of {args.steps} steps on the embedded sample\n")
    print("| search | trials | search seconds | seconds per completed trial |")
    print("| --- | --- | --- | --- |")
    for name, completed, seconds in rows:
        print(f"| {name} | {completed} | {seconds:.1f} | {seconds / completed:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
