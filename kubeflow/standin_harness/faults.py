"""Faults a cluster brings, on demand, and the cluster's clock: for run_compiled.py.

`--preempt STEP` kills STEP's first attempt (SIGKILL) once it has written
into an output artifact, as a node shutting down gracefully does, leaving
what it wrote; `--lose-node STEP` kills it at the same point, as a node that
goes away without a word does: Argo finds the pod gone rather than failed,
and ends the attempt in another phase (`Interruption`). `--preempt-mid-search
STEP` kills STEP's first attempt as `--preempt` does, at another point: once
a KerasTuner search under the pipeline root has a trial whose `trial.json`
says COMPLETED and another whose file says RUNNING, both written since the
attempt started (the Tune step preempted in the middle of its search). `--repeat STEP` runs
STEP's command a second time with the same executor input, as the backend
does when a pod dies between its command's end and the launcher's record of
it; `--attempt-duration STEP=DURATION` makes each attempt of STEP take that
much longer on the cluster's clock, as a long training run does. Pure
Python: no kfp here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

# This directory's (run_compiled.py runs as a script, the directory on sys.path).
from argo_retry import ERROR, FAILED  # isort: skip
from output_probe import TRIAL_FILE, half_done, is_trial_file  # isort: skip


@dataclass(frozen=True)
class Interruption:
    """How a node's end kills an attempt: the note its log ends with, and the phase Argo
    gives the attempt (argo_retry.py's docstring; its policy decides the retry)."""

    phase: str
    note: str
    # What it waits for: the attempt's first output ("outputs"), or a search half done
    # under the pipeline root ("search": a trial completed and another running).
    trigger: str = "outputs"


# A node shutting down gracefully (a preemption notice, a drain): the kubelet fails the
# pod with a status message, which Argo reads as Failed (argo-workflows v4.0.5,
# workflow/controller/operator.go:1710-1713, `inferFailedReason`).
PREEMPTED = Interruption(FAILED, "[preempted: killed while writing its outputs]")
# A node gone before its kubelet could report: the pod is deleted, and Argo, finding
# a started pod node missing, marks it Error "pod deleted" (operator.go:1253-1291,
# `podReconciliation`), a phase retryPolicy OnFailure does not retry.
NODE_LOST = Interruption(ERROR, "[node lost: pod deleted while writing its outputs]")
# The same graceful shutdown, landing while the step's search runs: a trial completed,
# the next one running (issue 61: a Tune step retried after a kill mid-search).
PREEMPTED_MID_SEARCH = Interruption(
    FAILED, "[preempted: killed in the middle of its search]", trigger="search"
)


@dataclass(frozen=True)
class Faults:
    """What a cluster does to steps now and then, done on purpose (see the module docstring)."""

    preempt: frozenset[str] = frozenset()  # step ids whose first attempt's node shuts down
    lose_node: frozenset[str] = frozenset()  # step ids whose first attempt's node vanishes
    repeated: frozenset[str] = frozenset()  # step ids whose command runs twice
    # step ids whose first attempt's node shuts down in the middle of a search
    preempt_mid_search: frozenset[str] = frozenset()
    # step id -> seconds each attempt takes on the cluster's clock, beyond its real time
    attempt_seconds: dict = field(default_factory=dict)

    def interruption(self, step_id: str, earlier_attempts: int) -> Interruption | None:
        """What kills this attempt; None: nothing. The faults named for a step strike its
        attempts in turn, one each, in the order their moments come in a step's life: in
        the middle of its search, then once it writes its outputs (the node lost before the
        node preempted). One fault strikes the first attempt."""
        struck = [
            interruption
            for interruption, steps in (
                (PREEMPTED_MID_SEARCH, self.preempt_mid_search),
                (NODE_LOST, self.lose_node),
                (PREEMPTED, self.preempt),
            )
            if step_id in steps
        ]
        return struck[earlier_attempts] if earlier_attempts < len(struck) else None

    def repeat(self, step_id: str) -> bool:
        return step_id in self.repeated


_DURATION = re.compile(r"^([0-9]+)(s|m|h|d)$")
_SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}


def duration_seconds(text: str) -> int:
    """A duration as the settings write one (30s, 40m, 6h, 1d), in seconds."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration (30s, 40m, 6h, 1d)")
    return int(match.group(1)) * _SECONDS_PER_UNIT[match.group(2)]


class ClusterClock:
    """The cluster's time: real time, plus what faults and backoffs add to it."""

    def __init__(self) -> None:
        self._offset = 0.0

    def now(self) -> float:
        return time.monotonic() + self._offset

    def advance(self, seconds: float) -> None:
        self._offset += max(seconds, 0.0)


def output_uris(executor_input: dict) -> list[str]:
    return [
        artifact["uri"]
        for artifacts in executor_input.get("outputs", {}).get("artifacts", {}).values()
        for artifact in artifacts.get("artifacts", [])
    ]


def _has_files(uris: list[str]) -> bool:
    for uri in uris:
        if os.path.isfile(uri):
            return True
        for _, _, files in os.walk(uri):
            if files:
                return True
    return False


OUTPUT_PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output_probe.py")


class _ProbeWatch:
    """A watch that may run output_probe.py: started on entering, killed on leaving."""

    project_python: str
    env: dict | None
    _probe: subprocess.Popen | None = None

    def _start_probe(self, *args: str) -> None:
        if self.project_python:
            self._probe = subprocess.Popen(
                [self.project_python, OUTPUT_PROBE, *args],
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )

    def __exit__(self, *_exc) -> None:
        if self._probe is not None:
            if self._probe.poll() is None:
                self._probe.kill()
            self._probe.communicate()
            self._probe = None


# How long the last look waits for output_probe.py (started, its client made) to find
# outputs a command wrote just before it ended: one poll, with a loaded machine's delay.
LAST_LOOK_SECONDS = 20.0


class OutputWatch(_ProbeWatch):
    """Whether a step has written into one of its output artifacts yet.

    Local URIs are looked at on the file system; s3:// ones (a pipeline root on
    the object store) through output_probe.py, a process with the project's
    interpreter (boto3) and the step's environment, started only while a fault
    waits for the write.
    """

    def __init__(self, uris: list[str], project_python: str = "", env: dict | None = None):
        self.local = [u for u in uris if "://" not in u]
        self.remote = [u for u in uris if u.startswith("s3://")]
        self.project_python = project_python
        self.env = env
        self._probe: subprocess.Popen | None = None

    def __enter__(self) -> OutputWatch:
        if self.remote:
            self._start_probe(*self.remote)
        return self

    def fired(self) -> bool:
        """Written yet."""
        if _has_files(self.local):
            return True
        return self._probe is not None and self._probe.poll() == 0

    def fired_by_the_end(self) -> bool:
        """Written, looking once more after the command ended by itself: a command that
        writes its outputs last and exits at once can end between two polls (a loaded
        machine starves the probe). The node then goes away while the launcher records
        the outputs, and the attempt fails all the same: the launcher runs the command,
        then reads its executor output and publishes (kubeflow/pipelines
        backend/src/v2/component/launcher_v2.go, `execute`: 2.15.0 lines 553-557, 2.16.0
        lines 610-614, 2.17.0 lines 715-719), so a pod lost after the command's exit and
        before that record is a failed attempt, as before it."""
        if self.fired():
            return True
        if self._probe is None:
            return False
        try:
            return self._probe.wait(timeout=LAST_LOOK_SECONDS) == 0
        except subprocess.TimeoutExpired:
            return False


def _local_trial_files(root: str) -> dict[str, int]:
    """{path of each KerasTuner trial.json under root: its mtime_ns}."""
    found = {}
    for directory, _, files in os.walk(root):
        path = os.path.join(directory, TRIAL_FILE)
        if TRIAL_FILE in files and is_trial_file(path):
            with contextlib.suppress(FileNotFoundError):
                found[path] = os.stat(path).st_mtime_ns
    return found


class SearchWatch(_ProbeWatch):
    """Whether a KerasTuner search under `root` (the pipeline root) is half done: in one
    search directory, a trial's `trial.json` says COMPLETED and another's RUNNING, both
    written since the watch began (output_probe.py's `half_done`).

    `seen`, once fired: those trial files as the watch read them, {path: its status,
    score and version (a local file's mtime_ns; an object's ETag and LastModified)}.
    A local root is walked here; an s3:// one is watched by output_probe.py --search,
    as OutputWatch watches an s3:// output.
    """

    def __init__(self, root: str, project_python: str = "", env: dict | None = None):
        self.root = root
        self.project_python = project_python
        self.env = env
        self.seen: dict[str, dict] = {}
        self._before: dict[str, int] = {}
        self._probe: subprocess.Popen | None = None

    def __enter__(self) -> SearchWatch:
        if self.root.startswith("s3://"):
            self._start_probe("--search", self.root)
        else:
            self._before = _local_trial_files(self.root)
        return self

    def fired(self) -> bool:
        if self._probe is not None:
            if self._probe.poll() != 0:
                return False
            self.seen = json.loads(self._probe.communicate()[0])
            self._probe = None
            return True
        if self.root.startswith("s3://"):
            return bool(self.seen)
        states = {}
        for path, version in _local_trial_files(self.root).items():
            if self._before.get(path) != version:
                try:
                    with open(path) as f:
                        trial = json.load(f)
                except (FileNotFoundError, json.JSONDecodeError):  # being written
                    continue
                states[path] = {
                    "status": trial.get("status"),
                    "score": trial.get("score"),
                    "mtime_ns": version,
                }
        if half_done(states):
            self.seen = states
        return bool(self.seen)

    def fired_by_the_end(self) -> bool:
        """Half done by the time the command ended: only what was seen while it ran (a search
        that ended has no trial RUNNING; its moment passed unseen, and nothing strikes)."""
        return self.fired()


def interruption_watch(
    interruption: Interruption | None,
    executor_input: dict,
    pipeline_root: str,
    project_python: str = "",
    env: dict | None = None,
) -> OutputWatch | SearchWatch:
    """What tells `run_command` that the interruption's moment has come."""
    if interruption is not None and interruption.trigger == "search":
        return SearchWatch(pipeline_root, project_python, env)
    return OutputWatch(output_uris(executor_input), project_python, env)


DEADLINE_KILL = "[killed: the retry window closed (Argo: the retried pod's deadline)]"


def run_command(
    command: list[str],
    env: dict,
    interruption: Interruption | None,
    watch: OutputWatch | SearchWatch,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Runs a step's command; with an `interruption`, kills it (SIGKILL to its process
    group: every process of the pod ends, as on a node going away) once `watch` fires
    (it has written into one of its outputs, say), its output ending with the
    interruption's note; with `timeout`, kills it that many seconds after it started
    (a pod's deadline)."""
    if timeout is not None and timeout <= 0:
        return subprocess.CompletedProcess(command, 1, DEADLINE_KILL)
    with tempfile.TemporaryFile("w+") as log, contextlib.ExitStack() as watching:
        if interruption is not None:
            watching.enter_context(watch)
        # A session of its own, as a pod's processes are its own: the kill reaches them all.
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        started = time.monotonic()
        killed = ""
        while process.poll() is None:
            if interruption is not None and watch.fired():
                killed = interruption.note
            elif timeout is not None and time.monotonic() - started > timeout:
                killed = DEADLINE_KILL
            if killed:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        returncode = process.wait()
        if interruption is not None and not killed and watch.fired_by_the_end():
            killed = interruption.note
        log.seek(0)
        output = log.read() + (f"\n{killed}" if killed else "")
    return subprocess.CompletedProcess(command, returncode or (1 if killed else 0), output)
