"""The TFJob object the Trainer step creates, as training-operator release-1.9 takes it.

What the operator does with it (pkg/controller.v1/tensorflow in its source):
it starts a pod per replica, `<job>-chief-0` and `<job>-worker-<i>`, and,
because the job has more than one replica, injects TF_CONFIG into the
container named `tensorflow` only, with every replica at
`<job>-<type>-<i>.<namespace>.svc:<port>` (the container port named
`tfjob-port`, 2222 by default). With a Chief, the job has succeeded when the
Chief has. Its webhook refuses a job whose name is not a DNS-1035 label,
whose replicas lack a container named `tensorflow` or an image, or that has
more than one Chief or Master.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kubeflow.tfjob.spec import TFJobSpec

GROUP = "kubeflow.org"
VERSION = "v1"
PLURAL = "tfjobs"
KIND = "TFJob"
CONTAINER_NAME = "tensorflow"
PORT_NAME = "tfjob-port"
PORT = 2222
CHIEF = "Chief"
WORKER = "Worker"
# The operator's label naming the job on each replica's pod.
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
# KFP puts this label on every pod of a run; the job and its pods carry it too,
# so `kubectl get tfjobs,pods -l pipeline/runid=<run>` lists a run's training.
RUN_ID_LABEL = "pipeline/runid"
# Which Trainer output the job writes: unique to the run and the task.
MODEL_URI_ANNOTATION = "pipelines.kubeflow.org/trainer-model-uri"
# In a multi-user Kubeflow profile namespace, an Istio sidecar would keep a
# finished replica's pod running (the job never completes) and sit between
# the replicas' collective ops.
POD_ANNOTATIONS = {"sidecar.istio.io/inject": "false"}
# Restart a replica only on exit codes 128-255 (killed by a signal: a
# preempted node, an eviction); 1-127 is the training's own error.
RETRYABLE_RESTART_POLICY = "ExitCode"
# DNS-1035 label: what the webhook requires of a TFJob's name. The job's pod
# names add `-worker-<i>`, and must stay within 63 characters too.
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_JOB_NAME = 47
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def job_name(model_uri: str, prefix: str = "trainer") -> str:
    """The job's name: the same for every attempt of one Trainer task, unique across tasks.

    A retried step finds the job its killed attempt left under this name.
    """
    digest = hashlib.sha256(model_uri.encode()).hexdigest()[:12]
    stem = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-") or "trainer"
    if not stem[0].isalpha():
        stem = f"t-{stem}"
    return f"{stem[: MAX_JOB_NAME - len(digest) - 1].rstrip('-')}-{digest}"


def is_dns_1035_label(name: str) -> bool:
    return len(name) <= 63 and bool(_DNS_1035.match(name))


def pod_name(job: str, replica_type: str, index: int) -> str:
    """The operator's name for a replica's pod (common.GenGeneralName)."""
    return f"{job}-{replica_type.lower()}-{index}"


def run_labels(run_id: str | None) -> dict[str, str]:
    """The label tying the job to its pipeline run, where the run id can be a label value."""
    if run_id and len(run_id) <= 63 and _LABEL_VALUE.match(run_id):
        return {RUN_ID_LABEL: run_id}
    return {}


def _pod_template(spec: TFJobSpec, labels: Mapping[str, str], args: Sequence[str]) -> dict:
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": spec.image,
        "command": list(spec.command),
        "args": list(args),
        "workingDir": spec.working_dir,
        "ports": [{"name": PORT_NAME, "containerPort": PORT}],
    }
    if spec.env:
        container["env"] = [dict(e) for e in spec.env]
    return {
        "metadata": {"labels": dict(labels), "annotations": dict(POD_ANNOTATIONS)},
        "spec": placed_pod_spec(spec, container),
    }


class PodPlacement(Protocol):
    """What places a pod: TFJobSpec's replicas, TuningSpec's worker pods."""

    @property
    def resources(self) -> Mapping[str, Any]: ...
    @property
    def node_selector(self) -> Mapping[str, str]: ...
    @property
    def tolerations(self) -> tuple[Mapping[str, Any], ...]: ...
    @property
    def service_account(self) -> str | None: ...


def placed_pod_spec(placement: PodPlacement, container: dict[str, Any], **fields: Any) -> dict:
    """A core/v1 PodSpec of the one `container`, given the placement's resources, and
    placed by its node selector, tolerations and service account; `fields`: more
    PodSpec fields (restartPolicy, say)."""
    container = dict(container)
    if placement.resources:
        container["resources"] = {k: dict(v) for k, v in placement.resources.items()}
    pod: dict[str, Any] = {**fields, "containers": [container]}
    if placement.node_selector:
        pod["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        pod["tolerations"] = [dict(t) for t in placement.tolerations]
    if placement.service_account:
        pod["serviceAccountName"] = placement.service_account
    return pod


def tfjob_manifest(
    spec: TFJobSpec,
    *,
    name: str,
    namespace: str,
    args: Sequence[str],
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The TFJob: a Chief and `spec.workers` Workers running `spec.command` + `args`."""
    if not is_dns_1035_label(name) or len(name) > MAX_JOB_NAME:
        raise ValueError(
            f"TFJob name {name!r} must be a DNS-1035 label of at most {MAX_JOB_NAME} characters"
        )
    labels = dict(labels or {})
    restart_policy = RETRYABLE_RESTART_POLICY if spec.backoff_limit else "Never"
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "runPolicy": {
                "activeDeadlineSeconds": spec.active_deadline_seconds,
                "backoffLimit": spec.backoff_limit,
                "cleanPodPolicy": spec.clean_pod_policy,
                "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
            },
            "tfReplicaSpecs": {
                replica_type: {
                    "replicas": count,
                    "restartPolicy": restart_policy,
                    "template": _pod_template(spec, labels, args),
                }
                for replica_type, count in ((CHIEF, 1), (WORKER, spec.workers))
            },
        },
    }


def replica_pod_names(manifest: Mapping[str, Any]) -> list[str]:
    """Every replica pod the operator starts for `manifest`, the Chief first."""
    name = manifest["metadata"]["name"]
    replicas = manifest["spec"]["tfReplicaSpecs"]
    return [
        pod_name(name, replica_type, index)
        for replica_type in (CHIEF, WORKER)
        for index in range(replicas.get(replica_type, {}).get("replicas", 0))
    ]
