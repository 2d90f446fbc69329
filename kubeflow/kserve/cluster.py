"""The Kubernetes API calls of the Deploy step, through the official client.

An InferenceService is read, created, patched (a JSON merge patch, so that
`null` removes `canaryTrafficPercent`) and, when a first version fails,
deleted; the predictor's service account and its secrets are read to check
the S3 credentials KServe's storage initializer will use.

The client, and how a call's failure becomes a ClusterError, are
kubeflow/kubernetes_api.py's; this module says what a refusal means here.
"""

from __future__ import annotations

import json
from typing import Any

from kubeflow.kserve.manifest import GROUP, PLURAL, VERSION
from kubeflow.kubernetes_api import ClusterError, KubernetesApi

REQUIRED_PERMISSIONS = (
    "get, create, patch, delete on inferenceservices.serving.kserve.io; "
    "get on serviceaccounts and secrets"
)


class ServingCluster(KubernetesApi):
    """The Deploy step's API calls, returning Kubernetes objects as plain JSON dicts."""

    PURPOSE = "deploy with"

    def explain(self, action: str, status: int, reason: str, message: str) -> ClusterError:
        if status == 403:
            return ClusterError(
                f"Kubernetes refused to {action}: {message}. The Deploy step's service "
                f"account needs {REQUIRED_PERMISSIONS} (docs/serving.md)",
                status,
            )
        if status == 404 and action.startswith("create inferenceservices"):
            return ClusterError(
                f"{action}: the API has no inferenceservices.serving.kserve.io ({message}): "
                "install KServe (docs/serving.md)",
                status,
            )
        return super().explain(action, status, reason, message)

    def get_service(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._call(
            f"get inferenceservices.serving.kserve.io {namespace}/{name}",
            self._custom.get_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            gone=None,
        )

    def create_service(self, manifest: dict[str, Any]) -> dict[str, Any]:
        namespace = manifest["metadata"]["namespace"]
        return self._call(
            f"create inferenceservices.serving.kserve.io in namespace {namespace}",
            self._custom.create_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            manifest,
        )

    def patch_service(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self._call(
            f"patch inferenceservices.serving.kserve.io {namespace}/{name}",
            self._custom.patch_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            patch,
        )

    def delete_service(self, namespace: str, name: str) -> None:
        self._call(
            f"delete inferenceservices.serving.kserve.io {namespace}/{name}",
            self._custom.delete_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            gone=None,
        )

    def get_core(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A ServiceAccount or Secret as JSON, or None if there is none."""
        read = {
            "serviceaccounts": self._core.read_namespaced_service_account,
            "secrets": self._core.read_namespaced_secret,
        }[kind]
        response = self._call(
            f"get {kind} {namespace}/{name}",
            read,
            name,
            namespace,
            _preload_content=False,
            gone=None,
        )
        if response is None:
            return None
        return json.loads(response.data)
