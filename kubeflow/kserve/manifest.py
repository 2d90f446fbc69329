"""The InferenceService the Deploy step applies, and what its status says.

KServe's `tensorflow` model format runs TF Serving on the predictor's
`storageUri`; its storage initializer copies that URI into the pod when the
pod starts. A new version is therefore a new `storageUri`, which KServe rolls
out as a new Knative revision of the predictor. The rules this module relies
on, as KServe and Knative have them (docs/serving.md has the table with the
tests):

* traffic: with `canaryTrafficPercent` set and a revision rolled out before,
  the latest Ready revision takes that share, tagged `latest`, and the last
  rolled-out one the rest, tagged `prev`; otherwise the latest Ready revision
  takes everything (kserve v0.15.0 reconcilers/knative/ksvc_reconciler.go
  L128-160). With `serving.kserve.io/enable-tag-routing` each tag gets a URL
  of its own, which Knative's Route adds to the status when it routes it;
* a revision is Ready (`latestReadyRevision`) before the Route lists it in
  `status.traffic`, and the tag URLs come with the Route; the smoke request
  waits for both (`PredictorRouteReady`);
* KServe's rollback: when the rolled-out revision is also the latest Ready and
  the latest created, and a split gives its `latestRevision` target less than
  100% and it 100% in total, `latestRolledoutRevision` goes back to
  `previousRolledoutRevision`, which then takes `prev` (kserve v0.15.0
  inference_service_status.go L459-470). A model and `canaryTrafficPercent`
  patched together reach that state when Knative's Route reports before its
  Configuration, so the rollout first makes that revision serve the
  rolled-out model (rollout.py, `_pin_fallback`);
* the InferenceService's annotations (and labels) are copied into the
  revision template (kserve v0.15.0 components/predictor.go L94-96, L399-418):
  changing one rolls out a new revision, so what the step records on the
  InferenceService is written with the spec change it belongs to, never alone;
* `status.observedGeneration` is the Knative Service's, not the
  InferenceService's (inference_service_status.go, PropagateStatus), so
  readiness is read from conditions and revision names only.
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
DEPLOYMENT_MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
# The mode with revisions, as each KServe release names it: 0.15 knows only
# Serverless (utils.go GetDeploymentMode L176-191 at v0.15.2 takes any other
# name as the cluster's default); 0.16 renames it Knative. From 0.15.2 the
# validating webhook refuses any update whose annotation differs from
# `status.deploymentMode` as written (inference_service_validation.go
# L446-457 at v0.15.2, L493-503 at v0.16.0), so Knative would block every
# later patch on 0.15.2, and Serverless on 0.16.0; 0.17's defaulting webhook
# rewrites Serverless first (L166-176 at v0.18.0), so 0.18 takes both. Every
# patch of the model writes the status' name back (`model_patch`).
SERVERLESS = "Serverless"
KNATIVE = "Knative"
SERVERLESS_MODES = (SERVERLESS, KNATIVE)
KNATIVE_NAME_FROM = (0, 16)
LATEST_TAG = "latest"
# Set once at creation: the Deploy step made this InferenceService (so it may
# delete it while nothing it put there was ever rolled out).
MANAGED_ANNOTATION = "tfx-template.kubeflow.org/deployed-by"
MANAGED_BY = "deploy-step"
# What was rolled out when the spec was last changed: the rollback target.
# Written with every patch that changes the model (see the module docstring).
ROLLED_OUT_URI_ANNOTATION = "tfx-template.kubeflow.org/rolled-out-storage-uri"
ROLLED_OUT_VERSION_ANNOTATION = "tfx-template.kubeflow.org/rolled-out-version"
ROLLED_OUT_RUNTIME_ANNOTATION = "tfx-template.kubeflow.org/rolled-out-runtime-version"
# On the predictor, so on its pods: the model version a revision serves, and
# which change of the model made it. The latter makes every model change a new
# revision, also one that puts back what the spec already holds (a rerun after
# a step cut short), so the revision waited for is always the step's own.
VERSION_ANNOTATION = "tfx-template.kubeflow.org/model-version"
CHANGE_ANNOTATION = "tfx-template.kubeflow.org/model-change"
# The predictor container's name, which KServe's webhook gives it anyway: its
# Go type (a core/v1 Container) requires one, so the manifest says it.
CONTAINER_NAME = "kserve-container"
# Knative's message for a failed revision is on PredictorConfigurationReady;
# PredictorReady carries it too once the Knative Service is not Ready, and
# LatestDeploymentReady only says "PredictorConfigurationReady not ready".
FAILURE_CONDITIONS = ("PredictorConfigurationReady", "PredictorReady", "LatestDeploymentReady")
ROUTE_READY = "PredictorRouteReady"


@dataclass(frozen=True)
class ServedModel:
    """A model on the predictor: what a rollback returns to."""

    storage_uri: str
    version: str
    runtime_version: str | None = None


def _resources(config: Mapping[str, Any]) -> dict[str, Any]:
    """The predictor's resources; a request without a limit gets the request as its limit.

    KServe merges the predictor's container over the runtime's, key by key, and
    `kserve-tensorflow-serving` limits cpu to 1 and memory to 2Gi
    (config/runtimes/kserve-tensorflow-serving.yaml), so a larger request
    alone would make a pod whose request exceeds its limit, which Kubernetes
    refuses.
    """
    resources = {k: dict(v) for k, v in (config.get("resources") or {}).items()}
    requests = resources.get("requests", {})
    limits = resources.setdefault("limits", {})
    for name in ("cpu", "memory"):
        if name in requests and name not in limits:
            limits[name] = requests[name]
    return {k: v for k, v in resources.items() if v}


def predictor(
    config: Mapping[str, Any], served: ServedModel, change: str | None = None
) -> dict[str, Any]:
    """The predictor spec serving `served` (config: `Serving.to_json()`); `change` names
    the change that puts it there."""
    model: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "modelFormat": {"name": MODEL_FORMAT},
        "runtime": config["runtime"],
        "storageUri": served.storage_uri,
    }
    if served.runtime_version:
        model["runtimeVersion"] = served.runtime_version
    resources = _resources(config)
    if resources:
        model["resources"] = resources
    spec: dict[str, Any] = {"model": model}
    if config.get("service_account"):
        spec["serviceAccountName"] = config["service_account"]
    if config.get("node_selector"):
        spec["nodeSelector"] = dict(config["node_selector"])
    if config.get("tolerations"):
        spec["tolerations"] = list(config["tolerations"])
    spec["annotations"] = {VERSION_ANNOTATION: served.version}
    if change:
        spec["annotations"][CHANGE_ANNOTATION] = change
    return spec


def serverless_mode(kserve_version: str) -> str:
    """The Serverless mode's name for the cluster's KServe release (`serving.kserve_version`)."""
    major, minor = (int(x) for x in kserve_version.split(".")[:2])
    return KNATIVE if (major, minor) >= KNATIVE_NAME_FROM else SERVERLESS


def inference_service(
    config: Mapping[str, Any], namespace: str, served: ServedModel, change: str | None = None
) -> dict[str, Any]:
    """A new InferenceService serving `served`: Serverless, tag routing, ours."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": config["inference_service"],
            "namespace": namespace,
            "annotations": {
                TAG_ROUTING_ANNOTATION: "true",
                DEPLOYMENT_MODE_ANNOTATION: serverless_mode(config["kserve_version"]),
                MANAGED_ANNOTATION: MANAGED_BY,
            },
        },
        "spec": {"predictor": predictor(config, served, change)},
    }


def _rolled_out_annotations(rolled_out: ServedModel | None) -> dict[str, str | None]:
    if rolled_out is None:
        return {
            ROLLED_OUT_URI_ANNOTATION: None,
            ROLLED_OUT_VERSION_ANNOTATION: None,
            ROLLED_OUT_RUNTIME_ANNOTATION: None,
        }
    return {
        ROLLED_OUT_URI_ANNOTATION: rolled_out.storage_uri,
        ROLLED_OUT_VERSION_ANNOTATION: rolled_out.version,
        ROLLED_OUT_RUNTIME_ANNOTATION: rolled_out.runtime_version,
    }


def model_patch(
    config: Mapping[str, Any],
    served: ServedModel,
    rolled_out: ServedModel | None,
    canary_percent: int | None,
    mode: str | None = None,
    change: str | None = None,
) -> dict[str, Any]:
    """The merge patch putting `served` on the predictor with `canary_percent` of the traffic,
    recording what is rolled out meanwhile (`None` values remove a field). `mode`: the
    status' deployment mode (0.15.2+), written back as the annotation so that 0.16's webhook
    takes this and every later patch."""
    spec: dict[str, Any] = predictor(config, served, change)
    spec["model"].setdefault("runtimeVersion", None)
    spec["canaryTrafficPercent"] = canary_percent
    annotations: dict[str, Any] = {TAG_ROUTING_ANNOTATION: "true"}
    if mode:
        annotations[DEPLOYMENT_MODE_ANNOTATION] = mode
    annotations.update(_rolled_out_annotations(rolled_out))
    return {"metadata": {"annotations": annotations}, "spec": {"predictor": spec}}


def traffic_patch(canary_percent: int | None) -> dict[str, Any]:
    """Moves traffic only: `canaryTrafficPercent` is not part of the revision template."""
    return {"spec": {"predictor": {"canaryTrafficPercent": canary_percent}}}


def storage_uri(service: Mapping[str, Any]) -> str | None:
    return _model(service).get("storageUri")


def _model(service: Mapping[str, Any]) -> dict[str, Any]:
    return service.get("spec", {}).get("predictor", {}).get("model", {})


def metadata_annotations(service: Mapping[str, Any]) -> dict[str, str]:
    return service.get("metadata", {}).get("annotations") or {}


def spec_model(service: Mapping[str, Any]) -> ServedModel | None:
    """The model the spec holds now (the latest revision's, once Knative made it)."""
    uri = storage_uri(service)
    if not uri:
        return None
    predictor_annotations = service["spec"]["predictor"].get("annotations") or {}
    return ServedModel(
        storage_uri=uri,
        version=predictor_annotations.get(VERSION_ANNOTATION) or uri.rstrip("/").rsplit("/")[-1],
        runtime_version=_model(service).get("runtimeVersion"),
    )


def recorded_rolled_out(service: Mapping[str, Any]) -> ServedModel | None:
    """What the step recorded as rolled out with the last change of the spec, if anything."""
    found = metadata_annotations(service)
    uri = found.get(ROLLED_OUT_URI_ANNOTATION)
    if not uri:
        return None
    return ServedModel(
        storage_uri=uri,
        version=found.get(ROLLED_OUT_VERSION_ANNOTATION) or uri.rstrip("/").rsplit("/")[-1],
        runtime_version=found.get(ROLLED_OUT_RUNTIME_ANNOTATION) or None,
    )


def canary_percent(service: Mapping[str, Any]) -> int | None:
    return service.get("spec", {}).get("predictor", {}).get("canaryTrafficPercent")


@dataclass(frozen=True)
class TrafficTarget:
    revision: str
    percent: int
    tag: str | None = None
    url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Condition:
    status: str
    reason: str = ""
    message: str = ""

    def describe(self, kind: str) -> str:
        text = f"{kind}={self.status}"
        if self.reason:
            text += f" ({self.reason})"
        if self.message:
            text += f": {self.message}"
        return text


@dataclass(frozen=True)
class PredictorStatus:
    """The parts of an InferenceService's status a rollout waits on."""

    latest_created: str | None
    latest_ready: str | None
    rolled_out: str | None
    traffic: tuple[TrafficTarget, ...]
    url: str | None
    conditions: Mapping[str, Condition]
    # The deployment mode KServe reports (0.15+: status.deploymentMode), if any.
    deployment_mode: str | None = None
    # The revision rolled out before `rolled_out`: where KServe's rollback sends traffic.
    previous_rolled_out: str | None = None

    @classmethod
    def of(cls, service: Mapping[str, Any]) -> PredictorStatus:
        status = service.get("status") or {}
        component = (status.get("components") or {}).get("predictor") or {}
        return cls(
            latest_created=component.get("latestCreatedRevision") or None,
            latest_ready=component.get("latestReadyRevision") or None,
            rolled_out=component.get("latestRolledoutRevision") or None,
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
            conditions={
                c["type"]: Condition(
                    status=c.get("status", "Unknown"),
                    reason=c.get("reason", ""),
                    message=c.get("message", ""),
                )
                for c in status.get("conditions") or []
                if c.get("type")
            },
            deployment_mode=status.get("deploymentMode"),
            previous_rolled_out=component.get("previousRolledoutRevision") or None,
        )

    def percent_of(self, revision: str | None) -> int:
        return sum(t.percent for t in self.traffic if t.revision == revision)

    def tagged(self, tag: str) -> TrafficTarget | None:
        return next((t for t in self.traffic if t.tag == tag), None)

    def is_true(self, condition: str) -> bool:
        found = self.conditions.get(condition)
        return found is not None and found.status == "True"

    def routed(self, revision: str) -> TrafficTarget | None:
        """The `latest` tag's target once the Route sends it to `revision` with a URL."""
        target = self.tagged(LATEST_TAG)
        if (
            self.latest_ready == revision
            and target is not None
            and target.revision == revision
            and target.url
            and self.is_true(ROUTE_READY)
        ):
            return target
        return None

    def rollback_target_differs(self) -> bool:
        """Whether a canary split reported before its new revision would send all traffic to
        `previous_rolled_out`, not to the rolled-out revision: KServe rolls back when the
        rolled-out revision is also the latest Ready and the latest created and a split
        gives it 100% in total (kserve v0.15.0 inference_service_status.go L459-470), and
        Knative keeps reporting those two until its Configuration observes a new template
        (knative v0.44.0 reconciler/service/service.go L83-96, L116-122)."""
        return (
            self.previous_rolled_out is not None
            and self.previous_rolled_out != self.rolled_out
            and self.rolled_out == self.latest_ready == self.latest_created
        )

    def failure(self) -> str | None:
        """Why the latest created revision failed, in Knative's words, or None."""
        for kind in FAILURE_CONDITIONS:
            condition = self.conditions.get(kind)
            if condition is not None and condition.status == "False":
                return condition.describe(kind)
        return None

    def settled(self) -> bool:
        """Everything on one revision: the latest, Ready, rolled out, with all the traffic."""
        return (
            self.latest_created is not None
            and self.latest_created == self.latest_ready == self.rolled_out
            and self.percent_of(self.latest_ready) == 100
        )

    def describe(self) -> str:
        """What a timeout reports: the revisions, the traffic and each condition not True."""
        traffic = ", ".join(
            f"{t.revision or '?'} {t.percent}%" + (f" ({t.tag})" if t.tag else "")
            for t in self.traffic
        )
        conditions = "; ".join(
            c.describe(kind) for kind, c in sorted(self.conditions.items()) if c.status != "True"
        )
        return (
            f"latestCreatedRevision={self.latest_created}, latestReadyRevision="
            f"{self.latest_ready}, latestRolledoutRevision={self.rolled_out}, traffic=["
            f"{traffic}]" + (f"; conditions not True: {conditions}" if conditions else "")
        )
