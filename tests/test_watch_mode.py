"""`local_runner.py --watch` as a user runs it: edits picked up, a fresh run's cache keys.

One watch process in a copy of this checkout: a cold run, then an edit to a
layer size (the pushed model has the new shape), a fork's own package edited
under trainer/custom.py (Transform runs again), a syntax error (one line, and
it waits), the fix, Ctrl-C twice. Then a fresh process on the same output
directory finds every step cached: the watch runs keyed their steps exactly
as a fresh process does.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness import checkout_files

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

REPO_ROOT = Path(__file__).resolve().parents[1]
FORK_IMPORT = "\nimport fork_features  # noqa: E402,F401\n"
RUN_FLAGS = ["--train-steps", "30", "--no-report"]
WAIT_S = 300


class Watch:
    """A `--watch` process whose output lines are read as they come."""

    def __init__(self, project: Path, output_dir: Path):
        # In the project, as `./dev run --watch > watch.log` puts it: runs write it, and
        # watch mode must not take that for a change.
        self.log = project / "watch.log"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "local_runner.py",
                "--watch",
                "--output-dir",
                str(output_dir),
                *RUN_FLAGS,
            ],
            cwd=project,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def run_ended(self, number: int) -> tuple[int, str]:
        """Waits for run `number`'s end line; its exit code, and the lines since the last one."""
        pattern = re.compile(rf"^watch: run {number} ended with exit code (-?\d+)", re.MULTILINE)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            text = self.text()
            found = pattern.search(text)
            if found:
                previous = text.rfind("watch: run", 0, found.start())
                return int(found.group(1)), text[max(previous, 0) : found.end()]
            assert self.process.poll() is None, f"watch exited:\n{text[-3000:]}"
            time.sleep(0.5)
        raise AssertionError(f"run {number} did not end in {WAIT_S} s:\n{self.text()[-3000:]}")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise


def statuses(lines: str) -> dict[str, str]:
    return dict(re.findall(r"^  ([A-Za-z]+)\s+(complete|cached|failed)\b", lines, re.MULTILINE))


def hidden_sizes(version_dir: Path) -> set[int]:
    import tensorflow as tf

    shapes = tf.train.list_variables(str(version_dir / "variables" / "variables"))
    return {shape[0] for name, shape in shapes if "OPTIMIZER" not in name and len(shape) == 1}


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path} no longer holds {old!r}"
    path.write_text(text.replace(old, new, 1))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("watched")
    for relative in checkout_files():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / relative, target)
    return root


def test_watch_reruns_the_code_on_disk_with_the_keys_a_fresh_process_uses(project):
    output_dir = project / "out"
    watch = Watch(project, output_dir)
    try:
        code, lines = watch.run_ended(1)
        assert code == 0, lines
        served = output_dir / "serving_model"
        (first,) = sorted(served.iterdir())
        assert {128, 64} <= hidden_sizes(first)

        # A layer size: the model that is pushed has it, and only the Trainer and after ran.
        edit(
            project / "trainer" / "model.py",
            "keras.layers.Dense(units,",
            "keras.layers.Dense(units + 5,",
        )
        code, lines = watch.run_ended(2)
        assert code == 0, lines
        ran = statuses(lines)
        assert ran["Trainer"] == "complete" and ran["Transform"] == "cached", lines
        newest = sorted(served.iterdir())[-1]
        assert newest != first and {133, 69} <= hidden_sizes(newest)

        # The fork's own package, imported by trainer/custom.py: Transform runs again.
        (project / "fork_features").mkdir()
        (project / "fork_features" / "__init__.py").write_text("OFFSET = 0.0\n")
        custom = project / "trainer" / "custom.py"
        original_custom = custom.read_text()
        custom.write_text(original_custom + FORK_IMPORT)
        code, lines = watch.run_ended(3)
        assert code == 0 and statuses(lines)["Transform"] == "complete", lines
        (project / "fork_features" / "__init__.py").write_text("OFFSET = 1.0\n")
        code, lines = watch.run_ended(4)
        assert code == 0 and statuses(lines)["Transform"] == "complete", lines

        # A bad edit: one error line, no traceback, and it waits for the fix.
        custom.write_text(custom.read_text() + "\nbroken = (\n")
        code, lines = watch.run_ended(5)
        assert code == 1
        errors = [line for line in lines.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "SyntaxError" in errors[0], lines
        assert "Traceback" not in lines
        custom.write_text(original_custom + FORK_IMPORT)
        code, lines = watch.run_ended(6)
        assert code == 0 and statuses(lines)["Transform"] == "cached", lines
    finally:
        exit_code = watch.stop()
    assert exit_code == 130, watch.text()[-2000:]
    assert "watch: stopped" in watch.text()

    # A fresh process on the same code and output directory: every step cached.
    fresh = subprocess.run(
        [sys.executable, "local_runner.py", "--output-dir", str(output_dir), *RUN_FLAGS],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    ran = statuses(fresh.stdout)
    from pipeline.steps import DAG_STEPS

    # The Evaluator reads the baseline, which an uncached step resolves afresh in
    # every run, and the Pusher its new blessing: they run in any fresh rerun. Every
    # other step is cached, the code-keyed Transform and Trainer among them, and the
    # same model is not pushed again.
    keyed = {
        s: status
        for s, status in ran.items()
        if s not in DAG_STEPS.uncached_ids and s not in ("Evaluator", "Pusher")
    }
    assert {"Transform", "Trainer"} <= set(keyed), fresh.stdout
    assert set(keyed.values()) == {"cached"}, fresh.stdout
    assert "Pushed model: none (the candidate is the model already served" in fresh.stdout


def test_a_change_is_found_and_files_no_run_reads_are_not_watched(tmp_path):
    from pipeline.local.watch import changed, snapshot

    (tmp_path / "code.py").write_text("a = 1\n")
    (tmp_path / "out").mkdir()
    (tmp_path / ".hidden").mkdir()
    before = snapshot([tmp_path], unwatched=[tmp_path / "out"])
    (tmp_path / "out" / "report.html").write_text("written by a run")
    (tmp_path / ".hidden" / "x.py").write_text("")
    (tmp_path / "code.py.swp").write_text("")
    assert changed(before, snapshot([tmp_path], unwatched=[tmp_path / "out"])) is None
    (tmp_path / "code.py").write_text("a = 2\n")
    change = changed(before, snapshot([tmp_path], unwatched=[tmp_path / "out"]))
    assert change is not None and change.paths == (tmp_path / "code.py",) and not change.restart


def test_the_lock_file_and_the_supervisors_own_code_restart_it():
    from pipeline.fingerprint import PROJECT_ROOT
    from pipeline.local.watch import changed

    for name in ("uv.lock", "pyproject.toml", "local_runner.py", "pipeline/local/watch.py"):
        path = PROJECT_ROOT / name
        assert changed({path: (1, 1, 1)}, {path: (2, 1, 1)}).restart, name
    assert not changed({}, {PROJECT_ROOT / "trainer" / "model.py": (1, 1, 1)}).restart
