"""One multi-node training job from the Trainer step's side: create it, stream its first
node's log, wait, clean up. Shared by the two engines that hand training to the cluster:
a TFJob (kubeflow/tfjob/) and a TrainJob (kubeflow/trainjob/); each says in a `JobKind`
how its job is called, when it has finished and which pods are its nodes.

The step owns the job for as long as it waits: when the job fails, when it
runs past its deadline, when the step is cancelled (KFP terminates the pod:
SIGTERM) or fails for any other reason, the job is deleted, and its pods
with it, so no node keeps a GPU for a run that has ended. A failure names
the node that failed, its exit code and its last log lines, read before the
job is deleted.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kubeflow.kubernetes_api import ClusterError, KubernetesApi

# How long the step waits past the job's own deadline before it gives up on
# the controller enforcing it.
DEADLINE_GRACE_SECONDS = 120
# Log lines of a failed node kept in the step's error.
FAILURE_LOG_LINES = 30


class JobFailed(RuntimeError):
    """The job failed, ran past its deadline or was lost; the message names the node."""


class StepTerminated(BaseException):
    """The step's pod was told to stop (SIGTERM): the run was cancelled or the pod evicted."""


@dataclass(frozen=True)
class Timing:
    poll_seconds: float = 5.0
    # Until the step gives up: the job's deadline plus DEADLINE_GRACE_SECONDS.
    wait_seconds: float = 86_400 + DEADLINE_GRACE_SECONDS
    # How long the API may fail to answer (5xx, 429, no connection) while the job runs.
    api_patience_seconds: float = 300.0


DEFAULT_TIMING = Timing()


class PodLogs(KubernetesApi):
    """The calls both engines make: create, get and delete their job; list its pods; read
    a node's log."""

    # The training container of every node's pod.
    CONTAINER = ""
    # The job's resource: API group, version, plural.
    JOB_RESOURCE: tuple[str, str, str] = ("", "", "")
    # What deleting the job does to its pods (a delete's propagationPolicy).
    PROPAGATION = "Background"

    def create_job(self, manifest: dict[str, Any]) -> dict[str, Any]:
        group, version, plural = self.JOB_RESOURCE
        namespace = manifest["metadata"]["namespace"]
        return self._call(
            f"create {plural}.{group} in namespace {namespace}",
            self._custom.create_namespaced_custom_object,
            group, version, namespace, plural, manifest,
        )  # fmt: skip

    def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The job, or None once it is gone."""
        group, version, plural = self.JOB_RESOURCE
        return self._call(
            f"get {plural}.{group} {namespace}/{name}",
            self._custom.get_namespaced_custom_object,
            group, version, namespace, plural, name, gone=None,
        )  # fmt: skip

    def delete_job(self, namespace: str, name: str) -> bool:
        """Deletes the job and, with it, its pods; False if it was not there."""
        group, version, plural = self.JOB_RESOURCE
        status = self._call(
            f"delete {plural}.{group} {namespace}/{name}",
            self._custom.delete_namespaced_custom_object,
            group, version, namespace, plural, name, propagation_policy=self.PROPAGATION,
            gone=None,
        )  # fmt: skip
        return status is not None

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        response = self._call(
            f"list pods in namespace {namespace}",
            self._core.list_namespaced_pod,
            namespace,
            label_selector=selector,
            _preload_content=False,
        )
        return json.loads(response.data).get("items", [])

    def log_tail(self, namespace: str, pod: str, lines: int) -> str:
        response = self._call(
            f"get pods/log {namespace}/{pod}",
            self._core.read_namespaced_pod_log,
            pod, namespace, container=self.CONTAINER, tail_lines=lines, _preload_content=False,
        )  # fmt: skip
        return response.data.decode(errors="replace")

    def follow_log(self, namespace: str, pod: str) -> Iterator[str]:
        """The container's log lines as they are written, each `<RFC 3339 time> <text>`.

        Raises ClusterError while the container has not started (the API answers 400).
        """
        response = self._call(
            f"get pods/log {namespace}/{pod}",
            self._core.read_namespaced_pod_log,
            pod, namespace, container=self.CONTAINER, follow=True, timestamps=True,
            _preload_content=False,
        )  # fmt: skip
        pending = b""
        try:
            for chunk in response.stream(amt=None, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.decode(errors="replace")
            if pending:
                yield pending.decode(errors="replace")
        finally:
            response.release_conn()


@dataclass(frozen=True)
class Node:
    """One node of a job: how the step names it, and its pod (None until it exists)."""

    name: str
    pod: str | None

    def __str__(self) -> str:
        return self.name if self.pod in (None, self.name) else f"{self.name} (pod {self.pod})"


class JobKind(Protocol):
    """What the shared loop needs to know of one engine's job."""

    kind: str  # "TFJob"
    kubectl: str  # what `kubectl delete <it>` takes
    deadline_setting: str  # the setting named when the wait runs out
    noun: str  # what a node is called in a failure: replica, node

    def get(self, cluster: Any, namespace: str, name: str) -> dict[str, Any] | None: ...
    def create(self, cluster: Any, manifest: dict[str, Any]) -> dict[str, Any]: ...
    def delete(self, cluster: Any, namespace: str, name: str) -> bool: ...
    def pods(self, cluster: Any, namespace: str, name: str) -> list[dict[str, Any]]: ...
    def nodes(self, manifest: Mapping[str, Any], pods: Sequence[Mapping]) -> list[Node]:
        """Every node, the first (the one that writes the model) first."""
        ...

    def finished(self, job: Mapping[str, Any]) -> tuple[bool, dict[str, Any]] | None:
        """(succeeded, condition) once the job has finished; None while it runs."""
        ...

    def created(self, manifest: Mapping[str, Any]) -> str: ...


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
    """Copies one node's log into the step's own, line by line, until stopped.

    `node` finds the node (its pod may not exist yet). A stream that ends
    while the job runs (the container restarted, the API closed a long
    stream) is followed again; lines already copied are skipped by their
    timestamp.
    """

    def __init__(
        self,
        cluster: PodLogs,
        namespace: str,
        node: Callable[[], Node | None],
        write: Callable[[str], None],
    ):
        super().__init__(name="log-follower", daemon=True)
        self.cluster, self.namespace, self.node, self.write = cluster, namespace, node, write
        self.stopped = threading.Event()
        # Set once the job has finished: the next end of stream is the log's end.
        self.finishing = threading.Event()
        self.last_time = ""
        # The last lines copied: what the step can still show once the pod is deleted.
        self.recent: deque[str] = deque(maxlen=FAILURE_LOG_LINES)
        self.seen_at_last_time: set[tuple[str, str]] = set()
        self.found: Node | None = None

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                if self.found is None or self.found.pod is None:
                    self.found = self.node()
                if self.found is not None and self.found.pod is not None:
                    self._copy(self.found)
            except ClusterError:
                pass  # Not started yet, or gone: try again while the job runs.
            except Exception as err:  # The stream broke; the job's state decides, not the log.
                self.write(f"[{self.found and self.found.name}] (log stream interrupted: {err})")
            if self.finishing.is_set() or self.stopped.is_set():
                return
            self.stopped.wait(2.0)

    def _copy(self, node: Node) -> None:
        assert node.pod is not None
        for line in self.cluster.follow_log(self.namespace, node.pod):
            stamp, _, text = line.partition(" ")
            if stamp < self.last_time or (stamp, text) in self.seen_at_last_time:
                continue
            if stamp != self.last_time:
                self.last_time, self.seen_at_last_time = stamp, set()
            self.seen_at_last_time.add((stamp, text))
            self.recent.append(text)
            self.write(f"[{node.name}] {text}")
            if self.stopped.is_set():
                return

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


def terminated(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The `terminated` state of the node's container, if it has ended."""
    for status in pod.get("status", {}).get("containerStatuses") or []:
        ended = status.get("state", {}).get("terminated")
        if ended:
            return ended
    return None


def _state(pod: Mapping[str, Any] | None) -> str:
    ended = terminated(pod or {})
    if ended is None:
        return "not ended" if pod else "gone"
    reason = ended.get("reason")
    return f"exit code {ended.get('exitCode')}" + (f", {reason}" if reason else "")


def failure_text(
    cluster: PodLogs,
    kind: JobKind,
    job: Mapping[str, Any],
    headline: str,
    first_lines: Sequence[str] = (),
) -> str:
    """`headline`, the node that failed first (or the first node) with its last lines, the others.

    The first node to fail is the cause: the others fail after it, their
    collective ops cut off, or are stopped by the controller, which deletes
    their pods (and logs): for the first node, `first_lines` (streamed) stand in.
    """
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    try:
        listed = kind.pods(cluster, namespace, name)
    except ClusterError as err:
        return f"{headline}\n(could not list the job's pods: {err})"
    pods = {p["metadata"]["name"]: p for p in listed}
    nodes = kind.nodes(job, listed)
    failed = sorted(
        (node for node in nodes
         if node.pod in pods and (terminated(pods[node.pod]) or {}).get("exitCode", 0) != 0),
        key=lambda node: (terminated(pods[node.pod]) or {}).get("finishedAt") or "",
    )  # fmt: skip
    shown = failed[0] if failed else nodes[0]
    try:
        if shown.pod is None:
            raise ClusterError("its pod is gone")
        lines = cluster.log_tail(namespace, shown.pod, FAILURE_LOG_LINES).rstrip().splitlines()
    except ClusterError as err:
        lines = list(first_lines) if shown.name == nodes[0].name else []
        lines = lines or [f"(no log: {err})"]
    tail = "\n".join(_clipped(line) for line in lines)
    state = _state(pods.get(shown.pod or ""))
    parts = [headline, f"{kind.noun} {shown} ({state}); its last log lines:\n{tail}"]
    if failed[1:]:
        parts.append(
            "then: " + ", ".join(f"{node} ({_state(pods[node.pod])})" for node in failed[1:])
        )
    return "\n".join(parts)


def _clipped(line: str, limit: int = 500) -> str:
    return line if len(line) <= limit else f"{line[:limit]}... ({len(line) - limit} more)"


def run_job(
    cluster: PodLogs,
    kind: JobKind,
    manifest: dict[str, Any],
    *,
    timing: Timing = DEFAULT_TIMING,
    write: Callable[[str], None] = _print,
    failed: type[JobFailed] = JobFailed,
) -> dict[str, Any]:
    """Runs the job to its end; returns it succeeded, or raises `failed`.

    Whatever ends the wait other than success (failure, deadline, SIGTERM,
    an error here) deletes the job.
    """
    with terminated_as_exception():
        return _run(cluster, kind, manifest, timing, write, failed)


def _run(cluster, kind: JobKind, manifest, timing: Timing, write, failed) -> dict[str, Any]:
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    where = f"{kind.kind} {namespace}/{name}"
    if kind.get(cluster, namespace, name) is not None:
        # A retried step: its killed attempt's job may still be running.
        write(f"Deleting the {where} that an earlier attempt of this step left")
        kind.delete(cluster, namespace, name)
        _wait_gone(cluster, kind, namespace, name, timing, failed)

    def first_node() -> Node | None:
        node = kind.nodes(manifest, ())[0]
        return node if node.pod else kind.nodes(manifest, kind.pods(cluster, namespace, name))[0]

    follower = LogFollower(cluster, namespace, first_node, write)
    succeeded = False
    try:
        kind.create(cluster, manifest)
        write(f"Created {where}: {kind.created(manifest)}")
        follower.start()
        job = _wait_finished(cluster, kind, namespace, name, timing, write, failed)
        outcome = kind.finished(job)
        if outcome is None:
            headline = (
                f"{where} did not finish within {timing.wait_seconds:.0f} s (its deadline, "
                f"{kind.deadline_setting}, plus a grace period); deleted it"
            )
        elif not outcome[0]:
            condition = outcome[1]
            headline = f"{where} failed: {condition.get('message') or condition.get('reason')}"
        else:
            succeeded = True
            follower.finish()
            return job
        raise failed(failure_text(cluster, kind, job, headline, follower.recent))
    finally:
        if follower.is_alive():
            follower.stop()
        if not succeeded:
            # After a refused create this finds nothing; the refusal stays the error.
            try:
                if kind.delete(cluster, namespace, name):
                    write(f"Deleted {where}")
            except ClusterError as err:
                write(
                    f"Could not delete {where} ({err}); it runs until its deadline unless "
                    f"deleted: kubectl delete {kind.kubectl} -n {namespace} {name}"
                )


def _wait_finished(cluster, kind: JobKind, namespace, name, timing: Timing, write, failed):
    """The job once it has finished, or as it is when the wait runs out.

    An API server that does not answer for a while (an upgrade, a restart) is
    waited out for `timing.api_patience_seconds`: the job trains on meanwhile.
    """
    end = time.monotonic() + timing.wait_seconds
    answered = time.monotonic()
    while True:
        try:
            job = kind.get(cluster, namespace, name)
        except ClusterError as err:
            if not err.transient or time.monotonic() - answered > timing.api_patience_seconds:
                raise
            write(f"The Kubernetes API did not answer ({err}); asking again")
            time.sleep(timing.poll_seconds)
            continue
        answered = time.monotonic()
        if job is None:
            raise failed(f"{kind.kind} {namespace}/{name} was deleted while the step waited for it")
        if kind.finished(job) is not None or time.monotonic() >= end:
            return job
        time.sleep(timing.poll_seconds)


def _wait_gone(cluster, kind: JobKind, namespace, name, timing: Timing, failed) -> None:
    end = time.monotonic() + 300
    while kind.get(cluster, namespace, name) is not None:
        if time.monotonic() >= end:
            raise failed(f"{kind.kind} {namespace}/{name} from an earlier attempt was not deleted")
        time.sleep(min(timing.poll_seconds, 1.0))
