"""One TrainJob from the step's side: the TrainJob's part of kubeflow/training_job.py's loop.

Before it creates the job, the step checks that the runtime the job
references exists: without it Trainer's webhook refuses the job with a
message about the runtime, and this says how to install it instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubeflow.training_job import DEFAULT_TIMING, JobFailed, Node, Timing, _print, run_job
from kubeflow.trainjob import naming
from kubeflow.trainjob.cluster import Cluster

COMPLETE, FAILED = "Complete", "Failed"
INSTALL_COMMAND = (
    "python -m kubeflow.compile --training-runtime --output runtime.yaml "
    "&& kubectl apply -f runtime.yaml"
)


class TrainJobFailed(JobFailed):
    """The job failed, ran past its deadline or was lost; the message names the node."""


class RuntimeMissing(RuntimeError):
    """The TrainJob's runtime is not installed; the message says how to install it."""


class TrainJobKind:
    kind, kubectl, noun = "TrainJob", "trainjob", "node"
    deadline_setting = "training.trainjob.deadline"

    def get(self, cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
        return cluster.get_trainjob(namespace, name)

    def create(self, cluster: Cluster, manifest: dict[str, Any]) -> dict[str, Any]:
        return cluster.create_trainjob(manifest)

    def delete(self, cluster: Cluster, namespace: str, name: str) -> bool:
        return cluster.delete_trainjob(namespace, name)

    def pods(self, cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
        return cluster.job_pods(namespace, name)

    def nodes(self, manifest: Mapping[str, Any], pods: Sequence[Mapping]) -> list[Node]:
        """Node i is the pod of completion index i in replicated job `node` (its latest)."""
        name = manifest["metadata"]["name"]
        by_index: dict[int, Mapping] = {}
        for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or ""):
            metadata = pod["metadata"]
            if metadata.get("labels", {}).get(naming.REPLICATED_JOB_LABEL) != naming.NODE:
                continue
            index = (metadata.get("annotations") or {}).get(naming.COMPLETION_INDEX_ANNOTATION)
            if index is not None and index.isdigit():
                by_index[int(index)] = pod
        return [
            Node(
                naming.pod_hostname(name, naming.NODE, naming.JOB_INDEX, i),
                by_index[i]["metadata"]["name"] if i in by_index else None,
            )
            for i in range(manifest["spec"]["trainer"]["numNodes"])
        ]

    def finished(self, job: Mapping[str, Any]) -> tuple[bool, dict[str, Any]] | None:
        """The job's Complete or Failed condition, once one is true (Trainer copies them
        from its JobSet's: jobset.go v2.1.0 L309-323, v2.2.0 L340-346)."""
        for condition in reversed(job.get("status", {}).get("conditions") or []):
            if condition.get("type") in (COMPLETE, FAILED) and condition.get("status") == "True":
                return condition["type"] == COMPLETE, condition
        return None

    def created(self, manifest: Mapping[str, Any]) -> str:
        trainer = manifest["spec"]["trainer"]
        runtime = manifest["spec"]["runtimeRef"]
        return (
            f"{trainer['numNodes']} nodes on {runtime['kind']} {runtime['name']}; "
            "following node 0's log"
        )


TRAINJOB = TrainJobKind()


def check_runtime(cluster: Cluster, manifest: Mapping[str, Any]) -> None:
    """Refuses, in one line, a TrainJob whose runtime is not installed."""
    ref = manifest["spec"]["runtimeRef"]
    namespace = manifest["metadata"]["namespace"]
    if cluster.get_runtime(ref["kind"], ref["name"], namespace) is None:
        where = "in the cluster" if ref["kind"] == "ClusterTrainingRuntime" else f"in {namespace}"
        raise RuntimeMissing(
            f"error: no {ref['kind']} {ref['name']!r} {where}: the TrainJob's runtime is "
            f"installed once per cluster (or profile); install it: {INSTALL_COMMAND}"
        )


def run_trainjob(
    cluster: Cluster,
    manifest: dict[str, Any],
    *,
    timing: Timing = DEFAULT_TIMING,
    write: Callable[[str], None] = _print,
) -> dict[str, Any]:
    """Checks the runtime, runs the job to its end; returns it complete, or raises."""
    check_runtime(cluster, manifest)
    return run_job(cluster, TRAINJOB, manifest, timing=timing, write=write, failed=TrainJobFailed)
