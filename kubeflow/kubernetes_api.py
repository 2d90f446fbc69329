"""The Kubernetes API as Kubeflow's steps reach it: the official client, errors that say why.

Inside a pod, the client authenticates as the pod's service account; outside
one (a test against a stand-in, a developer's machine), with the kubeconfig
that KUBECONFIG names. The Trainer step's TFJob calls (kubeflow/tfjob/cluster.py)
and the Deploy step's KServe calls (kubeflow/kserve/cluster.py) each subclass
`KubernetesApi` and say, in `explain`, what a refusal means for their step.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from kubeflow.step_ids import DEPLOY, TUNE
from pipeline.steps import TRAINER

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class ApiCall:
    """One Kubernetes API call a step makes, as RBAC names it (the API server's RequestInfo)."""

    verb: str
    group: str  # "" for core/v1
    resource: str  # with its subresource, as a rule names it: "pods/log"
    step: str
    # Where the step makes it, and when.
    made_by: str
    # What the cluster must run for the resource to exist at all ("" for nothing beyond
    # Kubernetes and the platform's defaults).
    needs: str = ""


_ISVC = "serving.kserve.io", "inferenceservices"
_TFJOB = "kubeflow.org", "tfjobs"
_TRAINER_ON_TFJOB = f"{TRAINER} (training.engine tfjob)"
_TRAINJOB = "trainer.kubeflow.org", "trainjobs"
_TRAINER_ON_TRAINJOB = f"{TRAINER} (training.engine trainjob)"
# Every call the steps make, in the step's namespace (the pod's own, a profile's on the
# Kubeflow platform, unless the settings name another). The Kubernetes stand-in refuses any
# other (tests/kubernetes_standin.py), and tests/test_kubeflow_platform.py holds each to the
# rules of the platform's kubeflow-edit ClusterRole, which the profile's default-editor has
# (docs/kubeflow-operations.md, "Permissions on the Kubeflow platform").
STEP_CALLS: tuple[ApiCall, ...] = (
    *(
        ApiCall(verb, *_ISVC, DEPLOY, "kubeflow/kserve/cluster.py")
        for verb in ("get", "create", "patch", "delete")
    ),
    ApiCall("get", "", "serviceaccounts", DEPLOY, "kubeflow/kserve/cluster.py (credentials)"),
    ApiCall("get", "", "secrets", DEPLOY, "kubeflow/kserve/cluster.py (credentials)"),
    *(
        ApiCall(verb, *_TFJOB, _TRAINER_ON_TFJOB, "kubeflow/tfjob/cluster.py", "Training Operator")
        for verb in ("create", "get", "delete")
    ),
    ApiCall("list", "", "pods", _TRAINER_ON_TFJOB, "kubeflow/tfjob/cluster.py (replicas)"),
    ApiCall("get", "", "pods/log", _TRAINER_ON_TFJOB, "kubeflow/tfjob/cluster.py (the Chief)"),
    *(
        ApiCall(verb, *_TRAINJOB, _TRAINER_ON_TRAINJOB, "kubeflow/trainjob/cluster.py")
        for verb in ("create", "get", "delete")
    ),
    ApiCall(
        "get",
        "trainer.kubeflow.org",
        "clustertrainingruntimes",
        _TRAINER_ON_TRAINJOB,
        "kubeflow/trainjob/job.py (the runtime is installed)",
    ),
    ApiCall(
        "get",
        "trainer.kubeflow.org",
        "trainingruntimes",
        _TRAINER_ON_TRAINJOB,
        "kubeflow/trainjob/job.py (training.trainjob.runtime_kind TrainingRuntime)",
    ),
    ApiCall("list", "", "pods", _TRAINER_ON_TRAINJOB, "kubeflow/trainjob/cluster.py (the nodes)"),
    ApiCall("get", "", "pods/log", _TRAINER_ON_TRAINJOB, "kubeflow/trainjob/cluster.py (node 0)"),
    *(
        ApiCall(verb, "", "pods", TUNE, "kubeflow/tuning/pods.py (the workers)")
        for verb in ("create", "get", "delete")
    ),
)
# `KubernetesApi._call`'s default for `gone`: a 404 is an error like any other.
_RAISE = object()


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


class KubernetesApi:
    """The official client's CustomObjects and CoreV1 APIs, with failures as ClusterError."""

    # What the step needs the API for: "no Kubernetes API to <PURPOSE>: ...".
    PURPOSE = "call"

    def __init__(self, api_client, default_namespace: str) -> None:
        from kubernetes import client

        self.api_client = api_client
        self.default_namespace = default_namespace
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)

    @classmethod
    def from_environment(cls):
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
                f"no Kubernetes API to {cls.PURPOSE}: the step runs outside a pod "
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
            if gone is not _RAISE and err.status == 404 and _body(err).get("reason") == "NotFound":
                return gone
            message = _body(err).get("message") or err.body or err.reason or ""
            raise self.explain(action, err.status, err.reason, message) from None
        except HTTPError as err:
            host = self.api_client.configuration.host
            raise ClusterError(
                f"{action}: the Kubernetes API at {host} did not answer: {err}"
            ) from None

    def explain(self, action: str, status: int, reason: str, message: str) -> ClusterError:
        """The error for a refused call, in terms of what the user can change."""
        return ClusterError(f"{action}: HTTP {status} {reason}: {message}", status)


def _body(err) -> dict[str, Any]:
    """The API's Status object in a refusal, or {}."""
    try:
        body = json.loads(err.body)
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}
