"""Kubeflow Trainer v2 and JobSet, inside tests/kubernetes_standin.py, for the TrainJob tests.

The calls the Trainer step makes (kubeflow/trainjob/cluster.py):

    GET    /apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/NAME
    GET    /apis/trainer.kubeflow.org/v1alpha1/namespaces/NS/trainingruntimes/NAME
    POST   /apis/trainer.kubeflow.org/v1alpha1/namespaces/NS/trainjobs
    GET    /apis/trainer.kubeflow.org/v1alpha1/namespaces/NS/trainjobs/NAME
    DELETE /apis/trainer.kubeflow.org/v1alpha1/namespaces/NS/trainjobs/NAME

and the pod list and log calls, which kubernetes_standin.py answers for the
pods made here. Each rule is ported from kubeflow/trainer v2.1.0 and v2.2.0
and kubernetes-sigs/jobset v0.10.1 and v0.11.0 (the names in
kubeflow/trainjob/naming.py, which cites them); in the order they apply:

1. Admission of a TrainJob (the API server's order: defaults, schema, CEL,
   then validating webhooks). The CRD's defaults: runtimeRef.apiGroup
   `trainer.kubeflow.org`, runtimeRef.kind `ClusterTrainingRuntime`,
   `suspend: false`, `managedBy: trainer.kubeflow.org/trainjob-controller`
   (trainjob_types.go v2.1.0 L131-146, L158-168). Fields the schema does not
   have are pruned, as the API server does without `fieldValidation=Strict`
   (the client sends none), and recorded in `warnings`; a value of the wrong
   type or a broken CEL name rule is 422 Invalid (tests/trainer_crds.py, on
   the committed excerpt of the tag the stand-in plays). Trainer's webhook
   refuses a TrainJob whose runtime does not exist (pkg/webhooks/
   trainjob_webhook.go v2.1.0 L48-60; pkg/runtime/core/
   clustertrainingruntime.go L84-93, trainingruntime.go L252-262).
2. Trainer's controller builds the JobSet from the runtime (no ML policy:
   PlainML, plainml.go v2.1.0 L45-66): named as the TrainJob, owned by it;
   the trainer's replicated job forced to one Job (builder.go L120-123), its
   `node` container given the TrainJob's image, command, args, resources
   and env (upserted over the runtime's, L125-166), parallelism and
   completions set to numNodes (jobset.go L261-265).
3. JobSet's webhook defaults it (jobset_webhook.go v0.10.1 L112-139:
   successPolicy All, completionMode Indexed, restartPolicy OnFailure where
   unset, enableDNSHostnames and publishNotReadyAddresses true) and checks
   the longest pod name (L221-243). Its controller makes the headless
   service named by the subdomain (jobset_controller.go L625-646) and one
   Job per replica, `<jobset>-<rjob>-<i>`, labelled and annotated
   (L695-712, L765-797).
4. The Job controller (Kubernetes' own, not fetched here: by its documented
   behaviour for Indexed Jobs) makes a pod per completion index,
   `<job>-<index>-<5 random characters>`, hostname `<job>-<index>`,
   subdomain from the Job, the `batch.kubernetes.io/job-completion-index`
   annotation and label, and JOB_COMPLETION_INDEX in every container from
   that annotation. A failed pod fails the Job past `backoffLimit`, and past
   `activeDeadlineSeconds` the Job fails; then its running pods are deleted.
5. Status: JobSet Completed (AllJobsCompleted, "jobset completed
   successfully", jobset_controller.go L1004-1032) once every Job has, or
   Failed (FailedJobs, "jobset failed due to one or more job failures
   (first failed job: NAME)", failure_policy.go L48-57, L337-339) once one
   has; on either, its active Jobs are deleted (L162-165). Trainer copies
   those as the TrainJob's `Complete` and `Failed` conditions (jobset.go
   v2.1.0 L309-323) and the replicated jobs' counts as `jobsStatus`;
   Trainer v2 sets no Created or Running condition on a TrainJob.
6. Deletion: a TrainJob deleted with propagationPolicy Foreground stays,
   with a deletionTimestamp and the `foregroundDeletion` finalizer, until
   the garbage collector has deleted its JobSet, Jobs and pods; Background
   removes it at once and its dependents after (kubernetes/apiserver v0.34.0
   pkg/registry/generic/registry/store.go L976-996, L1165-1189).

RBAC: the verbs Trainer's kubeflow-platform overlay gives kubeflow-edit
(manifests/overlays/kubeflow-platform/kubeflow-trainer-roles.yaml, v2.1.0
L21-68, v2.2.0 L20-49) are `EDIT_RULES`; the stand-in refuses any other
verb on these resources with 403, as the API server's RBAC does.

The nodes' pods run as processes on 127.0.0.1 (kubernetes_standin.py's
kubelet). There is no DNS here: each node pod gets a loopback port, and
tests/trainjob_dns.py, started before the container's own module, resolves
the JobSet's names to those ports, refusing a name no pod of the JobSet has.

Not reproduced: scheduling, images, the real Job controller's pod
replacement and backoff timing, a JobSet's restarts (failurePolicy),
suspend and Kueue, initializers, other ML policies, watches, the events
Trainer records, a runtime's own webhook checks, and graceful termination.
"""

from __future__ import annotations

import copy
import json
import random
import re
import string
import time
from dataclasses import dataclass, field
from typing import Any

from kubeflow.trainjob import naming
from tests import trainer_crds
from tests.kubernetes_standin import Pod, _free_port, _now

_PREFIX = "/apis/trainer.kubeflow.org/v1alpha1"
_CLUSTER_RUNTIME = re.compile(rf"^{_PREFIX}/clustertrainingruntimes(?:/([^/]+))?$")
_NAMESPACED = re.compile(
    rf"^{_PREFIX}/namespaces/([^/]+)/(trainjobs|trainingruntimes)(?:/([^/]+))?$"
)
WEBHOOK = "validator.trainjob.trainer.kubeflow.org"
CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
# kubeflow-trainer-roles.yaml, kubeflow-trainer-edit (what a profile's default-editor
# gets through kubeflow-edit): resource -> verbs, per Trainer release.
EDIT_RULES = {
    "v2.1.0": {  # L21-68
        ("clustertrainingruntimes", "trainer.kubeflow.org"): {"get", "list", "watch"},
        ("trainingruntimes", "trainer.kubeflow.org"): {"get", "list", "watch"},
        ("trainjobs", "trainer.kubeflow.org"): {
            "create",
            "delete",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        },
        ("pods", ""): {"list"},
        ("pods/log", ""): {"get"},
    },
    "v2.2.0": {  # L20-49; clustertrainingruntimes: every authenticated user (L69-94)
        ("clustertrainingruntimes", "trainer.kubeflow.org"): {"get", "list", "watch"},
        ("trainingruntimes", "trainer.kubeflow.org"): {"get", "list", "watch"},
        ("trainjobs", "trainer.kubeflow.org"): {
            "create",
            "patch",
            "get",
            "list",
            "watch",
            "delete",
        },
        ("pods", ""): {"get", "list", "watch"},
        ("pods/log", ""): {"get", "list", "watch"},
    },
}  # fmt: skip
JOBSET_TAG = {"v2.1.0": "v0.10.1", "v2.2.0": "v0.11.0"}


def _suffix(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(5))


@dataclass
class Job:
    """One child Job of a JobSet: its object, pods and outcome."""

    manifest: dict[str, Any]
    pods: list[Pod] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    outcome: str = ""  # "", Complete, Failed
    reason: str = ""

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]


@dataclass
class TrainJob:
    manifest: dict[str, Any]
    jobset: dict[str, Any] | None = None
    service: dict[str, Any] | None = None
    jobs: list[Job] = field(default_factory=list)
    conditions: list[dict[str, Any]] = field(default_factory=list)
    jobset_conditions: list[dict[str, Any]] = field(default_factory=list)
    deleting: bool = False

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.manifest["metadata"]["namespace"]

    def body(self) -> dict[str, Any]:
        status: dict[str, Any] = {}
        if self.conditions:
            status["conditions"] = self.conditions
        if self.jobs:
            status["jobsStatus"] = [self.jobs_status()]
        return {**self.manifest, **({"status": status} if status else {})}

    def jobs_status(self) -> dict[str, Any]:
        done = [j for j in self.jobs if j.outcome]
        return {
            "name": naming.NODE,
            "ready": sum(1 for j in self.jobs if not j.outcome and all(p.process for p in j.pods)),
            "succeeded": sum(1 for j in done if j.outcome == "Complete"),
            "failed": sum(1 for j in done if j.outcome == "Failed"),
            "active": len(self.jobs) - len(done),
            "suspended": 0,
        }


class TrainerController:
    """Trainer v2's API, webhook and controller, JobSet's and the Job controller, in miniature."""

    def __init__(self, standin, tag: str = "v2.1.0", seed: int = 0) -> None:
        self.standin = standin
        self.tag = tag
        self.schemas = trainer_crds.load(tag)
        self.runtimes: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.trainjobs: dict[tuple[str, str], TrainJob] = {}
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.gone: list[TrainJob] = []
        self.warnings: list[str] = []
        # What the garbage collector deleted, in order (kind/name).
        self.collected: list[str] = []
        self.crd_installed = True
        self._rng = random.Random(seed)
        standin.trainer = self

    # --- the test's side ---------------------------------------------------
    def install_runtime(self, manifest: dict[str, Any]) -> None:
        namespace = manifest["metadata"].get("namespace", "")
        self.runtimes[(manifest["kind"], namespace, manifest["metadata"]["name"])] = manifest

    def node_pods(self, name: str) -> list[Pod]:
        return [p for tj in [*self.trainjobs.values(), *self.gone] if tj.name == name
                for job in tj.jobs for p in job.pods]  # fmt: skip

    # --- the API server ------------------------------------------------------
    def answers(self, path: str) -> bool:
        return path.startswith(_PREFIX + "/")

    def serve(self, handler, method: str, path: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        cluster = _CLUSTER_RUNTIME.match(path)
        namespaced = _NAMESPACED.match(path)
        if not self.crd_installed or not (cluster or namespaced):
            return handler._status(
                404, "NotFound", "the server could not find the requested resource"
            )
        if cluster:
            plural, namespace, name = "clustertrainingruntimes", "", cluster.group(1)
        else:
            namespace, plural, name = namespaced.groups()
        verb = {"POST": "create", "GET": "get" if name else "list", "DELETE": "delete",
                "PUT": "update", "PATCH": "patch"}[method]  # fmt: skip
        if (verb not in EDIT_RULES[self.tag].get((plural, "trainer.kubeflow.org"), set())
                and (verb, plural) not in self.standin.forbidden):  # fmt: skip
            self.standin.forbidden.add((verb, plural))  # RBAC: not in the profile's role
        if not handler._allowed(verb, plural, "trainer.kubeflow.org", namespace or "-"):
            return None
        with self.standin._lock:
            if plural != "trainjobs":
                kind = "ClusterTrainingRuntime" if cluster else "TrainingRuntime"
                runtime = self.runtimes.get((kind, namespace, name))
                if runtime is None:
                    return handler._status(
                        404, "NotFound", f'{plural}.trainer.kubeflow.org "{name}" not found'
                    )
                return handler._send(200, runtime)
            if method == "POST":
                return self._create(handler, namespace, json.loads(raw))
            job = self.trainjobs.get((namespace, name))
            if job is None:
                return handler._status(
                    404, "NotFound", f'trainjobs.trainer.kubeflow.org "{name}" not found'
                )
            if method == "GET":
                return handler._send(200, job.body())
            if method == "DELETE":
                options = json.loads(raw) if raw else {}
                return handler._send(200, self._delete(job, options.get("propagationPolicy")))
        return handler._status(405, "MethodNotAllowed", f"{method} is not supported here")

    def _invalid(self, handler, name: str, causes: list[str]) -> None:
        handler._status(
            422, "Invalid",
            f'TrainJob.trainer.kubeflow.org "{name}" is invalid: {"; ".join(causes)}',
        )  # fmt: skip

    def _create(self, handler, namespace: str, body: dict[str, Any]) -> None:
        body.setdefault("metadata", {})["namespace"] = namespace
        name = body["metadata"].get("name", "")
        # 1. The CRD's defaults (trainjob_types.go v2.1.0 L131-146, L158-168).
        spec = body.setdefault("spec", {})
        ref = spec.setdefault("runtimeRef", {})
        ref.setdefault("apiGroup", "trainer.kubeflow.org")
        ref.setdefault("kind", "ClusterTrainingRuntime")
        spec.setdefault("suspend", False)
        spec.setdefault("managedBy", CONTROLLER)
        # 2. The schema: unknown fields pruned (a warning), wrong values refused.
        schema = self.schemas["trainjobs"]["schema"]
        problems = trainer_crds.errors(body, schema)
        unknown = [p for p in problems if "unknown field" in p]
        for problem in unknown:
            self.warnings.append(problem)
            _prune(body, problem.split(":")[0])
        invalid = [p for p in problems if p not in unknown and "CEL rule" not in p]
        # CEL on the object (trainjob_types.go v2.1.0 L37-38).
        if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name):
            invalid.append(
                "<root>: Invalid value: metadata.name must match RFC 1035 DNS label format"
            )
        if len(name) > 63:
            invalid.append(
                "<root>: Invalid value: metadata.name must be no more than 63 characters"
            )
        if spec.get("managedBy") not in (CONTROLLER, "kueue.x-k8s.io/multikueue"):
            invalid.append(
                "spec.managedBy: Invalid value: ManagedBy must be trainer.kubeflow.org/"
                "trainjob-controller or kueue.x-k8s.io/multikueue if set"
            )
        if invalid:
            return self._invalid(handler, name, invalid)
        if (namespace, name) in self.trainjobs:
            return handler._status(
                409, "AlreadyExists", f'trainjobs.trainer.kubeflow.org "{name}" already exists'
            )
        # 4. Trainer's validating webhook: the runtime must exist.
        kind = ref["kind"]
        runtime = self.runtimes.get(
            (kind, namespace if kind == "TrainingRuntime" else "", ref["name"])
        )
        if runtime is None:
            plural = (
                "clustertrainingruntimes"
                if kind == "ClusterTrainingRuntime"
                else "trainingruntimes"
            )
            what = (
                "clusterTrainingRuntime" if kind == "ClusterTrainingRuntime" else "trainingRuntime"
            )
            path = "spec.RuntimeRef" if kind == "ClusterTrainingRuntime" else "spec.runtimeRef"
            return handler._status(
                403, "Forbidden",
                f'admission webhook "{WEBHOOK}" denied the request: {path}: Invalid value: '
                f'{json.dumps(ref)}: {plural}.trainer.kubeflow.org "{ref["name"]}" not found: '
                f"specified {what} must be created before the TrainJob is created",
            )  # fmt: skip
        body["metadata"].update(
            uid=f"uid-tj-{len(self.created)}", creationTimestamp=_now(), generation=1
        )
        self.created.append(copy.deepcopy(body))
        job = TrainJob(manifest=body)
        self.trainjobs[(namespace, name)] = job
        self._build(job, runtime)
        return handler._send(201, job.body())

    def _delete(self, job: TrainJob, policy: str | None) -> dict[str, Any]:
        self.deleted.append(job.name)
        if policy == "Foreground":
            # store.go L976-996: the finalizer; L1165-1189: the object answered, not deleted.
            job.deleting = True
            job.manifest["metadata"]["deletionTimestamp"] = _now()
            job.manifest["metadata"]["finalizers"] = ["foregroundDeletion"]
            return job.body()
        del self.trainjobs[(job.namespace, job.name)]
        self.gone.append(job)
        self._collect(job)
        details = {"name": job.name, "group": "trainer.kubeflow.org", "kind": "trainjobs"}
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": details}

    def _collect(self, job: TrainJob) -> None:
        """The garbage collector: pods, then Jobs, then the JobSet and its service."""
        for child in job.jobs:
            for pod in child.pods:
                self._delete_pod(pod)
            self.collected.append(f"Job/{child.name}")
        if job.jobset is not None:
            self.collected.append(f"JobSet/{job.name}")

    def _delete_pod(self, pod: Pod) -> None:
        key = (pod.namespace, pod.pod)
        if key in self.standin.pods:
            self.standin._kill(pod)
            del self.standin.pods[key]
            self.standin.deleted_pods.append(pod)
            self.collected.append(f"Pod/{pod.pod}")

    # --- Trainer's and JobSet's controllers ----------------------------------------
    def _build(self, job: TrainJob, runtime: dict[str, Any]) -> None:
        """Trainer builds the JobSet; JobSet's webhook defaults it; its controller makes
        the service and Jobs; the Job controller makes the pods."""
        trainer = job.manifest["spec"].get("trainer") or {}
        jobset_spec = copy.deepcopy(runtime["spec"]["template"]["spec"])
        for rjob in jobset_spec["replicatedJobs"]:
            template = rjob["template"]
            labels = (template.get("metadata") or {}).get("labels") or {}
            if labels.get(naming.ANCESTOR_LABEL) != naming.ANCESTOR_TRAINER:
                continue
            rjob["replicas"] = 1  # builder.go L120-123
            job_spec = template["spec"]
            count = trainer.get("numNodes") or job_spec.get("parallelism") or 1  # plainml.go L51-56
            job_spec["parallelism"] = job_spec["completions"] = count  # jobset.go L261-265
            for container in job_spec["template"]["spec"]["containers"]:
                if container["name"] != naming.NODE:
                    continue
                for key in ("image", "command", "args"):  # builder.go L128-138
                    if key in trainer:
                        container[key] = copy.deepcopy(trainer[key])
                if trainer.get("resourcesPerNode"):  # L147-159
                    container["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
                _upsert_env(container, trainer.get("env") or [])  # L160-163
        # JobSet's webhook defaults (jobset_webhook.go v0.10.1 L112-139).
        jobset_spec.setdefault("successPolicy", {"operator": "All"})
        jobset_spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
        for rjob in jobset_spec["replicatedJobs"]:
            rjob.setdefault("replicas", 1)
            rjob["template"]["spec"].setdefault("completionMode", "Indexed")
            pod_spec = rjob["template"]["spec"]["template"]["spec"]
            pod_spec.setdefault("restartPolicy", "OnFailure")
        network = jobset_spec.setdefault("network", {})
        network.setdefault("enableDNSHostnames", True)
        network.setdefault("publishNotReadyAddresses", True)
        job.jobset = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": job.name, "namespace": job.namespace,
                         "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1",
                                              "kind": "TrainJob", "name": job.name,
                                              "uid": job.manifest["metadata"]["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": jobset_spec,
        }  # fmt: skip
        subdomain = naming.subdomain(job.name, network.get("subdomain"))
        if network["enableDNSHostnames"]:
            job.service = {"metadata": {"name": subdomain, "namespace": job.namespace},
                           "spec": {"clusterIP": "None",
                                    "selector": {naming.JOBSET_NAME_LABEL: job.name},
                                    "publishNotReadyAddresses":
                                        network["publishNotReadyAddresses"]}}  # fmt: skip
        addresses: dict[str, str] = {}
        pods: list[Pod] = []
        for rjob in jobset_spec["replicatedJobs"]:
            for job_index in range(rjob["replicas"]):
                child = self._job(job, rjob, job_index, subdomain)
                job.jobs.append(child)
                pods += child.pods
        for pod in pods:
            port = next(
                (p["containerPort"] for c in pod.manifest["spec"]["containers"]
                 for p in c.get("ports", [])), None,
            )  # fmt: skip
            loopback = _free_port()
            host = f"{pod.hostname}.{pod.manifest['spec'].get('subdomain', '')}.{job.namespace}.svc"
            addresses[f"{host}:{port}"] = f"127.0.0.1:{loopback}"
        for pod in pods:
            pod.launcher = ("-m", "tests.trainjob_dns")
            pod.extra_env = {"STANDIN_DNS": json.dumps(addresses, sort_keys=True)}
            self.standin.pods[(pod.namespace, pod.pod)] = pod

    def _job(self, job: TrainJob, rjob: dict[str, Any], job_index: int, subdomain: str) -> Job:
        jobset = job.name
        name = naming.job_name(jobset, rjob["name"], job_index)  # jobset_controller.go L699
        marks = {
            naming.JOBSET_NAME_LABEL: jobset,
            "jobset.sigs.k8s.io/jobset-uid": f"uid-js-{jobset}",
            naming.REPLICATED_JOB_LABEL: rjob["name"],
            "jobset.sigs.k8s.io/restart-attempt": "0",
            "jobset.sigs.k8s.io/replicatedjob-replicas": str(rjob["replicas"]),
            "jobset.sigs.k8s.io/global-replicas": str(rjob["replicas"]),
            naming.JOB_INDEX_LABEL: str(job_index),
            "jobset.sigs.k8s.io/job-global-index": str(job_index),
        }  # L765-797
        template = copy.deepcopy(rjob["template"])
        metadata = template.get("metadata") or {}
        manifest = {
            "metadata": {"name": name, "namespace": job.namespace,
                         "labels": {**(metadata.get("labels") or {}), **marks},
                         "annotations": {**(metadata.get("annotations") or {}), **marks}},
            "spec": template["spec"],
        }  # fmt: skip
        pod_template = manifest["spec"]["template"]
        pod_meta = pod_template.setdefault("metadata", {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **marks}
        pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **marks}
        pod_template["spec"]["subdomain"] = subdomain  # L708-712
        child = Job(manifest=manifest)
        for index in range(manifest["spec"]["completions"]):
            child.pods.append(self._pod(child, index))
        return child

    def _pod(self, child: Job, index: int) -> Pod:
        """The Job controller's pod for one completion index."""
        template = copy.deepcopy(child.manifest["spec"]["template"])
        metadata = template["metadata"]
        completion = {naming.COMPLETION_INDEX_ANNOTATION: str(index)}
        metadata["labels"] = {**metadata["labels"], **completion}
        metadata["annotations"] = {**metadata["annotations"], **completion}
        metadata["name"] = f"{child.name}-{index}-{_suffix(self._rng)}"
        metadata["namespace"] = child.manifest["metadata"]["namespace"]
        metadata["ownerReferences"] = [{"kind": "Job", "name": child.name, "controller": True}]
        template["spec"]["hostname"] = f"{child.name}-{index}"
        for container in template["spec"]["containers"]:
            if not any(e["name"] == naming.COMPLETION_INDEX_ENV for e in container.get("env", [])):
                path = f"metadata.annotations['{naming.COMPLETION_INDEX_ANNOTATION}']"
                container.setdefault("env", []).append(
                    {"name": naming.COMPLETION_INDEX_ENV,
                     "valueFrom": {"fieldRef": {"fieldPath": path}}}
                )  # fmt: skip
        uid = f"uid-pod-{metadata['name']}"
        return Pod(manifest={"metadata": metadata, "spec": template["spec"]}, uid=uid,
                   created_at=_now())  # fmt: skip

    def reconcile(self) -> None:
        """One pass of the Job, JobSet, Trainer and garbage-collector controllers."""
        for job in list(self.trainjobs.values()):
            if job.deleting:
                self._collect(job)
                del self.trainjobs[(job.namespace, job.name)]
                self.gone.append(job)
                continue
            for child in job.jobs:
                if child.outcome:
                    continue
                spec = child.manifest["spec"]
                failed = [p for p in child.pods if p.exit_code not in (None, 0)]
                deadline = spec.get("activeDeadlineSeconds")
                if len(failed) > spec.get("backoffLimit", 6):
                    child.outcome, child.reason = "Failed", "BackoffLimitExceeded"
                elif deadline is not None and time.monotonic() - child.started > deadline:
                    child.outcome, child.reason = "Failed", "DeadlineExceeded"
                elif all(p.exit_code == 0 for p in child.pods):
                    child.outcome, child.reason = "Complete", ""
                if child.outcome == "Failed":  # its running pods go
                    for pod in child.pods:
                        if pod.exit_code is None:
                            self._delete_pod(pod)
            self._status(job)

    def _status(self, job: TrainJob) -> None:
        if job.jobset_conditions:
            return
        failed = [j for j in job.jobs if j.outcome == "Failed"]
        now = _now()
        if failed:
            condition = {"type": "Failed", "status": "True", "reason": "FailedJobs",
                         "message": f"jobset failed due to one or more job failures "
                                    f"(first failed job: {failed[0].name})"}  # fmt: skip
        elif job.jobs and all(j.outcome == "Complete" for j in job.jobs):
            condition = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                         "message": "jobset completed successfully"}  # fmt: skip
        else:
            return
        condition["lastTransitionTime"] = now
        job.jobset_conditions.append(condition)
        for child in job.jobs:  # jobset_controller.go L162-165: active Jobs deleted
            if not child.outcome:
                for pod in child.pods:
                    self._delete_pod(pod)
        copied = dict(condition, type="Complete" if condition["type"] == "Completed" else "Failed")
        copied["observedGeneration"] = job.manifest["metadata"]["generation"]
        job.conditions.append(copied)


def _upsert_env(container: dict[str, Any], env: list[dict[str, Any]]) -> None:
    """apply.UpsertEnvVars: an entry of the same name is replaced in place, others appended."""
    current = container.setdefault("env", [])
    for entry in env:
        for i, existing in enumerate(current):
            if existing["name"] == entry["name"]:
                current[i] = copy.deepcopy(entry)
                break
        else:
            current.append(copy.deepcopy(entry))


def _prune(body: dict[str, Any], path: str) -> None:
    """Drops the field at `path` (a.b[0].c), as the API server prunes an unknown one."""
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    target: Any = body
    for part in parts[:-1]:
        target = target[int(part[1:-1])] if part.startswith("[") else target[part]
    target.pop(parts[-1], None)
