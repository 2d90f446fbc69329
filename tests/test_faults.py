"""The fault that preempts a step in the middle of its search (kubeflow/standin_harness/faults.py),
on a local pipeline root: when it strikes, what it kills, what it records.

tests/test_kubeflow_tuning_executed.py plays it on the Tune step, its search on the
S3 stand-in (output_probe.py --search); here a command stands in for the step, writing
trial files as KerasTuner's oracle does.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kubeflow.standin_harness.output_probe import half_done, is_trial_file
from tests.conftest import REPO_ROOT

SEARCH = "root/tuning/abc/search"


def test_a_search_is_half_done_when_one_trial_completed_and_another_runs():
    def trials(*statuses: str, search: str = SEARCH) -> dict[str, dict]:
        return {f"{search}/trial_{i}/trial.json": {"status": s} for i, s in enumerate(statuses)}

    assert half_done(trials("COMPLETED", "RUNNING"))
    assert not half_done(trials("RUNNING", "RUNNING"))
    assert not half_done(trials("COMPLETED", "COMPLETED"))
    assert not half_done(trials("COMPLETED", "FAILED"))
    # In one search directory: a completed trial here and a running one elsewhere is not.
    assert not half_done(
        {**trials("COMPLETED"), **trials("RUNNING", search="root/tuning/other/search")}
    )
    assert is_trial_file(f"s3://b/{SEARCH}/trial_0/trial.json")
    assert not is_trial_file(f"{SEARCH}/oracle.json")
    assert not is_trial_file(f"{SEARCH}/trial_0/checkpoint.json")


# The stand-in step: writes trial 0 RUNNING, then COMPLETED, then trial 1 RUNNING, each
# whole and renamed into place; starts a child (a pod's other process) and waits.
STEP = textwrap.dedent(
    """
    import json, os, subprocess, sys, time

    root, child_pid_file = sys.argv[1], sys.argv[2]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(child_pid_file, "w") as f:
        f.write(str(child.pid))

    def write(trial, status, score=None):
        directory = os.path.join(root, "tuning", "abc", "search", f"trial_{trial}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "tmp"), "w") as f:
            json.dump({"trial_id": str(trial), "status": status, "score": score}, f)
        os.replace(os.path.join(directory, "tmp"), os.path.join(directory, "trial.json"))
        time.sleep(0.3)

    write(0, "RUNNING")
    write(0, "COMPLETED", 0.5)
    write(1, "RUNNING")
    time.sleep(120)
    print("the step ran to its end")
    """
)


@pytest.fixture
def faults(monkeypatch):
    # faults.py imports its neighbours as run_compiled.py runs it: a script, its directory
    # on sys.path.
    monkeypatch.syspath_prepend(str(REPO_ROOT / "kubeflow" / "standin_harness"))
    import faults

    return faults


def test_the_step_is_killed_with_its_processes_once_its_search_is_half_done(tmp_path, faults):
    """`--preempt-mid-search`: the whole process group is killed, once a trial completed and
    the next one runs, and the trial files it saw are what the step wrote."""
    root = tmp_path / "pipeline_root"
    # A finished search of an earlier run under the same root: the watch ignores it.
    earlier = root / "tuning" / "old" / "search"
    for trial, status in (("0", "COMPLETED"), ("1", "RUNNING")):
        (earlier / f"trial_{trial}").mkdir(parents=True)
        (earlier / f"trial_{trial}" / "trial.json").write_text(json.dumps({"status": status}))
    child_pid_file = tmp_path / "child.pid"
    interruption = faults.Faults(preempt_mid_search=frozenset({"Tune"})).interruption("Tune", 0)
    assert interruption is faults.PREEMPTED_MID_SEARCH and interruption.phase == "Failed"
    assert faults.Faults(preempt_mid_search=frozenset({"Tune"})).interruption("Tune", 1) is None
    watch = faults.interruption_watch(interruption, {}, str(root))
    command = [sys.executable, "-c", STEP, str(root), str(child_pid_file)]

    process = faults.run_command(command, dict(os.environ), interruption, watch, timeout=30)

    assert process.returncode != 0 and process.stdout.endswith(interruption.note), process.stdout
    assert "the step ran to its end" not in process.stdout
    search = root / "tuning" / "abc" / "search"
    first, second = (str(search / f"trial_{i}" / "trial.json") for i in (0, 1))
    assert {path: state["status"] for path, state in watch.seen.items()} == {
        first: "COMPLETED",
        second: "RUNNING",
    }
    assert watch.seen[first]["score"] == 0.5
    assert watch.seen[first]["mtime_ns"] == os.stat(first).st_mtime_ns
    # The step's child died with it, as every process of a pod does.
    child = Path("/proc") / child_pid_file.read_text()
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def alive(proc: Path) -> bool:
    """A process that exists and is not a zombie (one its parent has not reaped yet)."""
    try:
        return proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def slow_probe(tmp_path: Path, exit_code: int) -> str:
    """An interpreter for output_probe.py that answers `exit_code` after a second, whatever
    it is asked: a probe a loaded machine starves past the command's end."""
    probe = tmp_path / f"probe_{exit_code}"
    probe.write_text(f"#!/bin/sh\nsleep 1\nexit {exit_code}\n")
    probe.chmod(0o755)
    return str(probe)


def test_a_step_that_ends_right_after_writing_its_outputs_is_still_preempted(tmp_path, faults):
    """`--preempt`: a command that writes its outputs last can end before the probe reports
    them; the last look after its end still strikes (the attempt fails, with the note)."""
    interruption = faults.Faults(preempt=frozenset({"Tune"})).interruption("Tune", 0)
    watch = faults.OutputWatch(["s3://bucket/root/out"], slow_probe(tmp_path, 0), None)
    command = [sys.executable, "-c", "print('wrote the outputs')"]

    process = faults.run_command(command, dict(os.environ), interruption, watch)

    assert process.returncode == 1 and process.stdout.endswith(interruption.note), process.stdout


def test_a_step_that_wrote_no_outputs_is_not_struck_after_its_end(tmp_path, faults, monkeypatch):
    monkeypatch.setattr(faults, "LAST_LOOK_SECONDS", 3.0)
    interruption = faults.Faults(preempt=frozenset({"Tune"})).interruption("Tune", 0)
    watch = faults.OutputWatch(["s3://bucket/root/out"], slow_probe(tmp_path, 1), None)
    command = [sys.executable, "-c", "print('wrote nothing')"]

    process = faults.run_command(command, dict(os.environ), interruption, watch)

    assert process.returncode == 0 and process.stdout == "wrote nothing\n", process.stdout


def test_faults_named_for_one_step_strike_its_attempts_in_turn(faults):
    both = faults.Faults(preempt=frozenset({"Tune"}), preempt_mid_search=frozenset({"Tune"}))
    assert [both.interruption("Tune", n) for n in range(3)] == [
        faults.PREEMPTED_MID_SEARCH,
        faults.PREEMPTED,
        None,
    ]
    assert both.interruption("Trainer", 0) is None
    one = faults.Faults(lose_node=frozenset({"Trainer"}))
    assert [one.interruption("Trainer", n) for n in range(2)] == [faults.NODE_LOST, None]
