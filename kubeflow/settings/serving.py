"""Serving on KServe: the `serving:` section of kubeflow/pipeline.yaml (off when absent).

With it, the compile adds the Deploy step (kubeflow/steps/deploy/component.py) after the
Pusher: a version the Pusher pushed goes to a KServe InferenceService, through
a canary, a smoke request and promotion (docs/serving.md).

Credentials never appear here: the predictor runs as `service_account`, and
KServe's storage initializer reads the S3 keys and endpoint from that service
account's secret (its `serving.kserve.io/s3-*` annotations). The Deploy step
checks those objects before it applies anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from importlib.metadata import version as version_of
from typing import Any, Literal

from contract.fields import declare, field_names, typed
from kubeflow.kserve import serving_runtime as tf_serving
from kubeflow.settings.fields import (
    NAMESPACE,
    SECRET_NAME,
    SettingsError,
    check,
    required_str,
)
from kubeflow.settings.placement import Placement, parse_placement
from kubeflow.settings.retries import duration_seconds
from pipeline import object_store as store

# An InferenceService's name: a DNS-1035 label. KServe derives
# `<name>-predictor-<revision>` from it, which must stay within 63 characters.
_ISVC_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME_LENGTH = 45
Promotion = Literal["after_smoke", "manual"]
PROMOTIONS = ("after_smoke", "manual")
# storageUri schemes KServe's storage initializer reads.
STORAGE_SCHEMES = ("gs", "s3")
DEFAULT_CANARY_PERCENT = 10
# Longer than Knative's default progress deadline (600s), so that a revision
# that never becomes Ready is reported with Knative's own reason, not a timeout.
DEFAULT_READY_TIMEOUT = "12m"
# The KServe releases this was read against (docs/serving.md); the newer a
# release, the more S3 credential forms it reads (kubeflow/kserve/credentials.py).
OLDEST_KSERVE = (0, 15)
DEFAULT_KSERVE_VERSION = "0.15"
_KSERVE_VERSION = re.compile(r"^0\.(\d+)$")
_RUNTIME_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
DEFAULT_SMOKE_ROWS = 8
DEFAULT_TOLERANCE = 1e-4


@dataclass(frozen=True)
class Smoke:
    """The request sent to a new revision before it is promoted."""

    rows: int = field(
        default=DEFAULT_SMOKE_ROWS,
        metadata=declare(typed(int), "rows of the eval data sent, 1 to 100"),
    )
    tolerance: float = field(
        default=DEFAULT_TOLERANCE,
        metadata=declare(
            typed(int, float),
            "the largest absolute difference allowed between the revision's answer and the "
            "pushed model's own scoring of the same rows, in [0, 1)",
        ),
    )


@dataclass(frozen=True)
class Serving:
    """Where and how a pushed version is served (see the module's docstring)."""

    inference_service: str
    # None: the Deploy step's own namespace (its pod's, or the kubeconfig's).
    namespace: str | None = None
    service_account: str | None = None
    # Where each version gets a base path of its own: <storage_root>/<version>/<version>/.
    storage_root: str = ""
    predictor: Placement = field(default_factory=Placement)
    canary_traffic_percent: int = DEFAULT_CANARY_PERCENT
    ready_timeout: str = DEFAULT_READY_TIMEOUT
    promotion: Promotion = "after_smoke"
    smoke: Smoke = field(default_factory=Smoke)
    # The ClusterServingRuntime the predictor names, and its image tag (a
    # tensorflow/serving release). None: the newest release of the TensorFlow
    # line that exported the model, read from the SavedModel by the Deploy step.
    runtime: str = tf_serving.DEFAULT_RUNTIME
    runtime_version: str | None = None
    kserve_version: str = DEFAULT_KSERVE_VERSION

    def ready_timeout_seconds(self) -> int:
        return duration_seconds(self.ready_timeout)

    def to_json(self) -> dict[str, Any]:
        """What the Deploy step is handed (one JSON parameter of the compiled step)."""
        resources = self.predictor.resources
        return {
            "inference_service": self.inference_service,
            "namespace": self.namespace,
            "service_account": self.service_account,
            "storage_root": self.storage_root,
            "resources": resources.to_kubernetes(),
            "node_selector": dict(self.predictor.node_selector),
            "tolerations": [t.to_kubernetes() for t in self.predictor.tolerations],
            "canary_traffic_percent": self.canary_traffic_percent,
            "ready_timeout_seconds": self.ready_timeout_seconds(),
            "promotion": self.promotion,
            "smoke_rows": self.smoke.rows,
            "tolerance": self.smoke.tolerance,
            "runtime": self.runtime,
            "runtime_version": self.runtime_version,
            "gpu": resources.gpu > 0,
            "kserve_version": self.kserve_version,
        }


def _smoke(values: Any) -> Smoke:
    where = "serving.smoke"
    smoke = check.read(Smoke, check.typed(values or {}, dict, where), where)
    if not 1 <= smoke.rows <= 100:
        raise SettingsError(f"{where}.rows: must be between 1 and 100, got {smoke.rows}")
    if not 0 <= smoke.tolerance < 1:
        raise SettingsError(f"{where}.tolerance: must be in [0, 1), got {smoke.tolerance}")
    return replace(smoke, tolerance=float(smoke.tolerance))


def parse_serving(values: Any, serving_model_dir: str) -> Serving | None:
    """The `serving:` section; absent or empty, nothing is deployed."""
    if not values:
        return None
    where = "serving"
    raw = check.typed(values, dict, where)
    check.no_unknown(raw, field_names(Serving), where)
    name = required_str(
        {f"{where}.inference_service": raw.get("inference_service")}, f"{where}.inference_service"
    )
    if len(name) > MAX_NAME_LENGTH or not _ISVC_NAME.match(name):
        raise SettingsError(
            f"{where}.inference_service: {name!r} must be lowercase letters, digits and '-', "
            f"start with a letter and be at most {MAX_NAME_LENGTH} characters (KServe names "
            "the predictor's revisions after it, within Kubernetes' 63)"
        )
    namespace = raw.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or not NAMESPACE.match(namespace)):
        raise SettingsError(f"{where}.namespace: {namespace!r} is not a namespace name")
    storage_root = raw.get("storage_root") or f"{serving_model_dir.rstrip('/')}-kserve"
    check.typed(storage_root, str, f"{where}.storage_root")
    scheme = store.uri_scheme(storage_root)
    if scheme not in (*STORAGE_SCHEMES, None):
        raise SettingsError(
            f"{where}.storage_root: {storage_root!r}: KServe's storage initializer reads "
            "gs:// and s3:// here"
        )
    if scheme != store.uri_scheme(serving_model_dir):
        raise SettingsError(
            f"{where}.storage_root: {storage_root!r} must be in the same store as "
            f"serving_model_dir ({serving_model_dir}): the Deploy step copies each pushed "
            "version from one to the other"
        )
    service_account = raw.get("service_account")
    if service_account is not None:
        check.typed(service_account, str, f"{where}.service_account")
        if not SECRET_NAME.match(service_account):
            raise SettingsError(
                f"{where}.service_account: {service_account!r} is not a service account name"
            )
    elif scheme == "s3":
        raise SettingsError(
            f"{where}.service_account: required when the model is on s3:// ({storage_root}): "
            "KServe's storage initializer reads the S3 keys, endpoint and region from a secret "
            "of the predictor's service account (docs/serving.md shows both objects)"
        )
    canary = check.typed(
        raw.get("canary_traffic_percent", DEFAULT_CANARY_PERCENT),
        int,
        f"{where}.canary_traffic_percent",
    )
    if not 0 <= canary <= 99:
        raise SettingsError(
            f"{where}.canary_traffic_percent: must be between 0 and 99, got {canary}: a new "
            "version takes its share only after it is Ready, and all of the traffic only "
            "after its smoke request agrees (0: no traffic until then)"
        )
    ready_timeout = check.typed(
        raw.get("ready_timeout", DEFAULT_READY_TIMEOUT), str, f"{where}.ready_timeout"
    )
    try:
        seconds = duration_seconds(ready_timeout)
    except ValueError as err:
        raise SettingsError(f"{where}.ready_timeout: {err}") from None
    if seconds <= 0:
        raise SettingsError(f"{where}.ready_timeout: must be more than 0s")
    promotion = check.choice(raw.get("promotion", "after_smoke"), PROMOTIONS, f"{where}.promotion")
    runtime = check.typed(raw.get("runtime", tf_serving.DEFAULT_RUNTIME), str, f"{where}.runtime")
    if not _RUNTIME_NAME.match(runtime):
        raise SettingsError(f"{where}.runtime: {runtime!r} is not a ClusterServingRuntime name")
    return Serving(
        inference_service=name,
        namespace=namespace,
        service_account=service_account,
        storage_root=storage_root.rstrip("/"),
        predictor=parse_placement(raw.get("predictor"), f"{where}.predictor"),
        canary_traffic_percent=canary,
        ready_timeout=ready_timeout,
        promotion=promotion,
        smoke=_smoke(raw.get("smoke")),
        runtime=runtime,
        runtime_version=_runtime_version(raw.get("runtime_version"), f"{where}.runtime_version"),
        kserve_version=_kserve_version(raw.get("kserve_version"), f"{where}.kserve_version"),
    )


def _runtime_version(value: Any, where: str) -> str | None:
    """A tensorflow/serving release no older than the TensorFlow installed here, which is
    the one the image exports with (the Deploy step checks it again on the SavedModel)."""
    if value is None:
        return None
    version = check.typed(value, str, where)
    if version.endswith(tf_serving.GPU_SUFFIX):
        raise SettingsError(
            f"{where}: {version!r}: name the release alone; the Deploy step adds "
            f"{tf_serving.GPU_SUFFIX!r} for a predictor with a GPU"
        )
    try:
        tf_serving.check_runtime_version(version, version_of("tensorflow"), where)
    except tf_serving.RuntimeVersionError as err:
        raise SettingsError(str(err)) from None
    return version


def _kserve_version(value: Any, where: str) -> str:
    if isinstance(value, float):
        raise SettingsError(f"{where}: write it quoted ('0.17'): YAML reads 0.20 as 0.2")
    version = check.typed(value or DEFAULT_KSERVE_VERSION, str, where)
    match = _KSERVE_VERSION.match(version)
    if not match or (0, int(match.group(1))) < OLDEST_KSERVE:
        raise SettingsError(
            f"{where}: {version!r}: name the cluster's KServe release as 0.MINOR, 0.15 or "
            "later (docs/serving.md lists the releases this was read against)"
        )
    return version
