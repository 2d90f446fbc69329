"""The Kubernetes API calls of the Deploy step, through the official client.

An InferenceService is read, created, patched (a JSON merge patch, so that
`null` removes `canaryTrafficPercent`) and, when a first version fails,
deleted; the predictor's service account and its secrets are read to check
the S3 credentials KServe's storage initializer will use.

The client set-up follows kubeflow/tfjob/cluster.py's (in a pod, its service
account; elsewhere, KUBECONFIG), written out here rather than imported:
kubeflow/tfjob/ reads kubeflow/steps/, which runs this step, and the import
contract keeps the packages of kubeflow/ free of cycles.
"""

from __future__ import annotations

import json
import os
from typing import Any

from kubeflow.kserve.manifest import GROUP, PLURAL, VERSION

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
REQUIRED_PERMISSIONS = (
    "get, create, patch, delete on inferenceservices.serving.kserve.io; "
    "get on serviceaccounts and secrets"
)
_RAISE = object()


class ServingClusterError(RuntimeError):
    """The Kubernetes API refused a call or did not answer; the message says which and why."""


class ServingCluster:
    """The Deploy step's API calls, returning Kubernetes objects as plain JSON dicts."""

    def __init__(self, api_client, default_namespace: str) -> None:
        from kubernetes import client

        self.api_client = api_client
        self.default_namespace = default_namespace
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)

    @classmethod
    def from_environment(cls) -> ServingCluster:
        """In a pod: its service account and namespace. Elsewhere: the kubeconfig's context."""
        from kubernetes import client, config

        if os.path.exists(f"{SERVICE_ACCOUNT_DIR}/token"):
            config.load_incluster_config()
            with open(f"{SERVICE_ACCOUNT_DIR}/namespace") as f:
                return cls(client.ApiClient(), f.read().strip())
        config_file = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
        try:
            _, context = config.list_kube_config_contexts(config_file)
            api_client = config.new_client_from_config(config_file)
        except (config.ConfigException, OSError) as err:
            raise ServingClusterError(
                "no Kubernetes API to deploy with: the step runs outside a pod "
                f"(no {SERVICE_ACCOUNT_DIR}/token) and has no usable kubeconfig ({err})"
            ) from None
        return cls(api_client, context.get("context", {}).get("namespace") or "default")

    def _call(self, action: str, function, *args, gone: Any = _RAISE, **kwargs):
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return function(*args, **kwargs)
        except ApiException as err:
            try:
                body = json.loads(err.body)
            except (TypeError, ValueError):
                body = {}
            if gone is not _RAISE and err.status == 404 and body.get("reason") == "NotFound":
                return gone
            message = body.get("message") or err.body or err.reason or ""
            if err.status == 403:
                raise ServingClusterError(
                    f"Kubernetes refused to {action}: {message}. The Deploy step's service "
                    f"account needs {REQUIRED_PERMISSIONS} (docs/serving.md)"
                ) from None
            if err.status == 404 and action.startswith("create inferenceservices"):
                raise ServingClusterError(
                    f"{action}: the API has no inferenceservices.serving.kserve.io ({message}): "
                    "install KServe (docs/serving.md)"
                ) from None
            raise ServingClusterError(
                f"{action}: HTTP {err.status} {err.reason}: {message}"
            ) from None
        except HTTPError as err:
            host = self.api_client.configuration.host
            raise ServingClusterError(
                f"{action}: the Kubernetes API at {host} did not answer: {err}"
            ) from None

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
