"""Faults a cluster brings, on demand, and the cluster's clock: for run_compiled.py.

`--preempt STEP` kills STEP's first attempt (SIGKILL) once it has written
into an output artifact, as a node shutting down gracefully does, leaving
what it wrote; `--lose-node STEP` kills it at the same point, as a node that
goes away without a word does: Argo finds the pod gone rather than failed,
and ends the attempt in another phase (`Interruption`). `--repeat STEP` runs
STEP's command a second time with the same executor input, as the backend
does when a pod dies between its command's end and the launcher's record of
it; `--attempt-duration STEP=DURATION` makes each attempt of STEP take that
much longer on the cluster's clock, as a long training run does. Pure
Python: no kfp here.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

# This directory's (run_compiled.py runs as a script, the directory on sys.path).
from argo_retry import ERROR, FAILED  # isort: skip


@dataclass(frozen=True)
class Interruption:
    """How a node's end kills an attempt: the note its log ends with, and the phase Argo
    gives the attempt (argo_retry.py's docstring; its policy decides the retry)."""

    phase: str
    note: str


# A node shutting down gracefully (a preemption notice, a drain): the kubelet fails the
# pod with a status message, which Argo reads as Failed (argo-workflows v4.0.5,
# workflow/controller/operator.go:1710-1713, `inferFailedReason`).
PREEMPTED = Interruption(FAILED, "[preempted: killed while writing its outputs]")
# A node gone before its kubelet could report: the pod is deleted, and Argo, finding
# a started pod node missing, marks it Error "pod deleted" (operator.go:1253-1291,
# `podReconciliation`), a phase retryPolicy OnFailure does not retry.
NODE_LOST = Interruption(ERROR, "[node lost: pod deleted while writing its outputs]")


@dataclass(frozen=True)
class Faults:
    """What a cluster does to steps now and then, done on purpose (see the module docstring)."""

    preempt: frozenset[str] = frozenset()  # step ids whose first attempt's node shuts down
    lose_node: frozenset[str] = frozenset()  # step ids whose first attempt's node vanishes
    repeated: frozenset[str] = frozenset()  # step ids whose command runs twice
    # step id -> seconds each attempt takes on the cluster's clock, beyond its real time
    attempt_seconds: dict = field(default_factory=dict)

    def interruption(self, step_id: str, earlier_attempts: int) -> Interruption | None:
        """What kills this attempt once it writes its outputs; None: nothing."""
        if earlier_attempts > 0:
            return None
        if step_id in self.lose_node:
            return NODE_LOST
        if step_id in self.preempt:
            return PREEMPTED
        return None

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


class OutputWatch:
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
        if self.remote and self.project_python:
            self._probe = subprocess.Popen(
                [self.project_python, OUTPUT_PROBE, *self.remote],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        return self

    def __exit__(self, *_exc) -> None:
        if self._probe is not None:
            if self._probe.poll() is None:
                self._probe.kill()
            self._probe.wait()
            self._probe = None

    def written(self) -> bool:
        if _has_files(self.local):
            return True
        return self._probe is not None and self._probe.poll() == 0


DEADLINE_KILL = "[killed: the retry window closed (Argo: the retried pod's deadline)]"


def run_command(
    command: list[str],
    env: dict,
    interruption: Interruption | None,
    outputs: OutputWatch,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Runs a step's command; with an `interruption`, kills it (SIGKILL: the process
    ends as a pod on a node going away does) once it has written into one of its
    `outputs`, its output ending with the interruption's note; with `timeout`, kills
    it that many seconds after it started (a pod's deadline)."""
    if timeout is not None and timeout <= 0:
        return subprocess.CompletedProcess(command, 1, DEADLINE_KILL)
    with tempfile.TemporaryFile("w+") as log, contextlib.ExitStack() as watching:
        if interruption is not None:
            watching.enter_context(outputs)
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        started = time.monotonic()
        killed = ""
        while process.poll() is None:
            if interruption is not None and outputs.written():
                killed = interruption.note
            elif timeout is not None and time.monotonic() - started > timeout:
                killed = DEADLINE_KILL
            if killed:
                process.kill()
                break
            time.sleep(0.05)
        returncode = process.wait()
        log.seek(0)
        output = log.read() + (f"\n{killed}" if killed else "")
    return subprocess.CompletedProcess(command, returncode or (1 if killed else 0), output)
