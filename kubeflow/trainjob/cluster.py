"""The Kubernetes API calls of the Trainer step on a TrainJob, through the official client.

Seven calls: get the runtime; create, get and delete the TrainJob; list its
pods; read a pod's log (followed, or its last lines). Each is one of the
verbs the Kubeflow platform gives a profile's default-editor through
kubeflow-edit (kubeflow/trainer manifests/overlays/kubeflow-platform/
kubeflow-trainer-roles.yaml, v2.1.0 L13-68, v2.2.0 L13-49): nothing updates
a TrainJob, which v2.2.0's role no longer allows.
"""

from __future__ import annotations

import re
from typing import Any

from kubeflow.kubernetes_api import ClusterError
from kubeflow.training_job import PodLogs
from kubeflow.trainjob import naming
from kubeflow.trainjob.manifest import CONTAINER_NAME, GROUP, PLURAL, RUNTIME_PLURALS, VERSION

__all__ = ["REQUIRED_PERMISSIONS", "Cluster", "ClusterError"]

REQUIRED_PERMISSIONS = (
    "create, get, delete on trainjobs.trainer.kubeflow.org; get on the runtime "
    "(clustertrainingruntimes or trainingruntimes.trainer.kubeflow.org); list on pods; "
    "get on pods/log"
)
INSTALL_TRAINER = (
    "install Kubeflow Trainer v2 (the Kubeflow platform does from v1.11.0; standalone: "
    'kubectl apply --server-side -k "github.com/kubeflow/trainer.git/manifests/overlays/'
    'manager?ref=v2.1.0"; docs/training-on-several-nodes.md)'
)
_FORBIDDEN_USER = re.compile(r'User "system:serviceaccount:([^:"]+):([^"]+)"')


class Cluster(PodLogs):
    """The API calls the step makes, returning Kubernetes objects as plain JSON dicts."""

    PURPOSE = "create the TrainJob with"
    CONTAINER = CONTAINER_NAME
    JOB_RESOURCE = (GROUP, VERSION, PLURAL)
    PROPAGATION = "Foreground"

    def explain(self, action: str, status: int, reason: str, message: str) -> ClusterError:
        if status in (400, 403, 422) and "admission webhook" in message:
            return ClusterError(f"{action}: Trainer's webhook refused the job: {message}", status)
        if status == 422:
            return ClusterError(f"{action}: Trainer's CRD refused the job: {message}", status)
        if status == 403:
            user = _FORBIDDEN_USER.search(message)
            who = (
                f"service account {user.group(1)}/{user.group(2)}"
                if user
                else "the step's service account"
            )
            return ClusterError(
                f"Kubernetes refused to {action} for {who}: {message}. The Trainer step's "
                f"service account needs {REQUIRED_PERMISSIONS}. Multi-user Kubeflow: the "
                "profile's default-editor has them through kubeflow-edit (Trainer's "
                "kubeflow-platform overlay); single-user KFP: grant them to pipeline-runner "
                "(docs/training-on-several-nodes.md)",
                status,
            )
        if status == 404 and "trainer.kubeflow.org" in action:
            return ClusterError(
                f"{action}: the API has no {action.split()[1]} ({message}); {INSTALL_TRAINER}",
                status,
            )
        return super().explain(action, status, reason, message)

    def get_runtime(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        """The runtime, or None when there is none of that name (or no such resource)."""
        plural = RUNTIME_PLURALS[kind]
        if kind == "ClusterTrainingRuntime":
            return self._call(
                f"get {plural}.{GROUP} {name}",
                self._custom.get_cluster_custom_object,
                GROUP, VERSION, plural, name, gone=None,
            )  # fmt: skip
        return self._call(
            f"get {plural}.{GROUP} {namespace}/{name}",
            self._custom.get_namespaced_custom_object,
            GROUP, VERSION, namespace, plural, name, gone=None,
        )  # fmt: skip

    def create_trainjob(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return self.create_job(manifest)

    def get_trainjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.get_job(namespace, name)

    def delete_trainjob(self, namespace: str, name: str) -> bool:
        """Deletes the job; its JobSet, Jobs and pods go first (foreground)."""
        return self.delete_job(namespace, name)

    def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        """The job's node pods: JobSet labels them with its name, the TrainJob's."""
        return self.pods(namespace, f"{naming.JOBSET_NAME_LABEL}={job}")
