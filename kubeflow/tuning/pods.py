"""The Tune step's worker pods: their manifests, and starting and waiting for them.

Plain core/v1 Pods, not a TFJob: the Training Operator gives every Worker
replica the same template, so it cannot give each its own
KERASTUNER_TUNER_ID, and it injects TF_CONFIG, under which the Trainer's
`auto` strategy would turn a trial into multi-worker training. Pods need no
operator; the step's service account needs create, get, delete on pods.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from kubeflow.kubernetes_api import ClusterError, KubernetesApi
from kubeflow.tfjob.manifest import POD_ANNOTATIONS, job_name, placed_pod_spec
from kubeflow.tuning.spec import TuningSpec
from trainer.tuning_workers import worker_environment

CONTAINER_NAME = "tuner"
# Every worker pod of one Tune task carries this label, its value the task's name.
SEARCH_LABEL = "pipelines.kubeflow.org/tuning-search"
# What each worker pod runs (kubeflow/tuning/worker.py), on the job file.
WORKER_COMMAND = ("python", "-m", "kubeflow.tuning.worker")
REQUIRED_PERMISSIONS = "create, get, delete on pods"


def search_name(output_uri: str) -> str:
    """The worker pods' common name: the same for every attempt of one Tune task."""
    return job_name(output_uri, prefix="tune")


def worker_pod(
    spec: TuningSpec,
    *,
    name: str,
    namespace: str,
    index: int,
    job_file: str,
    oracle_ip: str,
    oracle_port: int,
) -> dict[str, Any]:
    """Worker `index`: a KerasTuner worker of the chief at oracle_ip:oracle_port."""
    env = [dict(e) for e in spec.env] + [
        {"name": key, "value": value}
        for key, value in worker_environment(oracle_ip, oracle_port, index).items()
    ]
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": spec.image,
        "command": list(WORKER_COMMAND),
        "args": [job_file],
        "workingDir": spec.working_dir,
        "env": env,
    }
    # A failed worker is the step's to report; the step's retry resumes the search.
    pod = placed_pod_spec(spec, container, restartPolicy="Never")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-worker-{index}",
            "namespace": namespace,
            "labels": {SEARCH_LABEL: name},
            "annotations": dict(POD_ANNOTATIONS),
        },
        "spec": pod,
    }


class PodCluster(KubernetesApi):
    PURPOSE = "start the tuning workers with"

    def explain(self, action: str, status: int, reason: str, message: str) -> ClusterError:
        if status == 403:
            return ClusterError(
                f"Kubernetes refused to {action}: {message}. The Tune step's service account "
                f"needs {REQUIRED_PERMISSIONS}",
                status,
            )
        return super().explain(action, status, reason, message)

    def create_pod(self, manifest: Mapping[str, Any]) -> None:
        namespace = manifest["metadata"]["namespace"]
        self._call(
            f"create pods in namespace {namespace}",
            self._core.create_namespaced_pod, namespace, dict(manifest), _preload_content=False,
        )  # fmt: skip

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as JSON, or None once it is gone."""
        import json

        response = self._call(
            f"get pods {namespace}/{name}",
            self._core.read_namespaced_pod, name, namespace, _preload_content=False, gone=None,
        )  # fmt: skip
        return None if response is None else json.loads(response.data)

    def delete_pod(self, namespace: str, name: str) -> bool:
        status = self._call(
            f"delete pods {namespace}/{name}",
            self._core.delete_namespaced_pod, name, namespace, gone=None,
        )  # fmt: skip
        return status is not None


def exit_code(pod: Mapping[str, Any] | None) -> int | None:
    """The worker container's exit code once it has ended; None while it runs."""
    if pod is None:
        return None
    for status in pod.get("status", {}).get("containerStatuses") or []:
        terminated = status.get("state", {}).get("terminated")
        if terminated:
            return int(terminated.get("exitCode", 1))
    return 1 if pod.get("status", {}).get("phase") == "Failed" else None


def pod_launcher(
    cluster: PodCluster,
    spec: TuningSpec,
    *,
    name: str,
    namespace: str,
    poll_seconds: float = 5.0,
    log: Callable[[str], None] = print,
) -> Callable[[str, str, int, int], list[int]]:
    """trainer.tuning_workers' WorkerLauncher as pods: creates them, waits for each to end,
    deletes them (whatever ends the wait), and returns their exit codes. A pod an earlier
    attempt of the step left is deleted first: its chief, and so its oracle address, is gone."""

    def launch(job_file: str, oracle_ip: str, oracle_port: int, workers: int) -> list[int]:
        pods = [
            worker_pod(
                spec,
                name=name,
                namespace=namespace,
                index=i,
                job_file=job_file,
                oracle_ip=oracle_ip,
                oracle_port=oracle_port,
            )
            for i in range(workers)
        ]
        names = [p["metadata"]["name"] for p in pods]
        for pod_name in names:
            if cluster.delete_pod(namespace, pod_name):
                log(f"Deleted pod {namespace}/{pod_name}, left by an earlier attempt")
                while cluster.get_pod(namespace, pod_name) is not None:
                    time.sleep(poll_seconds)
        try:
            for pod in pods:
                cluster.create_pod(pod)
            log(f"Created {workers} tuning worker pod(s) {name}-worker-*; oracle at "
                f"{oracle_ip}:{oracle_port}")  # fmt: skip
            codes: dict[str, int] = {}
            while len(codes) < len(names):
                for pod_name in names:
                    if pod_name not in codes:
                        current = cluster.get_pod(namespace, pod_name)
                        if current is None:
                            codes[pod_name] = 1
                            log(f"Pod {namespace}/{pod_name} was deleted while it ran")
                        elif (code := exit_code(current)) is not None:
                            codes[pod_name] = code
                time.sleep(0 if len(codes) == len(names) else poll_seconds)
            return [codes[n] for n in names]
        finally:
            for pod_name in names:
                try:
                    cluster.delete_pod(namespace, pod_name)
                except ClusterError as err:
                    log(f"Could not delete pod {namespace}/{pod_name}: {err}")

    return launch
