"""The InferenceService the Deploy step applies, and what its status says.

KServe's `tensorflow` model format runs TF Serving on the predictor's
`storageUri`; its storage initializer copies that URI into the pod when the
pod starts. A new version is therefore a new `storageUri`, which KServe rolls
out as a new revision of the predictor. With `canaryTrafficPercent` set, the
new revision takes that share once it is Ready and the last rolled-out
revision keeps the rest; removed, the new revision takes everything.

`serving.kserve.io/enable-tag-routing` gives each revision in the traffic
split a URL of its own (tags `latest` and `prev`): the smoke request reaches
the new revision there before it has all the traffic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

GROUP = "serving.kserve.io"
VERSION = "v1beta1"
PLURAL = "inferenceservices"
KIND = "InferenceService"
MODEL_FORMAT = "tensorflow"
TAG_ROUTING_ANNOTATION = "serving.kserve.io/enable-tag-routing"
# The storageUri to go back to if the version being rolled out fails: written
# with the patch that starts a rollout, so a retried step still knows it.
ROLLBACK_ANNOTATION = "tfx-template.kubeflow.org/rollback-storage-uri"
VERSION_ANNOTATION = "tfx-template.kubeflow.org/model-version"
# The predictor container's name, which KServe's webhook gives it anyway: its
# Go type (a core/v1 Container) requires one, so the manifest says it.
CONTAINER_NAME = "kserve-container"
# Conditions whose False status means the latest revision failed.
FAILURE_CONDITIONS = ("LatestDeploymentReady", "PredictorReady", "PredictorConfigurationReady")


def predictor(config: Mapping[str, Any], storage_uri: str, version: str) -> dict[str, Any]:
    """The predictor spec for `storage_uri` (config: `Serving.to_json()`)."""
    model: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "modelFormat": {"name": MODEL_FORMAT},
        "storageUri": storage_uri,
    }
    if config.get("resources"):
        model["resources"] = dict(config["resources"])
    spec: dict[str, Any] = {"model": model}
    if config.get("service_account"):
        spec["serviceAccountName"] = config["service_account"]
    if config.get("node_selector"):
        spec["nodeSelector"] = dict(config["node_selector"])
    if config.get("tolerations"):
        spec["tolerations"] = list(config["tolerations"])
    spec["annotations"] = {VERSION_ANNOTATION: version}
    return spec


def inference_service(
    config: Mapping[str, Any], namespace: str, storage_uri: str, version: str
) -> dict[str, Any]:
    """A new InferenceService serving `storage_uri` (no canary: nothing serves yet)."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": config["inference_service"],
            "namespace": namespace,
            "annotations": {TAG_ROUTING_ANNOTATION: "true"},
        },
        "spec": {"predictor": predictor(config, storage_uri, version)},
    }


def rollout_patch(
    config: Mapping[str, Any], storage_uri: str, version: str, rollback_uri: str
) -> dict[str, Any]:
    """The merge patch that starts a canary of `storage_uri` on an existing service."""
    spec = predictor(config, storage_uri, version)
    spec["canaryTrafficPercent"] = config["canary_traffic_percent"]
    return {
        "metadata": {
            "annotations": {TAG_ROUTING_ANNOTATION: "true", ROLLBACK_ANNOTATION: rollback_uri}
        },
        "spec": {"predictor": spec},
    }


def storage_uri(service: Mapping[str, Any]) -> str | None:
    return service.get("spec", {}).get("predictor", {}).get("model", {}).get("storageUri")


@dataclass(frozen=True)
class TrafficTarget:
    revision: str
    percent: int
    tag: str | None = None
    url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PredictorStatus:
    """The parts of an InferenceService's status a rollout waits on."""

    observed: bool  # the controller has seen the latest spec
    latest_created: str | None
    latest_ready: str | None
    rolled_out: str | None
    traffic: tuple[TrafficTarget, ...]
    url: str | None
    # (condition type, reason, message) of a failed condition, if any.
    failure: tuple[str, str, str] | None

    @classmethod
    def of(cls, service: Mapping[str, Any]) -> PredictorStatus:
        status = service.get("status") or {}
        component = (status.get("components") or {}).get("predictor") or {}
        generation = service.get("metadata", {}).get("generation")
        failure = None
        for condition in status.get("conditions") or []:
            if condition.get("type") in FAILURE_CONDITIONS and condition.get("status") == "False":
                failure = (
                    condition["type"],
                    condition.get("reason", ""),
                    condition.get("message", ""),
                )
                break
        return cls(
            observed=generation is None or status.get("observedGeneration") == generation,
            latest_created=component.get("latestCreatedRevision"),
            latest_ready=component.get("latestReadyRevision"),
            rolled_out=component.get("latestRolledoutRevision"),
            traffic=tuple(
                TrafficTarget(
                    revision=t.get("revisionName", ""),
                    percent=int(t.get("percent") or 0),
                    tag=t.get("tag"),
                    url=t.get("url"),
                )
                for t in component.get("traffic") or []
            ),
            url=status.get("url"),
            failure=failure,
        )

    def percent_of(self, revision: str | None) -> int:
        return sum(t.percent for t in self.traffic if t.revision == revision)

    def url_of(self, revision: str | None) -> str | None:
        """The revision's own URL (tag routing), else the service's."""
        for target in self.traffic:
            if target.revision == revision and target.url:
                return target.url
        return self.url
