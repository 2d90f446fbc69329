"""The Kubernetes API calls of the Trainer step, through the official client.

Five calls: create, get and delete a TFJob; list the job's pods; read a
pod's log (followed, or its last lines: kubeflow/training_job.py's
PodLogs). The Training Operator's own SDK (`kubeflow-training`) wraps
the same calls, but needs kubernetes >= 27, which TFX 1.16 and kfp 2.5
(kubernetes < 27) exclude from the image.

The client, and how a call's failure becomes a ClusterError, are
kubeflow/kubernetes_api.py's; this module says what a refusal means here.
"""

from __future__ import annotations

import re
from typing import Any

from kubeflow.kubernetes_api import ClusterError
from kubeflow.tfjob.manifest import CONTAINER_NAME, GROUP, JOB_NAME_LABEL, PLURAL, VERSION
from kubeflow.training_job import PodLogs

# What the step's service account must be allowed, for the error that says so.
REQUIRED_PERMISSIONS = "create, get, delete on tfjobs.kubeflow.org; list on pods; get on pods/log"
_FORBIDDEN_USER = re.compile(r'User "system:serviceaccount:([^:"]+):([^"]+)"')


class Cluster(PodLogs):
    """The API calls the step makes, returning Kubernetes objects as plain JSON dicts."""

    PURPOSE = "create the TFJob with"
    CONTAINER = CONTAINER_NAME
    JOB_RESOURCE = (GROUP, VERSION, PLURAL)

    def explain(self, action: str, status: int, reason: str, message: str) -> ClusterError:
        if status == 403 and "admission webhook" in message:
            return ClusterError(
                f"{action}: the Training Operator's webhook refused the job: {message}", status
            )
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
                "profile's default-editor gets them through kubeflow-edit once the Training "
                "Operator is installed with its kubeflow overlay; single-user KFP: the "
                "pipeline-runner role (docs/training-on-several-nodes.md)",
                status,
            )
        if status == 404 and action.startswith("create tfjobs"):
            return ClusterError(
                f"{action}: the API has no tfjobs.kubeflow.org ({message}). Install the Kubeflow "
                "Training Operator (release-1.9: its standalone overlay, or its kubeflow overlay "
                "in a multi-user Kubeflow; docs/training-on-several-nodes.md)",
                status,
            )
        return super().explain(action, status, reason, message)

    def create_tfjob(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return self.create_job(manifest)

    def get_tfjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.get_job(namespace, name)

    def delete_tfjob(self, namespace: str, name: str) -> bool:
        return self.delete_job(namespace, name)

    def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        """The job's replica pods (the operator labels them with the job's name)."""
        return self.pods(namespace, f"{JOB_NAME_LABEL}={job}")
