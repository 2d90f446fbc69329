"""The Kubernetes API calls of the Deploy step, through the official client.

An InferenceService is read, created, patched (a JSON merge patch, so that
`null` removes `canaryTrafficPercent`) and, when a first version fails,
deleted; the predictor's service account and its secrets are read to check
the S3 credentials KServe's storage initializer will use.
"""

from __future__ import annotations

from typing import Any

from kubeflow.kserve.manifest import GROUP, PLURAL, VERSION
from kubeflow.tfjob.cluster import Cluster, ClusterError

REQUIRED_PERMISSIONS = (
    "get, create, patch, delete on inferenceservices.serving.kserve.io; "
    "get on serviceaccounts and secrets"
)


class ServingCluster(Cluster):
    """Cluster's client and error handling, with the Deploy step's calls."""

    def _call(self, action: str, function, *args, **kwargs):
        try:
            return super()._call(action, function, *args, **kwargs)
        except ClusterError as err:
            if err.status == 403:
                raise ClusterError(
                    f"Kubernetes refused to {action}: {err}. The Deploy step's service account "
                    f"needs {REQUIRED_PERMISSIONS} (docs/serving.md)",
                    err.status,
                ) from None
            if err.status == 404 and action.startswith("create inferenceservices"):
                raise ClusterError(
                    f"{action}: the API has no inferenceservices.serving.kserve.io: install "
                    "KServe (docs/serving.md)",
                    err.status,
                ) from None
            raise

    def get_service(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._call(
            f"get inferenceservices.serving.kserve.io {namespace}/{name}",
            self._custom.get_namespaced_custom_object,
            GROUP, VERSION, namespace, PLURAL, name, gone=None,
        )  # fmt: skip

    def create_service(self, manifest: dict[str, Any]) -> dict[str, Any]:
        namespace = manifest["metadata"]["namespace"]
        return self._call(
            f"create inferenceservices.serving.kserve.io in namespace {namespace}",
            self._custom.create_namespaced_custom_object,
            GROUP, VERSION, namespace, PLURAL, manifest,
        )  # fmt: skip

    def patch_service(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self._call(
            f"patch inferenceservices.serving.kserve.io {namespace}/{name}",
            self._custom.patch_namespaced_custom_object,
            GROUP, VERSION, namespace, PLURAL, name, patch,
        )  # fmt: skip

    def delete_service(self, namespace: str, name: str) -> None:
        self._call(
            f"delete inferenceservices.serving.kserve.io {namespace}/{name}",
            self._custom.delete_namespaced_custom_object,
            GROUP, VERSION, namespace, PLURAL, name, gone=None,
        )  # fmt: skip

    def get_core(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A ServiceAccount or Secret as JSON, or None if there is none."""
        read = {
            "serviceaccounts": self._core.read_namespaced_service_account,
            "secrets": self._core.read_namespaced_secret,
        }[kind]
        response = self._call(
            f"get {kind} {namespace}/{name}", read, name, namespace, _preload_content=False,
            gone=None,
        )  # fmt: skip
        if response is None:
            return None
        import json

        return json.loads(response.data)
