"""The Kubernetes API calls of the Trainer step, through the official client.

Five calls: create, get and delete a TFJob; list the job's pods; read a
pod's log (followed, or its last lines). The Training Operator's own SDK
(`kubeflow-training`) wraps the same calls, but needs kubernetes >= 27,
which TFX 1.16 and kfp 2.5 (kubernetes < 27) exclude from the image.

Inside a pod, the client authenticates as the pod's service account; outside
one (a test against a stand-in, a developer's machine), with the kubeconfig
that KUBECONFIG names.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

from kubeflow.tfjob.manifest import CONTAINER_NAME, GROUP, JOB_NAME_LABEL, PLURAL, VERSION

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# What the step's service account must be allowed, for the error that says so.
REQUIRED_PERMISSIONS = "create, get, delete on tfjobs.kubeflow.org; list on pods; get on pods/log"
# `Cluster._call`'s default for `gone`: a 404 is an error like any other.
_RAISE = object()
_FORBIDDEN_USER = re.compile(r'User "system:serviceaccount:([^:"]+):([^"]+)"')


class ClusterError(RuntimeError):
    """The Kubernetes API refused a call or did not answer; the message says which and why."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        # The HTTP status; None when the API did not answer at all.
        self.status = status

    @property
    def transient(self) -> bool:
        """An API server restarting or overloaded: the same call may succeed shortly."""
        return self.status is None or self.status == 429 or self.status >= 500


class Cluster:
    """The API calls the step makes, returning Kubernetes objects as plain JSON dicts."""

    def __init__(self, api_client, default_namespace: str) -> None:
        from kubernetes import client

        self.api_client = api_client
        self.default_namespace = default_namespace
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)

    @classmethod
    def from_environment(cls) -> Cluster:
        """In a pod: its service account and namespace. Elsewhere: the kubeconfig's context."""
        from kubernetes import client, config

        if os.path.exists(f"{SERVICE_ACCOUNT_DIR}/token"):
            config.load_incluster_config()
            with open(f"{SERVICE_ACCOUNT_DIR}/namespace") as f:
                return cls(client.ApiClient(), f.read().strip())
        # Read now: the client reads KUBECONFIG once, when it is first imported.
        config_file = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
        try:
            _, context = config.list_kube_config_contexts(config_file)
            api_client = config.new_client_from_config(config_file)
        except (config.ConfigException, OSError) as err:
            raise ClusterError(
                "no Kubernetes API to create the TFJob with: the step runs outside a pod "
                f"(no {SERVICE_ACCOUNT_DIR}/token) and has no usable kubeconfig ({err})"
            ) from None
        return cls(api_client, context.get("context", {}).get("namespace") or "default")

    def _call(self, action: str, function, *args, gone: Any = _RAISE, **kwargs):
        """`function(*args, **kwargs)`, its failures as ClusterError; `gone` for a 404 NotFound."""
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return function(*args, **kwargs)
        except ApiException as err:
            if gone is not _RAISE and err.status == 404 and _reason(err) == "NotFound":
                return gone
            raise _api_error(action, err) from None
        except HTTPError as err:
            host = self.api_client.configuration.host
            raise ClusterError(
                f"{action}: the Kubernetes API at {host} did not answer: {err}"
            ) from None

    def create_tfjob(self, manifest: dict[str, Any]) -> dict[str, Any]:
        namespace = manifest["metadata"]["namespace"]
        return self._call(
            f"create tfjobs.kubeflow.org in namespace {namespace}",
            self._custom.create_namespaced_custom_object,
            GROUP, VERSION, namespace, PLURAL, manifest,
        )  # fmt: skip

    def get_tfjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The job, or None once it is gone."""
        return self._call(
            f"get tfjobs.kubeflow.org {namespace}/{name}",
            self._custom.get_namespaced_custom_object,
            GROUP, VERSION, namespace, PLURAL, name, gone=None,
        )  # fmt: skip

    def delete_tfjob(self, namespace: str, name: str) -> bool:
        """Deletes the job and, with it, its pods; False if it was not there."""
        status = self._call(
            f"delete tfjobs.kubeflow.org {namespace}/{name}",
            self._custom.delete_namespaced_custom_object,
            GROUP, VERSION, namespace, PLURAL, name, propagation_policy="Background", gone=None,
        )  # fmt: skip
        return status is not None

    def job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        """The job's replica pods (the operator labels them with the job's name)."""
        response = self._call(
            f"list pods in namespace {namespace}",
            self._core.list_namespaced_pod,
            namespace,
            label_selector=f"{JOB_NAME_LABEL}={job}",
            _preload_content=False,
        )
        return json.loads(response.data).get("items", [])

    def log_tail(self, namespace: str, pod: str, lines: int) -> str:
        response = self._call(
            f"get pods/log {namespace}/{pod}",
            self._core.read_namespaced_pod_log,
            pod, namespace, container=CONTAINER_NAME, tail_lines=lines, _preload_content=False,
        )  # fmt: skip
        return response.data.decode(errors="replace")

    def follow_log(self, namespace: str, pod: str) -> Iterator[str]:
        """The container's log lines as they are written, each `<RFC 3339 time> <text>`.

        Raises ClusterError while the container has not started (the API answers 400).
        """
        response = self._call(
            f"get pods/log {namespace}/{pod}",
            self._core.read_namespaced_pod_log,
            pod, namespace, container=CONTAINER_NAME, follow=True, timestamps=True,
            _preload_content=False,
        )  # fmt: skip
        pending = b""
        try:
            for chunk in response.stream(amt=None, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.decode(errors="replace")
            if pending:
                yield pending.decode(errors="replace")
        finally:
            response.release_conn()


def _reason(err) -> str:
    try:
        return json.loads(err.body).get("reason", "")
    except (TypeError, ValueError):
        return ""


def _api_error(action: str, err) -> ClusterError:
    """What went wrong, in terms of what the user can change."""
    try:
        message = json.loads(err.body).get("message", "")
    except (TypeError, ValueError):
        message = ""
    message = message or (err.body or err.reason or "")
    if err.status == 403 and "admission webhook" in message:
        return ClusterError(
            f"{action}: the Training Operator's webhook refused the job: {message}", err.status
        )
    if err.status == 403:
        user = _FORBIDDEN_USER.search(message)
        who = (
            f"service account {user.group(1)}/{user.group(2)}"
            if user
            else "the step's service account"
        )
        return ClusterError(
            f"Kubernetes refused to {action} for {who}: {message}. The Trainer step's service "
            f"account needs {REQUIRED_PERMISSIONS}. Multi-user Kubeflow: the profile's "
            "default-editor gets them through kubeflow-edit once the Training Operator is "
            "installed with its kubeflow overlay; single-user KFP: the pipeline-runner role "
            "(docs/training-on-several-nodes.md)",
            err.status,
        )
    if err.status == 404 and action.startswith("create tfjobs"):
        return ClusterError(
            f"{action}: the API has no tfjobs.kubeflow.org ({message}). Install the Kubeflow "
            "Training Operator (release-1.9: its standalone overlay, or its kubeflow overlay in "
            "a multi-user Kubeflow; docs/training-on-several-nodes.md)",
            err.status,
        )
    return ClusterError(f"{action}: HTTP {err.status} {err.reason}: {message}", err.status)
