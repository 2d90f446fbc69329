"""One TFJob from the step's side: create it, stream the Chief's log, wait, clean up.

The step owns the job for as long as it waits: when the job fails, when it
runs past its deadline, when the step is cancelled (KFP terminates the pod:
SIGTERM) or fails for any other reason, the job is deleted, and its pods
with it, so no replica keeps a GPU node for a run that has ended. A failure
names the replica that failed, its exit code and its last log lines, read
before the job is deleted.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeflow.tfjob.cluster import Cluster, ClusterError
from kubeflow.tfjob.manifest import CHIEF, pod_name, replica_pod_names

# How long the step waits past the job's own deadline before it gives up on
# the operator enforcing it.
DEADLINE_GRACE_SECONDS = 120
# Log lines of a failed replica kept in the step's error.
FAILURE_LOG_LINES = 30
SUCCEEDED, FAILED = "Succeeded", "Failed"


class TFJobFailed(RuntimeError):
    """The job failed, ran past its deadline or was lost; the message names the replica."""


class StepTerminated(BaseException):
    """The step's pod was told to stop (SIGTERM): the run was cancelled or the pod evicted."""


@dataclass(frozen=True)
class Timing:
    poll_seconds: float = 5.0
    # Until the step gives up: the job's deadline plus DEADLINE_GRACE_SECONDS.
    wait_seconds: float = 86_400 + DEADLINE_GRACE_SECONDS
    # How long the API may fail to answer (5xx, 429, no connection) while the job runs.
    api_patience_seconds: float = 300.0


def finished_condition(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """The job's Succeeded or Failed condition, once one is true."""
    for condition in reversed(job.get("status", {}).get("conditions") or []):
        if condition.get("type") in (SUCCEEDED, FAILED) and condition.get("status") == "True":
            return condition
    return None


@contextlib.contextmanager
def terminated_as_exception() -> Iterator[None]:
    """SIGTERM raises StepTerminated in the waiting thread, so `finally` blocks run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise StepTerminated("SIGTERM: the run was cancelled or the step's pod is being stopped")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class LogFollower(threading.Thread):
    """Copies one replica's log into the step's own, line by line, until stopped.

    A stream that ends while the job runs (the container restarted, the API
    closed a long stream) is followed again; lines already copied are skipped
    by their timestamp.
    """

    def __init__(self, cluster: Cluster, namespace: str, pod: str, write: Callable[[str], None]):
        super().__init__(name=f"log-{pod}", daemon=True)
        self.cluster, self.namespace, self.pod, self.write = cluster, namespace, pod, write
        self.stopped = threading.Event()
        # Set once the job has finished: the next end of stream is the log's end.
        self.finishing = threading.Event()
        self.last_time = ""
        # The last lines copied: what the step can still show once the pod is deleted.
        self.recent: deque[str] = deque(maxlen=FAILURE_LOG_LINES)
        self.seen_at_last_time: set[tuple[str, str]] = set()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                for line in self.cluster.follow_log(self.namespace, self.pod):
                    stamp, _, text = line.partition(" ")
                    if stamp < self.last_time or (stamp, text) in self.seen_at_last_time:
                        continue
                    if stamp != self.last_time:
                        self.last_time, self.seen_at_last_time = stamp, set()
                    self.seen_at_last_time.add((stamp, text))
                    self.recent.append(text)
                    self.write(f"[{self.pod}] {text}")
                    if self.stopped.is_set():
                        return
            except ClusterError:
                pass  # Not started yet, or gone: try again while the job runs.
            except Exception as err:  # The stream broke; the job's state decides, not the log.
                self.write(f"[{self.pod}] (log stream interrupted: {err})")
            if self.finishing.is_set():
                return
            self.stopped.wait(2.0)

    def finish(self, timeout: float = 30.0) -> None:
        """Lets the stream run to the end of the finished container's log, then stops."""
        self.finishing.set()
        self.join(timeout=timeout)
        self.stop()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


def _print(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _terminated(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The `terminated` state of the replica's container, if it has ended."""
    for status in pod.get("status", {}).get("containerStatuses") or []:
        terminated = status.get("state", {}).get("terminated")
        if terminated:
            return terminated
    return None


def _state(pod: Mapping[str, Any] | None) -> str:
    terminated = _terminated(pod or {})
    if terminated is None:
        return "not ended" if pod else "gone"
    reason = terminated.get("reason")
    return f"exit code {terminated.get('exitCode')}" + (f", {reason}" if reason else "")


def failure_text(
    cluster: Cluster, job: Mapping[str, Any], headline: str, chief_lines: Sequence[str] = ()
) -> str:
    """`headline`, the replica that failed first (or the Chief) with its last lines, the others.

    The first replica to fail is the cause: the others fail after it, their
    collective ops cut off, or are stopped by the operator, which deletes
    their pods (and logs): for the Chief, `chief_lines` (streamed) stand in.
    """
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    try:
        pods = {p["metadata"]["name"]: p for p in cluster.job_pods(namespace, name)}
    except ClusterError as err:
        return f"{headline}\n(could not list the job's pods: {err})"
    failed = sorted(
        (pod for pod in replica_pod_names(job)
         if pod in pods and (_terminated(pods[pod]) or {}).get("exitCode", 0) != 0),
        key=lambda pod: (_terminated(pods[pod]) or {}).get("finishedAt") or "",
    )  # fmt: skip
    shown = failed[0] if failed else pod_name(name, CHIEF, 0)
    try:
        lines = cluster.log_tail(namespace, shown, FAILURE_LOG_LINES).rstrip().splitlines()
    except ClusterError as err:
        lines = list(chief_lines) if shown == pod_name(name, CHIEF, 0) else []
        lines = lines or [f"(no log: {err})"]
    tail = "\n".join(_clipped(line) for line in lines)
    parts = [headline, f"replica {shown} ({_state(pods.get(shown))}); its last log lines:\n{tail}"]
    if failed[1:]:
        parts.append("then: " + ", ".join(f"{pod} ({_state(pods[pod])})" for pod in failed[1:]))
    return "\n".join(parts)


def _clipped(line: str, limit: int = 500) -> str:
    return line if len(line) <= limit else f"{line[:limit]}... ({len(line) - limit} more)"


def run_tfjob(
    cluster: Cluster,
    manifest: dict[str, Any],
    *,
    timing: Timing = Timing(),
    write: Callable[[str], None] = _print,
) -> dict[str, Any]:
    """Runs the job to its end; returns it succeeded, or raises TFJobFailed.

    Whatever ends the wait other than success (failure, deadline, SIGTERM,
    an error here) deletes the job.
    """
    with terminated_as_exception():
        return _run(cluster, manifest, timing, write)


def _run(cluster: Cluster, manifest: dict[str, Any], timing: Timing, write) -> dict[str, Any]:
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    where = f"TFJob {namespace}/{name}"
    if cluster.get_tfjob(namespace, name) is not None:
        # A retried step: its killed attempt's job may still be running.
        write(f"Deleting the {where} that an earlier attempt of this step left")
        cluster.delete_tfjob(namespace, name)
        _wait_gone(cluster, namespace, name, timing)
    follower = LogFollower(cluster, namespace, pod_name(name, CHIEF, 0), write)
    succeeded = False
    try:
        cluster.create_tfjob(manifest)
        workers = manifest["spec"]["tfReplicaSpecs"].get("Worker", {}).get("replicas", 0)
        write(f"Created {where}: 1 chief + {workers} worker(s); following the chief's log")
        follower.start()
        job = _wait_finished(cluster, namespace, name, timing, write)
        condition = finished_condition(job)
        if condition is None:
            headline = (
                f"{where} did not finish within {timing.wait_seconds:.0f} s (its deadline, "
                "training.tfjob.deadline, plus a grace period); deleted it"
            )
        elif condition["type"] == FAILED:
            headline = f"{where} failed: {condition.get('message') or condition.get('reason')}"
        else:
            succeeded = True
            follower.finish()
            return job
        raise TFJobFailed(failure_text(cluster, job, headline, follower.recent))
    finally:
        if follower.is_alive():
            follower.stop()
        if not succeeded:
            # After a refused create this finds nothing; the refusal stays the error.
            try:
                if cluster.delete_tfjob(namespace, name):
                    write(f"Deleted {where}")
            except ClusterError as err:
                write(
                    f"Could not delete {where} ({err}); it runs until its deadline unless "
                    f"deleted: kubectl delete tfjob -n {namespace} {name}"
                )


def _wait_finished(
    cluster: Cluster, namespace: str, name: str, timing: Timing, write: Callable[[str], None]
) -> dict[str, Any]:
    """The job once it has a finished condition, or as it is when the wait runs out.

    An API server that does not answer for a while (an upgrade, a restart) is
    waited out for `timing.api_patience_seconds`: the job trains on meanwhile.
    """
    end = time.monotonic() + timing.wait_seconds
    answered = time.monotonic()
    while True:
        try:
            job = cluster.get_tfjob(namespace, name)
        except ClusterError as err:
            if not err.transient or time.monotonic() - answered > timing.api_patience_seconds:
                raise
            write(f"The Kubernetes API did not answer ({err}); asking again")
            time.sleep(timing.poll_seconds)
            continue
        answered = time.monotonic()
        if job is None:
            raise TFJobFailed(f"TFJob {namespace}/{name} was deleted while the step waited for it")
        if finished_condition(job) is not None or time.monotonic() >= end:
            return job
        time.sleep(timing.poll_seconds)


def _wait_gone(cluster: Cluster, namespace: str, name: str, timing: Timing) -> None:
    end = time.monotonic() + 300
    while cluster.get_tfjob(namespace, name) is not None:
        if time.monotonic() >= end:
            raise TFJobFailed(f"TFJob {namespace}/{name} from an earlier attempt was not deleted")
        time.sleep(min(timing.poll_seconds, 1.0))
