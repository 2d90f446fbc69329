"""One TFJob from the step's side: the TFJob's part of kubeflow/training_job.py's loop.

The loop (create, stream the Chief's log, wait, delete on failure, deadline,
cancellation or SIGTERM, name the replica that failed) is shared with the
TrainJob engine; this module says what a TFJob's API, conditions and pods are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubeflow.tfjob.cluster import Cluster
from kubeflow.tfjob.manifest import replica_pod_names
from kubeflow.training_job import (
    DEADLINE_GRACE_SECONDS,
    DEFAULT_TIMING,
    JobFailed,
    Node,
    Timing,
    _print,
    run_job,
)

__all__ = ["DEADLINE_GRACE_SECONDS", "TFJOB", "TFJobFailed", "Timing", "run_tfjob"]
SUCCEEDED, FAILED = "Succeeded", "Failed"


class TFJobFailed(JobFailed):
    """The job failed, ran past its deadline or was lost; the message names the replica."""


class TFJobKind:
    kind, kubectl, noun = "TFJob", "tfjob", "replica"
    deadline_setting = "training.tfjob.deadline"

    def get(self, cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
        return cluster.get_tfjob(namespace, name)

    def create(self, cluster: Cluster, manifest: dict[str, Any]) -> dict[str, Any]:
        return cluster.create_tfjob(manifest)

    def delete(self, cluster: Cluster, namespace: str, name: str) -> bool:
        return cluster.delete_tfjob(namespace, name)

    def pods(self, cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
        return cluster.job_pods(namespace, name)

    def nodes(self, manifest: Mapping[str, Any], pods: Sequence[Mapping]) -> list[Node]:
        # The operator names each replica's pod itself (common.GenGeneralName).
        return [Node(pod, pod) for pod in replica_pod_names(manifest)]

    def finished(self, job: Mapping[str, Any]) -> tuple[bool, dict[str, Any]] | None:
        """The job's Succeeded or Failed condition, once one is true."""
        for condition in reversed(job.get("status", {}).get("conditions") or []):
            if condition.get("type") in (SUCCEEDED, FAILED) and condition.get("status") == "True":
                return condition["type"] == SUCCEEDED, condition
        return None

    def created(self, manifest: Mapping[str, Any]) -> str:
        workers = manifest["spec"]["tfReplicaSpecs"].get("Worker", {}).get("replicas", 0)
        return f"1 chief + {workers} worker(s); following the chief's log"


TFJOB = TFJobKind()


def run_tfjob(
    cluster: Cluster,
    manifest: dict[str, Any],
    *,
    timing: Timing = DEFAULT_TIMING,
    write: Callable[[str], None] = _print,
) -> dict[str, Any]:
    """Runs the job to its end; returns it succeeded, or raises TFJobFailed."""
    return run_job(cluster, TFJOB, manifest, timing=timing, write=write, failed=TFJobFailed)
