"""The edit-and-rerun loop, as a user runs it: `python local_runner.py` in a checkout.

Each run is a fresh process in a temporary copy of the project (so edits to the
copy's code are what the run imports), on a slice of the real data. The first
run is the module's (`first_run`): the code-edit test goes on from it, and the
lock test's second run is started beside it.

The first run is exactly a user's (the runner's second process takes the
validation branch). The later runs pass `--sequential`: which steps come from
cache, what is pushed and the exit code are the same in either mode, and the
second process would only import TensorFlow and TFX once more per run, on
cores the suite's workers already fill (docs/tests.md).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from tfx.orchestration import metadata as tfx_metadata

import local_runner
from benchmarks.local_pipeline import copy_tracked_files
from pipeline import config as pipeline_config
from pipeline.local.run_lock import LOCK_FILE_NAME, RunLock, RunLockedError
from pipeline.local.run_summary import summarize_latest_run
from tests.conftest import REPO_ROOT

PIPELINE_NAME = "taxi-big-tipper"
FAST_ARGS = ["--train-steps", "60", "--eval-steps", "5"]
CODE_EDIT = "\n\n_TEST_EDIT = {n}  # appended by tests/test_local_loop.py\n"


def runner_command(data_root: Path, output_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "local_runner.py",
        "--data-root",
        str(data_root),
        "--output-dir",
        str(output_dir),
        *FAST_ARGS,
        *extra,
    ]


def states(output_dir: Path) -> dict[str, str]:
    connection = tfx_metadata.sqlite_metadata_connection_config(str(output_dir / "metadata.sqlite"))
    return {s.step_id: s.state for s in summarize_latest_run(connection, PIPELINE_NAME).steps}


def versions(output_dir: Path) -> list[str]:
    serving = output_dir / "serving_model"
    return sorted(p.name for p in serving.iterdir()) if serving.exists() else []


def _wait_for_lock_holder(lock_file: Path, proc: subprocess.Popen, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lock_file.exists() and lock_file.read_text():
            return json.loads(lock_file.read_text())
        if proc.poll() is not None:
            pytest.fail(f"first run exited early: {proc.communicate()}")
        time.sleep(0.2)
    pytest.fail("first run never took the lock")


@dataclass(frozen=True)
class FirstRun:
    """The module's first run, in a copy of the project, and the run started beside it on
    the same output directory while it held the lock (refused): what each test reads."""

    project: Path
    output_dir: Path
    temporary: Path  # the first run's TMPDIR, and the later runs' of the code-edit test
    pid: int
    holder: dict  # the lock file while the first run held it
    refused: subprocess.CompletedProcess
    returncode: int
    stdout: str
    stderr: str
    left_in_temporary: list[Path]
    run_id: str
    states: dict[str, str]
    versions: list[str]
    lock_file_text: str  # after the first run ended


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, taxi_slice) -> FirstRun:
    """One run as a user starts it, shared by the tests that each need a first run: the
    code-edit test goes on from it, and the lock test starts its second run beside it."""
    tmp = tmp_path_factory.mktemp("local_loop")
    project = copy_tracked_files(tmp / "project", skip=("data/", "tests/"))
    output_dir = tmp / "out"
    temporary = tmp / "tmp"
    temporary.mkdir()
    lock_file = output_dir / LOCK_FILE_NAME
    first = subprocess.Popen(
        runner_command(taxi_slice, output_dir),
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(temporary)},
    )
    try:
        holder = _wait_for_lock_holder(lock_file, first)
        refused = subprocess.run(
            runner_command(taxi_slice, output_dir, "--train-steps", "70"),
            cwd=project,
            capture_output=True,
            text=True,
            timeout=120,
        )
        out, err = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err[-3000:]
    connection = tfx_metadata.sqlite_metadata_connection_config(str(output_dir / "metadata.sqlite"))
    summary = summarize_latest_run(connection, PIPELINE_NAME)
    return FirstRun(
        project=project,
        output_dir=output_dir,
        temporary=temporary,
        pid=first.pid,
        holder=holder,
        refused=refused,
        returncode=first.returncode,
        stdout=out,
        stderr=err,
        left_in_temporary=list(temporary.iterdir()),
        run_id=summary.run_id,
        states={s.step_id: s.state for s in summary.steps},
        versions=versions(output_dir),
        lock_file_text=lock_file.read_text(),
    )


@pytest.mark.slow
@pytest.mark.e2e
def test_code_edits_rerun_exactly_the_steps_that_run_that_code(first_run, taxi_slice):
    project, output_dir, temporary = first_run.project, first_run.output_dir, first_run.temporary
    # Nothing is left in the temporary directory: the runner leaves through
    # os._exit after its exit handlers, which delete TensorFlow's generated
    # sources (pipeline.object_store.exit_process), and Beam's steps never
    # try Prism, whose job service left directories there (pipeline/beam.py).
    assert first_run.returncode == 0, first_run.stderr[-3000:]
    assert first_run.left_in_temporary == []
    assert set(first_run.states.values()) == {"complete"}

    def run() -> str:
        proc = subprocess.run(
            runner_command(taxi_slice, output_dir, "--sequential"),
            cwd=project,
            capture_output=True,
            text=True,
            env={**os.environ, "TMPDIR": str(temporary)},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert not list(temporary.iterdir())  # as after the first run
        return proc.stdout

    def append(relative: str, n: int) -> None:
        path = project / relative
        path.write_text(path.read_text() + CODE_EDIT.format(n=n))

    # The model starts to use a package of the fork's own, which nothing lists.
    (project / "features").mkdir()
    (project / "features" / "__init__.py").write_text("")
    (project / "features" / "widths.py").write_text("EXTRA_UNITS = 0\n")
    append("trainer/model.py", 1)
    (project / "trainer" / "model.py").write_text(
        (project / "trainer" / "model.py").read_text() + "import features.widths  # noqa\n"
    )
    run()
    after_model_edit = states(output_dir)
    assert after_model_edit["Transform"] == "cached"
    assert after_model_edit["Trainer"] == "complete"
    assert after_model_edit["ExampleGen"] == "cached"

    # An edit to that package alone re-runs the Trainer, and Transform stays cached.
    (project / "features" / "widths.py").write_text("EXTRA_UNITS = 1\n")
    run()
    after_package_edit = states(output_dir)
    assert after_package_edit["Transform"] == "cached"
    assert after_package_edit["Trainer"] == "complete"

    # Nothing edited: both cached, and the served model is not pushed again.
    before_rerun = versions(output_dir)
    printed = run()
    unchanged = states(output_dir)
    assert unchanged["Transform"] == unchanged["Trainer"] == "cached"
    assert versions(output_dir) == before_rerun
    # Whether the edited models were blessed varies with training; the rerun
    # never pushes, and says why: a blessed candidate can only be the served one.
    (pushed_line,) = [line for line in printed.splitlines() if line.startswith("Pushed model:")]
    if "Blessing: BLESSED" in printed:
        assert pushed_line.startswith("Pushed model: none (the candidate is the model already")
    else:
        assert pushed_line == "Pushed model: none (serving directory untouched)", printed

    append("trainer/preprocessing.py", 2)
    run()
    after_preprocessing_edit = states(output_dir)
    assert after_preprocessing_edit["Transform"] == "complete"
    assert after_preprocessing_edit["Trainer"] == "complete"


@pytest.mark.slow
@pytest.mark.e2e
def test_second_run_on_one_output_dir_is_refused_and_first_summary_is_its_own(first_run):
    output_dir = first_run.output_dir
    lock_file = output_dir / LOCK_FILE_NAME
    assert first_run.holder["pid"] == first_run.pid
    second = first_run.refused
    assert second.returncode == 1
    last_line = second.stderr.strip().splitlines()[-1]
    assert "RunLockedError: another run is using this output directory" in last_line
    assert f"process {first_run.pid}" in last_line and first_run.holder["started_at"] in last_line
    assert str(lock_file) in last_line
    assert "Running" not in second.stdout  # refused before anything started
    assert first_run.returncode == 0, first_run.stderr[-3000:]
    # The first run's summary describes the first run: its own run id, pushed version.
    assert f"Run {first_run.run_id}" in first_run.stdout
    (version,) = first_run.versions
    assert f"Pushed model: {output_dir / 'serving_model' / version}" in first_run.stdout
    assert first_run.lock_file_text == ""  # released on a clean exit


def test_lock_refuses_a_live_holder_and_names_it(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pipeline.local.run_lock import RunLock\n"
            "with RunLock(sys.argv[1]):\n    print('locked', flush=True); time.sleep(60)\n",
            str(tmp_path),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError) as refused, RunLock(tmp_path):
            pass
        message = str(refused.value)
        assert f"process {holder.pid}" in message and str(tmp_path / LOCK_FILE_NAME) in message
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_of_a_killed_process_is_taken_over_with_a_warning(tmp_path, caplog):
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, sys; from pipeline.local.run_lock import RunLock\n"
            "lock = RunLock(sys.argv[1]).__enter__()\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n",
            str(tmp_path),
        ],
        cwd=REPO_ROOT,
    )
    assert killed.returncode == -signal.SIGKILL
    stale = json.loads((tmp_path / LOCK_FILE_NAME).read_text())
    with caplog.at_level("WARNING", logger="pipeline.local.run_lock"), RunLock(tmp_path):
        current = json.loads((tmp_path / LOCK_FILE_NAME).read_text())
    assert current["pid"] == os.getpid()
    assert f"left by process {stale['pid']}" in caplog.text
    assert "no longer running" in caplog.text


@pytest.mark.slow
@pytest.mark.e2e
def test_fail_if_not_blessed_exits_3_with_the_failed_threshold(
    tmp_path, taxi_slice, fast_config, monkeypatch, capsys
):
    from schemas import DEFAULT_SCHEMA_DIR

    # The taxi task with margin 1: the naive model's whole error must go (accuracy 1.0),
    # which no training here reaches, so one step and one validation step do.
    one_step = fast_config.replace(train_steps=1, eval_steps=1)
    monkeypatch.setitem(pipeline_config.VARIANTS, "fast", lambda: one_step)
    schema_dir = shutil.copytree(DEFAULT_SCHEMA_DIR, tmp_path / "unreachable")
    spec_file = schema_dir / "dataset.yaml"
    spec_file.write_text(spec_file.read_text().replace("margin: 0.1", "margin: 1.0"))
    output_dir = tmp_path / "out"
    args = ["--data-root", str(taxi_slice), "--output-dir", str(output_dir), "--config"]
    args += ["fast", "--schema-dir", str(schema_dir), "--sequential", "--fail-if-not-blessed"]
    assert local_runner.main(args) == local_runner.EXIT_NOT_BLESSED
    captured = capsys.readouterr()
    assert "Blessing: NOT BLESSED" in captured.out
    last_line = captured.err.strip().splitlines()[-1]
    assert last_line.startswith("error: the candidate was not blessed: binary_accuracy = ")
    assert "breaks the value threshold" in last_line
    assert versions(output_dir) == []
    # Without the flag, the same outcome is a successful run (exit 0), as TFX treats it.
    assert local_runner.main(args[:-1]) == 0
