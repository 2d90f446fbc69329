"""Times the whole local DAG against TFX 1.16's own taxi template, side by side.

    ./dev exec python -m benchmarks.local_pipeline              # 2 rounds, alternating
    ./dev exec python -m benchmarks.local_pipeline --rounds 3
    ./dev exec python -m benchmarks.local_pipeline --with-native-keras   # + a third column

Anchor: the template that `tfx template copy --model=taxi` writes (from this
environment's tfx), with every step 5/6 `components.append(...)` uncommented
by this script, run with its own `local_runner.py` on the same CSV. Ours is
`local_runner.py` with its defaults, run from a temporary copy of this
repository so the inner-loop edit below never touches the checkout.

Each round runs ours, then the anchor (the order alternates between rounds),
every run in a fresh process on a fresh output directory with no cache. Wall
time is from spawning the process to its exit, Python start-up and imports
included, as a user waits for them. Per-step times come from ML
Metadata; eval accuracy is TFMA's on the eval split (ExampleGen's split is
a content hash, so both see the same rows).

Inner loop: after each cold run of ours, the script edits only
`trainer/model.py` in the copy and reruns on the same output directory: only
Trainer and what follows it may run again. Then `local_runner.py --watch`
runs in the copy (`--watch-reruns N` model-only edits, each timed from the
file's write to the run's end line), with the supervisor's resident memory
after each run: flat over 20 reruns is what `--watch-reruns 20` shows.

The TFX native-Keras example (a third column, opt in: about 3.5 min a run)
needs TF_USE_LEGACY_KERAS=1, as it fails under Keras 3.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.targets import Target, load_average, targets_table

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_ROOT = REPO_ROOT / "data" / "chicago_taxi"
OURS, ANCHOR, NATIVE_KERAS = "this template", "TFX taxi template", "TFX native-Keras example"
ANCHOR_PIPELINE = "taxi_anchor"
OUR_PIPELINE = "taxi-big-tipper"
# A code change that the model really sees (the fingerprint ignores comments).
MODEL_EDIT = "\n\n_BENCHMARK_EDIT = 1  # appended by benchmarks/local_pipeline.py\n"
# What a model-only edit runs again: the Trainer and what follows it, and the
# drift gate, which reads the serving directory and so never comes from cache.
RETRAINED = ("DataDriftGate", "Trainer", "LatestServedModel", "Evaluator", "Pusher")


def _summary(metadata_path: Path, pipeline_name: str, run_dir: Path) -> dict:
    """Step states and times and eval metrics of the newest run in a store.

    Artifact URIs may be relative to the directory the pipeline ran in (the
    anchor's are), so read from there, after importing our own modules (the
    anchor has a `pipeline` package too).
    """
    code = (
        "import json, os, sys\n"
        "from tfx.orchestration import metadata\n"
        "from pipeline.local.run_summary import summarize_latest_run\n"
        "os.chdir(sys.argv[3])\n"
        "s = summarize_latest_run(metadata.sqlite_metadata_connection_config(sys.argv[1]),"
        " sys.argv[2])\n"
        "print(json.dumps({'steps': {r.step_id: [r.state, r.seconds] for r in s.steps},"
        " 'metrics': s.metrics, 'blessed': s.blessed,"
        " 'pushed': s.pushed_destination}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(metadata_path), pipeline_name, str(run_dir)],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _timed(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    started = time.monotonic()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if proc.returncode:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-5000:])
        raise SystemExit(f"{' '.join(command)} failed with exit code {proc.returncode}")
    return seconds


def make_anchor(workdir: Path) -> Path:
    """`tfx template copy --model=taxi`, with its step 5/6 components switched on."""
    destination = workdir / "taxi_template"
    tfx_cli = Path(sys.executable).with_name("tfx")
    subprocess.run(
        [
            str(tfx_cli),
            "template",
            "copy",
            "--model=taxi",
            f"--pipeline_name={ANCHOR_PIPELINE}",
            f"--destination_path={destination}",
        ],
        check=True,
        capture_output=True,
    )
    pipeline_py = destination / "pipeline" / "pipeline.py"
    source = pipeline_py.read_text()
    enabled, count = re.subn(r"^(\s*)# (components\.append\()", r"\1\2", source, flags=re.M)
    if count < 8:
        raise SystemExit(
            f"expected the template's commented components.append lines, found {count}"
        )
    pipeline_py.write_text(enabled)
    return destination


def copy_tracked_files(destination: Path, skip: tuple[str, ...] = ()) -> Path:
    """This repository's git-tracked files (the code a user has) under `destination`.

    `skip`: path prefixes to leave out (the edit-rerun tests need no data/ or tests/).
    """
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO_ROOT, check=True, capture_output=True, text=True
    ).stdout.split("\0")
    for name in filter(None, files):
        if skip and name.startswith(skip):
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, target)
    return destination


def run_anchor(anchor: Path) -> dict:
    for name in ("tfx_pipeline_output", "tfx_metadata"):
        shutil.rmtree(anchor / name, ignore_errors=True)
    wall = _timed([sys.executable, "local_runner.py"], anchor)
    metadata_path = anchor / "tfx_metadata" / ANCHOR_PIPELINE / "metadata.db"
    result = _summary(metadata_path, ANCHOR_PIPELINE, anchor)
    return {"wall": wall, **result}


def run_ours(copy: Path, out: Path) -> tuple[dict, dict]:
    """A cold run, then a rerun after editing only the model code."""
    shutil.rmtree(out, ignore_errors=True)
    model_py = copy / "trainer" / "model.py"
    original = model_py.read_text()
    command = [sys.executable, "local_runner.py", "--output-dir", str(out)]
    try:
        cold: dict[str, Any] = {"wall": _timed(command, copy)}  # fresh output dir: nothing cached
        cold |= _summary(out / "metadata.sqlite", OUR_PIPELINE, copy)
        model_py.write_text(original + MODEL_EDIT)
        rerun: dict[str, Any] = {"wall": _timed(command, copy)}
        rerun |= _summary(out / "metadata.sqlite", OUR_PIPELINE, copy)
    finally:
        model_py.write_text(original)
    ran = {step for step, (state, _) in rerun["steps"].items() if state == "complete"}
    if ran != set(RETRAINED):
        raise SystemExit(f"after a model-only edit, expected {RETRAINED} to run, got {sorted(ran)}")
    return cold, rerun


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_watch(copy: Path, out: Path, reruns: int) -> dict:
    """`--watch` in the copy: its first run, then `reruns` model-only edits, each timed
    from the file's write to the run's end line; the supervisor's memory after each."""
    shutil.rmtree(out, ignore_errors=True)
    model_py = copy / "trainer" / "model.py"
    original = model_py.read_text()
    log = out.parent / "watch.log"
    process = subprocess.Popen(
        [sys.executable, "local_runner.py", "--watch", "--output-dir", str(out)],
        cwd=copy,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )

    def ended(number: int) -> None:
        pattern = re.compile(rf"^watch: run {number} ended with exit code (\d+)", re.MULTILINE)
        while not (found := pattern.search(log.read_text(errors="replace"))):
            if process.poll() is not None:
                raise SystemExit(f"--watch exited:\n{log.read_text()[-2000:]}")
            time.sleep(0.05)
        if found.group(1) != "0":
            raise SystemExit(f"--watch run {number} failed:\n{log.read_text()[-2000:]}")

    walls, memory = [], []
    try:
        ended(1)
        memory.append(_rss_mb(process.pid))
        for number in range(2, reruns + 2):
            started = time.monotonic()
            model_py.write_text(original + f"\n\n_BENCHMARK_EDIT = {number}\n")
            ended(number)
            walls.append(time.monotonic() - started)
            memory.append(_rss_mb(process.pid))
    finally:
        model_py.write_text(original)
        process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    return {"walls": walls, "rss_mb": memory}


def template_environment(tmp: Path, **variables: str) -> dict[str, str]:
    """This process's environment for a run of the TFX template, with `tmp` (made
    empty) as its temporary directory: TFX packages itself into an sdist there at
    each Beam step and never deletes it (docs/beam-on-a-cluster.md)."""
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return dict(os.environ, TMPDIR=str(tmp), **variables)


def run_native_keras(workdir: Path) -> dict:
    code = (
        "import sys\n"
        "import tfx.examples.chicago_taxi_pipeline.taxi_pipeline_native_keras as ex\n"
        "from pathlib import Path\n"
        "from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner\n"
        "out = Path(sys.argv[1])\n"
        "BeamDagRunner().run(ex._create_pipeline(pipeline_name='native_keras',"
        " pipeline_root=str(out / 'root'), data_root=sys.argv[2],"
        " module_file=str(Path(ex.__file__).with_name('taxi_utils_native_keras.py')),"
        " serving_model_dir=str(out / 'serving'), metadata_path=str(out / 'm.db'),"
        " beam_pipeline_args=ex._beam_pipeline_args))\n"
    )
    out = workdir / "native_keras"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    env = template_environment(out / "tmp", TF_USE_LEGACY_KERAS="1")
    wall = _timed([sys.executable, "-c", code, str(out), str(DATA_ROOT)], workdir, env)
    return {"wall": wall, **_summary(out / "m.db", "native_keras", workdir)}


# Step ids differ between the DAGs; group them for the table.
_GROUPS = {
    "ExampleGen": ("ExampleGen", "CsvExampleGen"),  # ours; the TFX taxi template's
    "StatisticsGen": ("StatisticsGen",),
    "Schema + validation": (
        "SchemaGen",
        "SchemaImporter",
        "ExampleValidator",
        "DataValidationGate",
        "DataDriftGate",
    ),
    "Transform": ("Transform",),
    "Trainer": ("Trainer",),
    "Evaluator": ("Evaluator",),
    "Baseline + Pusher": ("latest_blessed_model_resolver", "LatestServedModel", "Pusher"),
}


def _seconds(runs: list[dict], ids: tuple[str, ...] | None = None) -> str:
    def one(run: dict) -> float:
        if ids is None:
            return run["wall"]
        return sum(seconds for step, (_, seconds) in run["steps"].items() if step in ids)

    values = [one(r) for r in runs]
    shown = " / ".join(f"{v:.1f}" for v in values)
    return f"{statistics.median(values):.1f} ({shown})" if len(values) > 1 else shown


def table(results: dict[str, list[dict]], reruns: list[dict], watched: list[dict]) -> str:
    names = list(results)
    rows = [("seconds: median (each run)", *names)]
    rows.append(("wall time, process start to exit", *(_seconds(results[n]) for n in names)))
    for group, ids in _GROUPS.items():
        rows.append((f"  {group}", *(_seconds(results[n], ids) for n in names)))
    rows.append(
        (
            "eval binary_accuracy",
            *(
                " / ".join(
                    f"{r['metrics'].get('binary_accuracy', float('nan')):.4f}" for r in results[n]
                )
                for n in names
            ),
        )
    )
    ours = [r["wall"] for r in results[OURS]]
    for other in names[1:]:
        theirs = [r["wall"] for r in results[other]]
        ratio = statistics.median(ours) / statistics.median(theirs)
        per_round = " / ".join(f"{a / b:.2f}" for a, b in zip(ours, theirs, strict=False))
        rows.append(
            (f"ratio ours / {other}", f"{ratio:.2f}x ({per_round})", *[""] * (len(names) - 1))
        )
    rerun_walls = [r["wall"] for r in reruns]
    rows.append(
        (
            "inner loop: rerun after a model-only edit",
            f"{_seconds(reruns)}, {statistics.median(rerun_walls) / statistics.median(ours):.2f}x"
            " of a cold run",
            *[""] * (len(names) - 1),
        )
    )
    watch_walls = [w for run in watched for w in run["walls"]]
    if watch_walls:
        median = statistics.median(watch_walls)
        rows.append(
            (
                "inner loop with --watch: edit saved to run ended",
                f"{median:.1f} (of {len(watch_walls)}), {median / statistics.median(ours):.2f}x"
                " of a cold run",
                *[""] * (len(names) - 1),
            )
        )
        memory = " / ".join(f"{run['rss_mb'][0]:.0f} -> {run['rss_mb'][-1]:.0f}" for run in watched)
        rows.append(
            (
                "--watch supervisor RSS MB, first run -> last rerun",
                memory,
                *[""] * (len(names) - 1),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "| " + " | ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) + " |"
        for r in rows
    )


# Issue 43's targets for the embedded sample (docs/benchmarks.md).
INNER_LOOP_TARGET = 0.3  # a rerun after a model-only edit, as a share of a cold run
# Issue 70's targets: a --watch rerun after a model-only edit, and a cold run.
WATCH_TARGET = 0.4
COLD_TARGET_70 = 0.45


def local_targets(
    results: dict[str, list[dict]], reruns: list[dict], watched: list[dict]
) -> list[Target]:
    cold = statistics.median(r["wall"] for r in results[OURS])
    anchor = statistics.median(r["wall"] for r in results[ANCHOR])
    rerun = statistics.median(r["wall"] for r in reruns)
    targets = [
        Target("cold run / TFX taxi template", cold / anchor, COLD_TARGET_70),
        Target("rerun after a model-only edit / cold run", rerun / cold, INNER_LOOP_TARGET),
    ]
    watch_walls = [w for run in watched for w in run["walls"]]
    if watch_walls:
        targets.append(
            Target(
                "--watch rerun after a model-only edit / cold run",
                statistics.median(watch_walls) / cold,
                WATCH_TARGET,
            )
        )
    return targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="runs of each pipeline (>= 2)")
    parser.add_argument(
        "--with-native-keras", action="store_true", help="add the TFX native-Keras example"
    )
    parser.add_argument(
        "--watch-reruns",
        type=int,
        default=3,
        help="model-only edits per round under --watch (0: none; 20 shows memory staying flat)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2: one run of each is noise here")
    results: dict[str, list[dict]] = {OURS: [], ANCHOR: []}
    if args.with_native_keras:
        results[NATIVE_KERAS] = []
    reruns: list[dict] = []
    watched: list[dict] = []
    print(f"load {load_average():.2f} before", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_local_") as tmp:
        workdir = Path(tmp)
        anchor = make_anchor(workdir)
        copy = copy_tracked_files(workdir / "template_copy")
        for round_index in range(args.rounds):
            order = [OURS, ANCHOR] if round_index % 2 == 0 else [ANCHOR, OURS]
            for name in order:
                print(f"round {round_index + 1}: {name} ...", flush=True)
                if name == OURS:
                    cold, rerun = run_ours(copy, workdir / "ours_out")
                    results[OURS].append(cold)
                    reruns.append(rerun)
                    if args.watch_reruns:
                        print(f"round {round_index + 1}: {OURS} --watch ...", flush=True)
                        watched.append(run_watch(copy, workdir / "watch_out", args.watch_reruns))
                else:
                    results[ANCHOR].append(run_anchor(anchor))
            if args.with_native_keras:
                print(f"round {round_index + 1}: {NATIVE_KERAS} ...", flush=True)
                results[NATIVE_KERAS].append(run_native_keras(workdir))
    print(f"load {load_average():.2f} after", flush=True)
    print(table(results, reruns, watched))
    print()
    print(targets_table(local_targets(results, reruns, watched)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
