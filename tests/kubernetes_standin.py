"""A Kubernetes API on loopback that plays the Training Operator, for the TFJob tests
(and KServe, for the Deploy step's: tests/kserve_standin.py; and the kubelet, for
the Tune step's worker pods).

It answers the five calls the Trainer step makes (kubeflow/tfjob/
cluster.py), through the official client, over HTTP:

    POST   /apis/kubeflow.org/v1/namespaces/NS/tfjobs         create a TFJob
    GET    /apis/kubeflow.org/v1/namespaces/NS/tfjobs/NAME    the job, with its status
    DELETE /apis/kubeflow.org/v1/namespaces/NS/tfjobs/NAME    the job and its pods
    GET    /api/v1/namespaces/NS/pods?labelSelector=K=V      the job's pods
    GET    /api/v1/namespaces/NS/pods/POD/log                 a replica's log (follow, tail)

On create it does what training-operator release-1.9 does, in miniature: its
webhook's checks (a refused job gets the webhook's error), then a process per
replica, `<job>-chief-0` and `<job>-worker-<i>`, running the `tensorflow`
container's command in the project's environment with only the environment
the pod template gives (its `env`, secrets resolved from `secrets`) and the
TF_CONFIG the operator injects, with 127.0.0.1 ports instead of
`<job>-<type>-<i>.<ns>.svc:2222`. The job's conditions follow the operator's
rules: Running once started, Succeeded when the Chief exits 0, Failed when a
replica exits non-zero or the job runs past `activeDeadlineSeconds`; a
finished job's running pods are stopped (cleanPodPolicy Running).

Faults on demand: `forbid(verb, resource)` answers 403 as the API server's
RBAC does, naming the caller's service account (from its token);
`oom_kill(pod, after)` kills a replica (SIGKILL, exit 137, OOMKilled) once
its log has a line matching `after`; `crd_installed = False` is a cluster
without the operator (no tfjobs resource: 404); `outage(seconds)` answers
every call with 503 for a while.

Plain core/v1 Pods (the Tune step's workers, kubeflow/tuning/pods.py):

    POST   /api/v1/namespaces/NS/pods         create a pod
    GET    /api/v1/namespaces/NS/pods/NAME    the pod, with its status
    DELETE /api/v1/namespaces/NS/pods/NAME    the pod

A created pod is Pending, with no podIP and no container status, until the
next pass of the kubelet's loop here starts its one container as a process
(its command and args, its `env` only, in its `workingDir`); then Running,
podIP 127.0.0.1, the container `running`; once the process has exited and its
output is read, Succeeded (exit 0) or Failed, the container `terminated` with
its exit code. The phases follow the kubelet's rules for a pod of one
container with `restartPolicy: Never` (`Pod` below cites them).

Every resource request is recorded in `requests` as RBAC names it
(`request_info`, ported from the API server), and a call no step declares
(kubeflow/kubernetes_api.py, STEP_CALLS) fails the test when the stand-in
closes: tests/test_kubeflow_platform.py holds each declared call to the
Kubeflow platform's kubeflow-edit role.

Not reproduced: scheduling (resources, node selectors, tolerations), image
pulls, services and DNS, restarts (`restartPolicy`, `backoffLimit`: every
non-zero exit fails the job here; a pod's container is never restarted,
whatever its `restartPolicy`), init and sidecar containers,
`ttlSecondsAfterFinished`, watches, graceful pod termination (a deleted job's
replicas, and a deleted pod, are gone when the delete answers: no
`deletionTimestamp` phase, no SIGTERM before the SIGKILL), pod validation
beyond a duplicate name, and any other API call.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml

from tests.kserve_standin import KServeController

_TFJOBS = re.compile(r"^/apis/kubeflow\.org/v1/namespaces/([^/]+)/tfjobs(?:/([^/]+))?$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
_POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)$")
_POD_LOG = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/log$")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
WEBHOOK = "validator.tfjob.training-operator.kubeflow.org"


def request_info(method: str, url: str) -> tuple[str, str, str, str] | None:
    """(verb, group, resource[/subresource], namespace) of a resource request, as the API
    server resolves it for RBAC; None for any other path (kubernetes/apiserver v0.34.0,
    pkg/endpoints/request/requestinfo.go NewRequestInfo, L129-261: the verb from the method
    at L176-191, a GET without a name is a list, or a watch with `watch=true`, at L222-245,
    a DELETE without one a deletecollection at L256-259; namespaces/NS/ at L194-206, the
    subresource the third part at L212-221)."""
    parsed = urlparse(url)
    parts = [p for p in parsed.path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, parts = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, parts = parts[1], parts[3:]
    else:
        return None
    verb = {"POST": "create", "GET": "get", "PUT": "update", "PATCH": "patch"}.get(
        method, "delete" if method == "DELETE" else ""
    )
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 2:
        namespace, parts = parts[1], parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    if len(parts) >= 3:
        resource = f"{resource}/{parts[2]}"
    if not name and verb == "get":
        watch = parse_qs(parsed.query).get("watch", ["false"])[0].lower()
        verb = "watch" if watch not in ("false", "0") else "list"
    if not name and verb == "delete":
        verb = "deletecollection"
    return verb, group, resource, namespace


def undeclared_calls(requests: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str]]:
    """The calls recorded that no step declares (kubeflow/kubernetes_api.py, STEP_CALLS)."""
    from kubeflow.kubernetes_api import STEP_CALLS

    declared = {(c.verb, c.group, c.resource) for c in STEP_CALLS}
    return sorted({r[:3] for r in requests} - declared)


def webhook_errors(job: dict[str, Any]) -> list[str]:
    """The TFJob webhook's checks (pkg/webhooks/tensorflow/tfjob_webhook.go, release-1.9)."""
    errors = []
    name = job.get("metadata", {}).get("name", "")
    if len(name) > 63 or not _DNS_1035.match(name):
        errors.append(f"metadata.name: Invalid value: {name!r}: should match a DNS-1035 label")
    managed_by = job.get("spec", {}).get("runPolicy", {}).get("managedBy")
    if managed_by not in (None, "kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"):
        errors.append(f"spec.runPolicy.managedBy: Unsupported value: {managed_by!r}")
    specs = job.get("spec", {}).get("tfReplicaSpecs")
    if specs is None:
        errors.append("spec.tfReplicaSpecs: Required value: must be required")
        return errors
    chief_or_master = 0
    for replica_type, spec in specs.items():
        path = f"spec.tfReplicaSpecs[{replica_type}].template.spec.containers"
        containers = (spec or {}).get("template", {}).get("spec", {}).get("containers") or []
        if not containers:
            errors.append(f"{path}: Required value: must be specified")
        if replica_type in ("Chief", "Master"):
            chief_or_master += 1
        for i, container in enumerate(containers):
            if not container.get("image"):
                errors.append(f"{path}[{i}].image: Required value: must be required")
        if not any(c.get("name") == "tensorflow" for c in containers):
            errors.append(
                f"{path}: Required value: must have at least one container with name tensorflow"
            )
    if chief_or_master > 1:
        errors.append(
            "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role"
        )
    return errors


def downward_value(pod: dict[str, Any], ref: dict[str, Any]) -> str:
    """A downward-API env value: `metadata.name`, `metadata.namespace`,
    `metadata.labels['K']`, `metadata.annotations['K']` (the fields core/v1's
    ObjectFieldSelector allows of metadata; types.go). A missing label or
    annotation is the empty string, as the kubelet resolves it."""
    path = ref["fieldPath"]
    metadata = pod.get("metadata", {})
    if match := re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path):
        return (metadata.get(match.group(1)) or {}).get(match.group(2), "")
    if path in ("metadata.name", "metadata.namespace"):
        return metadata.get(path.split(".")[1], "")
    raise KeyError(f"fieldPath {path}")


def _parse_bool(value: str | None) -> bool:
    """A boolean query parameter, as the API server parses it (Go's strconv.ParseBool)."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(kw_only=True)
class ContainerRun:
    """A container run as a process: its output, and how it ended."""

    process: subprocess.Popen | None = None
    lines: list[tuple[str, str]] = field(default_factory=list)
    exit_code: int | None = None
    reason: str = ""
    killed_as: str = ""
    # The container has ended only once its whole output is in the log.
    log_closed: bool = False
    finished_at: str = ""

    def log_text(self, tail: int | None = None, timestamps: bool = False) -> str:
        lines = self.lines[-tail:] if tail else list(self.lines)
        return "".join(f"{t} {text}\n" if timestamps else f"{text}\n" for t, text in lines)


@dataclass
class Replica(ContainerRun):
    pod: str
    replica_type: str
    index: int
    namespace: str
    job: str
    port: int
    container: dict[str, Any]
    # Stopped by the operator when the job finished (cleanPodPolicy): its pod is deleted.
    cleaned_up: bool = False

    def pod_object(self) -> dict[str, Any]:
        if self.exit_code is None:
            phase, state = "Running", {"running": {"startedAt": _now()}}
        else:
            phase = "Succeeded" if self.exit_code == 0 else "Failed"
            reason = self.reason or ("Completed" if self.exit_code == 0 else "Error")
            state = {
                "terminated": {
                    "exitCode": self.exit_code,
                    "reason": reason,
                    "finishedAt": self.finished_at,
                }
            }
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.pod,
                "namespace": self.namespace,
                "labels": {
                    "training.kubeflow.org/job-name": self.job,
                    "training.kubeflow.org/operator-name": "tfjob-controller",
                    "training.kubeflow.org/replica-type": self.replica_type.lower(),
                    "training.kubeflow.org/replica-index": str(self.index),
                },
            },
            "status": {
                "phase": phase,
                "containerStatuses": [{"name": "tensorflow", "state": state}],
            },
        }


@dataclass
class Job:
    manifest: dict[str, Any]
    replicas: list[Replica]
    started: float
    conditions: list[dict[str, str]] = field(default_factory=list)

    @property
    def namespace(self) -> str:
        return self.manifest["metadata"]["namespace"]

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]

    def condition(self, kind: str, reason: str, message: str) -> None:
        now = _now()
        if kind != "Running":  # As the operator does: the job is no longer running.
            for c in self.conditions:
                if c["type"] == "Running":
                    c["status"] = "False"
        self.conditions.append(
            {"type": kind, "status": "True", "reason": reason, "message": message,
             "lastUpdateTime": now, "lastTransitionTime": now}
        )  # fmt: skip

    def finished(self) -> bool:
        return any(c["type"] in ("Succeeded", "Failed") for c in self.conditions)

    def body(self) -> dict[str, Any]:
        statuses: dict[str, dict[str, int]] = {}
        for r in self.replicas:
            counts = statuses.setdefault(r.replica_type, {"active": 0, "succeeded": 0, "failed": 0})
            key = "active" if r.exit_code is None else "succeeded" if r.exit_code == 0 else "failed"
            counts[key] += 1
        return {
            **self.manifest,
            "status": {"conditions": self.conditions, "replicaStatuses": statuses},
        }


# Where the phase rules below come from. The API: kubernetes/api v0.34.10 (Kubernetes
# 1.34), core/v1/types.go. The generic registry every resource's REST storage is
# (409, 404, what a delete returns): kubernetes/apiserver v0.34.0 to v0.34.9 (the
# API server's staging repository, published at each release),
# pkg/registry/generic/registry/store.go. The pod's own registry and the kubelet live
# only in kubernetes/kubernetes, which is too large to fetch at a tag; they are cited
# by function as stored by the project's source lookup (commit df5f02437d38):
# pkg/registry/core/pod/strategy.go, pkg/registry/core/pod/storage/storage.go and
# pkg/kubelet/kubelet_pods.go.
@dataclass
class Pod(ContainerRun):
    """A core/v1 Pod: the API server's object, its one container a subprocess (the kubelet's
    part). `pod` is its name, as a Replica's, so the log reader and the OOM fault serve both."""

    manifest: dict[str, Any]
    uid: str
    created_at: str
    started_at: str = ""
    # Every phase a GET could have seen, in order (the test checks the transitions).
    phases: list[str] = field(default_factory=list)
    # Put between `python` and the container's own arguments (the TrainJob stand-in's
    # name resolution, tests/trainjob_dns.py), and more of the process's environment.
    launcher: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def hostname(self) -> str:
        return self.manifest["spec"].get("hostname", "")

    @property
    def pod(self) -> str:
        return self.manifest["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.manifest["metadata"]["namespace"]

    @property
    def container(self) -> dict[str, Any]:
        return self.manifest["spec"]["containers"][0]

    def phase(self) -> str:
        # types.go lines 3476-3488: Pending until its containers have started; Running
        # while one runs; Succeeded when all exited 0, Failed when one did not. The
        # kubelet's getPhase (kubelet_pods.go) for a regular container under
        # restartPolicy Never: waiting -> Pending, running -> Running, all stopped ->
        # Succeeded if every exit code is 0, else Failed.
        if self.process is None and self.exit_code is None:
            return "Pending"
        if self.exit_code is None:
            return "Running"
        return "Succeeded" if self.exit_code == 0 else "Failed"

    def qos_class(self) -> str:
        # strategy.go PrepareForCreate sets qos.GetPodQOS(pod): BestEffort without any
        # request or limit. Guaranteed (requests equal to limits) is not told apart here.
        resources = [c.get("resources") for c in self.manifest["spec"].get("containers", [])]
        return "Burstable" if any(resources) else "BestEffort"

    def pod_object(self) -> dict[str, Any]:
        # strategy.go PrepareForCreate: a created pod's status is only its phase, Pending,
        # and its QoS class; the kubelet adds the rest once it runs the pod.
        status: dict[str, Any] = {"phase": self.phase(), "qosClass": self.qos_class()}
        name = self.container["name"]
        if self.process is not None or self.exit_code is not None:
            # types.go lines 5266-5269: podIP is empty until one is allocated (with the
            # pod's sandbox, before its containers start).
            status.update(
                podIP="127.0.0.1", podIPs=[{"ip": "127.0.0.1"}], startTime=self.started_at
            )
            if self.exit_code is None:
                state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
            else:
                state = {
                    "terminated": {
                        "exitCode": self.exit_code,
                        "reason": self.reason or ("Completed" if self.exit_code == 0 else "Error"),
                        "startedAt": self.started_at,
                        "finishedAt": self.finished_at,
                    }
                }
            # No image is pulled here: imageID (a digest on a cluster) is left empty.
            status["containerStatuses"] = [
                {"name": name, "state": state, "ready": self.exit_code is None,
                 "restartCount": 0, "image": self.container.get("image", ""), "imageID": "",
                 "containerID": f"containerd://{self.uid}"}
            ]  # fmt: skip
        metadata = {
            **self.manifest["metadata"],
            "uid": self.uid,
            "creationTimestamp": self.created_at,
        }
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                "spec": self.manifest["spec"], "status": status}  # fmt: skip

    def observed(self) -> dict[str, Any]:
        """The pod as a GET answers it, its phase recorded."""
        body = self.pod_object()
        phase = body["status"]["phase"]
        if not self.phases or self.phases[-1] != phase:
            self.phases.append(phase)
        return body


class KubernetesStandin:
    """The API server and the operator, in this process's threads; replicas as subprocesses."""

    def __init__(
        self,
        python: str,
        *,
        secrets: dict[str, dict[str, str]] | None = None,
        users: dict[str, str] | None = None,
        base_env: dict[str, str] | None = None,
    ) -> None:
        self.python = python
        self.secrets = secrets or {}
        # Bearer token -> the user the API server knows it as.
        self.users = users or {}
        self.base_env = base_env or {}
        self.jobs: dict[tuple[str, str], Job] = {}
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.forbidden: set[tuple[str, str]] = set()
        # False: a cluster without the operator, whose API has no tfjobs resource.
        self.crd_installed = True
        self._unavailable_until = 0.0
        self.kills: dict[str, tuple[re.Pattern, int]] = {}
        self.finished_jobs: list[Job] = []
        # core/v1 Pods created through the API (the Tune step's workers), and those deleted.
        self.pods: dict[tuple[str, str], Pod] = {}
        self.deleted_pods: list[Pod] = []
        # Every resource request, as RBAC sees it: (verb, group, resource, namespace).
        self.requests: list[tuple[str, str, str, str]] = []
        self._lock = threading.RLock()
        self._home = tempfile.mkdtemp(prefix="standin-home-")
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._stopping = threading.Event()
        # KServe's controller and predictors (tests/kserve_standin.py).
        self.kserve = KServeController(self.url)
        # Trainer v2 and JobSet (tests/trainjob_standin.py), when a test installs them.
        self.trainer: Any = None

    # --- the test's side -------------------------------------------------
    def __enter__(self) -> KubernetesStandin:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        threading.Thread(target=self._operate, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopping.set()
        with self._lock:
            for job in self.jobs.values():
                self._stop_replicas(job)
            for pod in self.pods.values():
                self._kill(pod)
        self._server.shutdown()
        undeclared = undeclared_calls(self.requests)
        if exc[0] is None and undeclared:
            raise AssertionError(
                f"Kubernetes calls no step declares: {undeclared}; add each to STEP_CALLS "
                "(kubeflow/kubernetes_api.py) and its kubeflow-edit rule to the table in "
                "docs/kubeflow-operations.md (tests/test_kubeflow_platform.py checks it)"
            )

    def kubeconfig(self, path: Path, *, namespace: str, token: str) -> Path:
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
                    "users": [{"name": "step", "user": {"token": token}}],
                    "contexts": [
                        {
                            "name": "standin",
                            "context": {
                                "cluster": "standin",
                                "user": "step",
                                "namespace": namespace,
                            },
                        }
                    ],
                    "current-context": "standin",
                }
            )
        )
        return path

    def forbid(self, verb: str, resource: str) -> None:
        self.forbidden.add((verb, resource))

    def oom_kill(self, pod_suffix: str, after: str, times: int = 1) -> None:
        """Kills the replica whose pod name ends with `pod_suffix` once its log matches `after`,
        in the next `times` jobs that have one."""
        self.kills[pod_suffix] = (re.compile(after), times)

    def outage(self, seconds: float) -> None:
        """Answers every call with 503 for `seconds` (an API server restarting)."""
        self._unavailable_until = time.monotonic() + seconds

    def clear_faults(self) -> None:
        self.forbidden.clear()
        self.kills.clear()

    def running_replicas(self) -> list[str]:
        with self._lock:
            return [
                r.pod
                for job in [*self.jobs.values(), *self.finished_jobs]
                for r in job.replicas
                if r.process is not None and r.process.poll() is None
            ]

    def replica_log(self, pod: str) -> str:
        with self._lock:
            for job in [*self.jobs.values(), *self.finished_jobs]:
                for r in job.replicas:
                    if r.pod == pod:
                        return r.log_text()
            for p in [*self.pods.values(), *self.deleted_pods]:
                if p.pod == pod:
                    return p.log_text()
        raise KeyError(pod)

    def running_pods(self) -> list[str]:
        """The created pods whose container process is still alive."""
        with self._lock:
            return [
                p.pod
                for p in [*self.pods.values(), *self.deleted_pods]
                if p.process is not None and p.process.poll() is None
            ]

    # --- the operator -----------------------------------------------------
    def _launch(self, manifest: dict[str, Any]) -> Job:
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        replicas = []
        for replica_type in ("Chief", "Master", "Worker", "PS", "Evaluator"):
            spec = manifest["spec"]["tfReplicaSpecs"].get(replica_type)
            if not spec:
                continue
            for index in range(spec.get("replicas", 1)):
                container = next(
                    c for c in spec["template"]["spec"]["containers"] if c["name"] == "tensorflow"
                )
                replicas.append(
                    Replica(
                        pod=f"{name}-{replica_type.lower()}-{index}",
                        replica_type=replica_type,
                        index=index,
                        namespace=namespace,
                        job=name,
                        port=_free_port(),
                        container=container,
                    )
                )
        job = Job(manifest=manifest, replicas=replicas, started=time.monotonic())
        job.condition("Created", "TFJobCreated", f"TFJob {name} is created.")
        cluster: dict[str, list[str]] = {}
        for r in replicas:
            cluster.setdefault(r.replica_type.lower(), []).append(f"127.0.0.1:{r.port}")
        for r in replicas:
            env = dict(self.base_env, HOME=self._home)
            try:
                env.update(self._container_env(r.container))
            except KeyError as missing:
                r.exit_code, r.reason = 1, "CreateContainerConfigError"
                r.lines.append((_now(), f"secret key {missing} not found"))
                continue
            if len(replicas) > 1:
                env["TF_CONFIG"] = json.dumps(
                    {
                        "cluster": cluster,
                        "task": {"type": r.replica_type.lower(), "index": r.index},
                        "environment": "cloud",
                    }
                )
            self._start(r, env)
        job.condition("Running", "TFJobRunning", f"TFJob {namespace}/{name} is running.")
        return job

    def _start(self, target: Replica | Pod, env: dict[str, str]) -> None:
        """Runs the container's command and args as a process, its output read into the log."""
        container = target.container
        command = [*container.get("command", []), *container.get("args", [])]
        if command and command[0] == "python":
            command[0] = self.python
            command[1:1] = getattr(target, "launcher", ())
        target.process = subprocess.Popen(
            command,
            cwd=container.get("workingDir") or None,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        threading.Thread(target=self._read_log, args=(target,), daemon=True).start()

    def _container_env(
        self, container: dict[str, Any], pod: dict[str, Any] | None = None
    ) -> dict[str, str]:
        env = {}
        for entry in container.get("env", []):
            if "value" in entry:
                env[entry["name"]] = str(entry["value"])
            elif "fieldRef" in entry["valueFrom"]:
                env[entry["name"]] = downward_value(pod or {}, entry["valueFrom"]["fieldRef"])
            else:
                ref = entry["valueFrom"]["secretKeyRef"]
                env[entry["name"]] = self.secrets[ref["name"]][ref["key"]]
        return env

    def _read_log(self, replica: ContainerRun) -> None:
        assert replica.process is not None and replica.process.stdout is not None
        for line in replica.process.stdout:
            with self._lock:
                replica.lines.append((_now(), line.rstrip("\n")))
                for suffix, (pattern, times) in list(self.kills.items()):
                    if (
                        (
                            replica.pod.endswith(suffix)
                            or getattr(replica, "hostname", "").endswith(suffix)
                        )
                        and not replica.killed_as
                        and pattern.search(line)
                    ):
                        replica.killed_as = "OOMKilled"
                        self._kill(replica)
                        if times > 1:
                            self.kills[suffix] = (pattern, times - 1)
                        else:
                            del self.kills[suffix]
        with self._lock:
            replica.log_closed = True

    @staticmethod
    def _kill(replica: ContainerRun) -> None:
        """SIGKILLs the replica and waits for it: once a delete has answered, none is running."""
        if replica.process is not None and replica.process.poll() is None:
            os.killpg(replica.process.pid, signal.SIGKILL)
            replica.process.wait(timeout=30)

    def _stop_replicas(self, job: Job) -> None:
        for r in job.replicas:
            self._kill(r)

    def _operate(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                for job in list(self.jobs.values()):
                    self._reconcile(job)
                for pod in list(self.pods.values()):
                    self._run_pod(pod)
                if self.trainer is not None:
                    self.trainer.reconcile()
            time.sleep(0.2)

    def _run_pod(self, pod: Pod) -> None:
        """The kubelet's part, one pass: start a pending pod's container; record its exit."""
        if pod.process is None and pod.exit_code is None:
            pod.started_at = _now()
            env = dict(self.base_env, HOME=self._home)
            try:
                env.update(self._container_env(pod.container, pod.manifest))
            except KeyError as missing:
                pod.exit_code, pod.reason, pod.finished_at = 1, "CreateContainerConfigError", _now()
                pod.lines.append((_now(), f"secret key {missing} not found"))
                return
            env.update(pod.extra_env)
            self._start(pod, env)
        elif pod.exit_code is None and pod.log_closed and pod.process.poll() is not None:
            code = pod.process.returncode
            pod.exit_code = 128 - code if code < 0 else code
            pod.reason, pod.finished_at = pod.killed_as, _now()

    def _reconcile(self, job: Job) -> None:
        for r in job.replicas:
            if r.exit_code is None and r.log_closed and r.process and r.process.poll() is not None:
                code = r.process.returncode
                r.exit_code = 128 - code if code < 0 else code
                r.reason, r.finished_at = r.killed_as, _now()
        if job.finished():
            return
        deadline = job.manifest["spec"].get("runPolicy", {}).get("activeDeadlineSeconds")
        failed = [r for r in job.replicas if r.exit_code not in (None, 0)]
        chief = next((r for r in job.replicas if r.replica_type in ("Chief", "Master")), None)
        if deadline is not None and time.monotonic() - job.started > deadline:
            job.condition(
                "Failed",
                "TFJobFailed",
                f"Job {job.name} has failed because it was active longer than specified deadline",
            )
        elif failed:
            kinds: dict[str, int] = {}
            for r in failed:
                kinds[r.replica_type] = kinds.get(r.replica_type, 0) + 1
            replica_type, count = next(iter(kinds.items()))
            job.condition(
                "Failed",
                "TFJobFailed",
                f"TFJob {job.namespace}/{job.name} has failed because {count} {replica_type} "
                "replica(s) failed.",
            )
        elif chief is not None and chief.exit_code == 0:
            job.condition(
                "Succeeded",
                "TFJobSucceeded",
                f"TFJob {job.namespace}/{job.name} successfully completed.",
            )
        policy = job.manifest["spec"].get("runPolicy", {}).get("cleanPodPolicy")
        if job.finished() and policy != "None":
            for r in job.replicas:
                if r.exit_code is None or policy == "All":
                    r.cleaned_up = True
            self._stop_replicas(job)

    # --- the API server ---------------------------------------------------
    def _tfjobs_route(self, path: str) -> re.Match | None:
        return _TFJOBS.match(path) if self.crd_installed else None

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def parse_request(self) -> bool:
                # Every request, recorded once its line and headers are read.
                if not super().parse_request():
                    return False
                info = request_info(self.command, self.path)
                if info is not None:
                    with standin._lock:
                        standin.requests.append(info)
                return True

            def _user(self) -> str:
                token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
                return standin.users.get(token, "system:anonymous")

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, message: str, **details) -> None:
                self._send(
                    code,
                    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": message, "reason": reason, "details": details, "code": code},
                )  # fmt: skip

            def _allowed(self, verb: str, resource: str, group: str, namespace: str) -> bool:
                if time.monotonic() < standin._unavailable_until:
                    self._status(
                        503,
                        "ServiceUnavailable",
                        "the server is currently unable to handle the request",
                    )
                    return False
                if (verb, resource) not in standin.forbidden:
                    return True
                qualified = f"{resource}.{group}" if group else resource
                in_group = f'in API group "{group}"' if group else 'in API group ""'
                self._status(
                    403,
                    "Forbidden",
                    f'{qualified} is forbidden: User "{self._user()}" cannot {verb} resource '
                    f'"{resource}" {in_group} in the namespace "{namespace}"',
                    group=group,
                    kind=resource,
                )
                return False

            def _kserve(self, method: str) -> bool:
                """Answers a call KServe's (or Trainer's) stand-in plays; False for any other."""
                path = urlparse(self.path).path
                if standin.trainer is not None and standin.trainer.answers(path):
                    standin.trainer.serve(self, method, path)
                    return True
                if not standin.kserve.answers(path):
                    return False
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                answer = standin.kserve.handle(method, path, raw)
                if answer is None:
                    self._status(405, "MethodNotAllowed", f"{method} is not supported here")
                else:
                    self._send(*answer)
                return True

            def do_PATCH(self) -> None:
                if not self._kserve("PATCH"):
                    self._status(
                        404, "NotFound", "the server could not find the requested resource"
                    )

            def do_POST(self) -> None:
                if self._kserve("POST"):
                    return None
                path = urlparse(self.path).path
                match = standin._tfjobs_route(path)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if pods := _PODS.match(path):
                    return self._create_pod(pods.group(1), body)
                if not match or match.group(2):
                    return self._status(
                        404, "NotFound", "the server could not find the requested resource"
                    )
                namespace = match.group(1)
                if not self._allowed("create", "tfjobs", "kubeflow.org", namespace):
                    return None
                errors = webhook_errors(body)
                if errors:
                    return self._status(
                        403,
                        "Forbidden",
                        f'admission webhook "{WEBHOOK}" denied the request: {"; ".join(errors)}',
                    )
                body.setdefault("metadata", {})["namespace"] = namespace
                name = body["metadata"]["name"]
                with standin._lock:
                    if (namespace, name) in standin.jobs:
                        return self._status(
                            409, "AlreadyExists", f'tfjobs.kubeflow.org "{name}" already exists'
                        )
                    body["metadata"].update(
                        uid=f"uid-{len(standin.created)}", creationTimestamp=_now()
                    )
                    standin.created.append(json.loads(json.dumps(body)))
                    job = standin._launch(body)
                    standin.jobs[(namespace, name)] = job
                    return self._send(201, job.body())

            def _create_pod(self, namespace: str, body: dict[str, Any]) -> None:
                if not self._allowed("create", "pods", "", namespace):
                    return None
                body.setdefault("metadata", {})["namespace"] = namespace
                body.pop("status", None)  # strategy.go PrepareForCreate: set by the system
                name = body["metadata"]["name"]
                with standin._lock:
                    # store.go line 527: a key that exists is AlreadyExists
                    # (pkg/storage/errors/storage.go lines 61-64).
                    if (namespace, name) in standin.pods:
                        return self._status(409, "AlreadyExists", f'pods "{name}" already exists')
                    uid = f"uid-pod-{len(standin.created)}"
                    standin.created.append(json.loads(json.dumps(body)))
                    pod = Pod(manifest=body, uid=uid, created_at=_now())
                    standin.pods[(namespace, name)] = pod
                    return self._send(201, pod.observed())

            def _pod(self, verb: str, namespace: str, name: str) -> None:
                if not self._allowed(verb, "pods", "", namespace):
                    return None
                if self.headers.get("Content-Length"):
                    self.rfile.read(int(self.headers["Content-Length"]))
                with standin._lock:
                    pod = standin.pods.get((namespace, name))
                    if pod is None:
                        # store.go lines 854 (get) and 1139 (delete): NotFound
                        # (storage.go lines 44-47, 97-100).
                        return self._status(404, "NotFound", f'pods "{name}" not found')
                    if verb == "get":
                        return self._send(200, pod.observed())
                    standin._kill(pod)
                    del standin.pods[(namespace, name)]
                    standin.deleted_pods.append(pod)
                    standin.deleted.append(name)
                    # A pod's delete answers with the pod, not a Status: the pod
                    # registry sets ReturnDeletedObject (pkg/registry/core/pod/storage/
                    # storage.go), which store.go lines 1390-1394 return as it is.
                    body = pod.pod_object()
                    body["metadata"]["deletionTimestamp"] = _now()
                    return self._send(200, body)

            def do_GET(self) -> None:
                if self._kserve("GET"):
                    return None
                url = urlparse(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                if match := standin._tfjobs_route(url.path):
                    namespace, name = match.groups()
                    if not self._allowed("get", "tfjobs", "kubeflow.org", namespace):
                        return None
                    with standin._lock:
                        job = standin.jobs.get((namespace, name))
                        if job is None:
                            return self._status(
                                404, "NotFound", f'tfjobs.kubeflow.org "{name}" not found'
                            )
                        return self._send(200, job.body())
                if match := _POD.match(url.path):
                    return self._pod("get", *match.groups())
                if match := _PODS.match(url.path):
                    namespace = match.group(1)
                    if not self._allowed("list", "pods", "", namespace):
                        return None
                    key, _, value = query.get("labelSelector", "").partition("=")
                    with standin._lock:
                        pods = [
                            r.pod_object()
                            for job in standin.jobs.values()
                            if job.namespace == namespace
                            for r in job.replicas
                            if not r.cleaned_up
                        ] + [
                            p.pod_object()
                            for p in standin.pods.values()
                            if p.namespace == namespace
                        ]
                    items = [
                        p
                        for p in pods
                        if not key or p["metadata"].get("labels", {}).get(key) == value
                    ]
                    return self._send(200, {"kind": "PodList", "apiVersion": "v1", "items": items})
                if match := _POD_LOG.match(url.path):
                    return self._log(*match.groups(), query)
                return self._status(
                    404, "NotFound", "the server could not find the requested resource"
                )

            def _log(self, namespace: str, pod: str, query: dict[str, str]) -> None:
                if not self._allowed("get", "pods/log", "", namespace):
                    return None
                with standin._lock:
                    replica = next(
                        (r for job in standin.jobs.values() if job.namespace == namespace
                         for r in job.replicas if r.pod == pod),
                        None,
                    ) or standin.pods.get((namespace, pod))  # fmt: skip
                if replica is None or getattr(replica, "cleaned_up", False):
                    return self._status(404, "NotFound", f'pods "{pod}" not found')
                timestamps = _parse_bool(query.get("timestamps"))
                if not _parse_bool(query.get("follow")):
                    tail = int(query["tailLines"]) if "tailLines" in query else None
                    data = replica.log_text(tail, timestamps).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return None
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                sent = 0
                while True:
                    with standin._lock:
                        lines = replica.lines[sent:]
                        ended = replica.exit_code is not None
                    for stamp, text in lines:
                        chunk = (f"{stamp} {text}\n" if timestamps else f"{text}\n").encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    sent += len(lines)
                    if ended and not lines:
                        break
                    time.sleep(0.1)
                self.wfile.write(b"0\r\n\r\n")
                return None

            def do_DELETE(self) -> None:
                if self._kserve("DELETE"):
                    return None
                if pod := _POD.match(urlparse(self.path).path):
                    return self._pod("delete", *pod.groups())
                match = standin._tfjobs_route(urlparse(self.path).path)
                if not match or not match.group(2):
                    return self._status(
                        404, "NotFound", "the server could not find the requested resource"
                    )
                namespace, name = match.groups()
                if not self._allowed("delete", "tfjobs", "kubeflow.org", namespace):
                    return None
                if self.headers.get("Content-Length"):
                    self.rfile.read(int(self.headers["Content-Length"]))
                with standin._lock:
                    job = standin.jobs.pop((namespace, name), None)
                    if job is None:
                        return self._status(
                            404, "NotFound", f'tfjobs.kubeflow.org "{name}" not found'
                        )
                    standin._stop_replicas(job)
                    standin.finished_jobs.append(job)
                    standin.deleted.append(name)
                return self._send(
                    200,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Success",
                        "details": {"name": name},
                    },
                )

        return Handler
