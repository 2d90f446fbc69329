"""KServe's controller, Knative's revisions and routes, and the predictors, inside
tests/kubernetes_standin.py.

The API calls the Deploy step makes (kubeflow/kserve/cluster.py):

    GET/POST       /apis/serving.kserve.io/v1beta1/namespaces/NS/inferenceservices[/NAME]
    PATCH (merge)  /apis/serving.kserve.io/v1beta1/namespaces/NS/inferenceservices/NAME
    DELETE         /apis/serving.kserve.io/v1beta1/namespaces/NS/inferenceservices/NAME
    GET            /api/v1/namespaces/NS/serviceaccounts/NAME, /api/v1/namespaces/NS/secrets/NAME

and the REST predict endpoints behind the URLs the status gives:
`POST <url>/v1/models/NAME:predict`, where the service's URL splits requests
by the routed traffic and a tag's URL goes to the revision the Route sends
that tag to.

Each rule is ported from the source read for docs/serving.md (KServe v0.15.0
and v0.17.0, Knative Serving as those releases pin it; the deployment mode's,
rule 7, at v0.15.2, v0.16.0 and v0.18.0, the releases Kubeflow v1.11.0, 26.03
and 26.03.1 install), in the order the
real controllers produce it. Times are scaled down (CREATE_LAG_S, READY_AFTER_S,
ROUTE_LAG_S, `progress_deadline_s`):

1. A change of the revision template (the predictor without
   `canaryTrafficPercent`, plus the InferenceService's annotations and labels:
   kserve v0.15.0 components/predictor.go L94-96, L399-418) makes a new
   revision `<name>-predictor-0000N`, which Knative's Configuration records as
   `latestCreatedRevision` first (knative v0.44.0 reconciler/configuration/
   configuration.go L96; ConfigurationReady goes Unknown: apis/serving/v1/
   configuration_lifecycle.go SetLatestCreatedRevisionName L76-82).
2. The revision becomes Ready, and only then `latestReadyRevision`
   (configuration.go findAndSetLatestReadyRevision L132, L139-157), when TF
   Serving loaded the model: the highest numbered version directory under
   `storageUri` (tests/tf_serving_standin.py), with a TF Serving release no
   older than the TensorFlow that wrote the SavedModel. The image is
   `tensorflow/serving:2.6.2` unless `runtimeVersion` replaces the tag
   (config/runtimes/kustomization.yaml L19-21; utils.go UpdateImageTag
   L293-301). A runtime too old crashes the container, which fails the
   revision at once; a base path with no version makes TF Serving wait (only
   a warning: tensorflow/serving 2.16.1 sources/storage_path/
   file_system_storage_path_source.cc L256-263), so the revision fails
   only at Knative's progress deadline. Knative's message is put on
   `PredictorConfigurationReady` (`Revision "X" failed with message: ...`,
   configuration_lifecycle.go MarkLatestCreatedFailed L96-101; kserve v0.15.0
   inference_service_status.go SetCondition L506-516) and `PredictorReady`;
   `LatestDeploymentReady` says only "PredictorConfigurationReady not ready".
3. Traffic, as KServe renders it into the Knative Service
   (reconcilers/knative/ksvc_reconciler.go L128-160): with
   `canaryTrafficPercent` set *and* a revision rolled out, the latest Ready
   revision takes that share, tagged `latest`, and the last rolled-out one
   the rest, tagged `prev`; otherwise the latest Ready revision takes it all,
   tagged `latest` under `serving.kserve.io/enable-tag-routing`.
4. The Route lists that traffic, with the tag URLs, ROUTE_LAG_S after it
   changes (knative route.go configureTraffic: status.traffic is set once
   the targets are routable, before the ingress is ready), and the ingress
   serves it INGRESS_LAG_S later; until both, `PredictorRouteReady` is
   Unknown (knative service.go checkRoutesNotReady L175-200) and requests
   go by the old routes: a tag the ingress does not have yet answers 404.
5. `latestRolledoutRevision` becomes the latest Ready revision once the
   routed traffic gives its `latestRevision` target 100%, and the one it
   replaces becomes `previousRolledoutRevision` (kserve v0.15.0
   inference_service_status.go PropagateStatus L451-458). KServe's rollback
   (L459-470): when the rolled-out revision is also the latest Ready and
   the latest created, its `latestRevision` target has less than 100% and
   its targets add up to 100%, `latestRolledoutRevision` goes back to
   `previousRolledoutRevision`, and `prev` is rendered on it. Each
   controller step is played in the order it comes (`_settle`), so KServe
   reads every status between two of them.
6. `status.url` appears once the Knative Service is Ready (configuration and
   route: inference_service_status.go L480-488 at v0.15.0) and is never
   cleared; `status.observedGeneration` is the Knative Service's generation
   (L503), which counts the rendered Knative Service's changes (template and
   traffic), not the InferenceService's.
7. Deployment mode (`kserve_version`, a release such as "0.15.2", picks its
   rules; `_mode_of`, `_default`, `_validate_mode` cite them): the
   annotation `serving.kserve.io/deploymentMode`, else the cluster's default
   (`default_mode`), and any name the release does not know is the default
   too. 0.15 knows only Serverless, RawDeployment and ModelMesh; 0.16 names
   them Knative and Standard and reads the old names as those. From 0.15.2
   the mode is kept in `status.deploymentMode` and an update whose
   annotation differs from it is refused, as written (0.15.0 has neither);
   from 0.17 the defaulting webhook rewrites an old name first. So on
   0.15.2 `Knative` is taken as the default at creation and refused at the
   next update, on 0.16.0 `Serverless` is refused at the next update, and
   0.18.0 takes both. Standard mode has no revisions and ignores
   `canaryTrafficPercent`.

Faults on demand: `fail_next_revision(reason, message)` crashes the next
revision of a new model (a storageUri no revision had before);
`answer_wrongly()` makes every revision of a new model created from then on
answer 1 - p instead of p; `hold_routes()` stops the Routes from following
the spec; `report_route_first()` has the Knative Service report its Route's
new traffic before its Configuration reports the new revision (knative
service.go L83-96, L116-122, which KServe's template, never named, does not
serialize); `rerender()` re-renders every Knative Service (a
KServe upgrade), which moves `observedGeneration` away from the
InferenceService's `metadata.generation` for good.

Not reproduced: the webhook (defaulting, validation: tests/test_kserve.py
checks the manifest against KServe's own models), runtime selection by
priority (only `kserve-tensorflow-serving`), scale to zero and the activator,
revision garbage collection, the storage initializer (storageUri is read
here directly; gs:// and s3:// are not read), TF Serving itself
(tests/tf_serving_standin.py plays its REST API), DNS and the ingress, and
watches.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from tests.tf_serving_standin import ModelServer

_ISVC = re.compile(
    r"^/apis/serving\.kserve\.io/v1beta1/namespaces/([^/]+)/inferenceservices(?:/([^/]+))?$"
)
_CORE = re.compile(r"^/api/v1/namespaces/([^/]+)/(serviceaccounts|secrets)/([^/]+)$")
_PREDICT = re.compile(r"^/serving/([^/]+)/([^/]+)(?:/tag/([^/]+))?/v1/models/([^/:]+):predict$")
CREATE_LAG_S = 0.05
READY_AFTER_S = 0.3
ROUTE_LAG_S = 0.3
INGRESS_LAG_S = 0.3
DEFAULT_IMAGE_TAG = "2.6.2"  # kserve v0.15.0, v0.17.0 config/runtimes/kustomization.yaml L21
TF_SERVING_RUNTIME = "kserve-tensorflow-serving"
TAG_ROUTING = "serving.kserve.io/enable-tag-routing"
DEPLOYMENT_MODE = "serving.kserve.io/deploymentMode"
STANDARD_MODES = ("RawDeployment", "Standard")
# The legacy names and what they mean from v0.16.0 (constants.go L464-467 at v0.16.0,
# L520-545 at v0.18.0, ParseDeploymentMode; utils.go GetDeploymentMode L229-236).
LEGACY_MODES = {"Serverless": "Knative", "RawDeployment": "Standard"}
# Every name GetDeploymentMode takes from the annotation: v0.15.2 utils.go L183-187,
# v0.16.0 L237-241 (after the legacy names are mapped); any other is the default.
KNOWN_MODES_0_15 = ("Serverless", "RawDeployment", "ModelMesh")
KNOWN_MODES_0_16 = ("Knative", "Standard", "ModelMesh")
# The first release to keep the mode in the status and refuse an update that changes it:
# v0.15.2 inference_service_status.go L55, controller.go L320, inference_service_validation.go
# L90 and L446-457 (v0.15.0 has none of them).
MODE_IN_STATUS_FROM = (0, 15, 2)
# kserve v0.15.0 constants.go ServiceAnnotationDisallowedList: not copied to revisions.
NOT_IN_TEMPLATE = (
    "autoscaling.knative.dev/min-scale",
    "autoscaling.knative.dev/max-scale",
    "internal.serving.kserve.io/storage-initializer-sourceuri",
    "kubectl.kubernetes.io/last-applied-configuration",
)


def _release(text: str) -> tuple[int, int]:
    major, minor = re.match(r"^(\d+)\.(\d+)", text).groups()
    return int(major), int(minor)


def _exported_by(base_path: Path) -> str | None:
    """The TensorFlow version in the highest version's saved_model.pb, as TF Serving loads it."""
    from tensorflow.core.protobuf import saved_model_pb2

    versions = sorted(
        (int(p.name), p) for p in base_path.iterdir() if p.name.isdigit() and p.is_dir()
    )
    if not versions:
        return None
    model = saved_model_pb2.SavedModel()
    model.ParseFromString((versions[-1][1] / "saved_model.pb").read_bytes())
    return model.meta_graphs[0].meta_info_def.tensorflow_version or None


@dataclass
class Revision:
    name: str
    storage_uri: str
    image_tag: str
    created: float
    # ready, crash (fails READY_AFTER_S after it is created) or hang (never
    # Ready; failed at the progress deadline).
    outcome: str = "ready"
    message: str = ""
    wrong: bool = False
    server: ModelServer | None = None

    def ready(self, now: float) -> bool:
        return self.outcome == "ready" and now - self.created >= READY_AFTER_S

    def failed(self, now: float, deadline: float) -> bool:
        if self.outcome == "crash":
            return now - self.created >= READY_AFTER_S
        return self.outcome == "hang" and now - self.created >= deadline


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


class Target(NamedTuple):
    """One entry of a Route's traffic: Knative's TrafficTarget as KServe reads it."""

    revision: str
    percent: int
    tag: str | None
    latest: bool  # latestRevision: the target follows the Configuration's latest Ready revision


@dataclass
class Service:
    """One InferenceService, its Knative Service's state, and its revisions."""

    body: dict[str, Any]
    mode: str
    revisions: list[Revision] = field(default_factory=list)
    template_changed: float | None = None  # a revision is due CREATE_LAG_S after it
    latest_ready: str | None = None
    rolled_out: str | None = None
    previous_rolled_out: str | None = None
    desired: list[Target] = field(default_factory=list)
    desired_since: float = 0.0
    routed: list[Target] = field(default_factory=list)
    routed_since: float = 0.0
    # What the ingress sends requests by: the routed traffic, INGRESS_LAG_S later.
    ingress: list[Target] = field(default_factory=list)
    # Every change of `ingress`, as (storageUri, percent) of each target with traffic.
    ingress_history: list[list[tuple[str, int]]] = field(default_factory=list)
    url: str | None = None
    ksvc_generation: int = 1
    rendered: str = ""
    request_count: int = 0

    @property
    def standard(self) -> bool:
        return self.mode in STANDARD_MODES

    def template(self) -> dict[str, Any]:
        """The revision template KServe renders (everything but canaryTrafficPercent)."""
        predictor = copy.deepcopy(self.body["spec"]["predictor"])
        predictor.pop("canaryTrafficPercent", None)
        meta = self.body["metadata"]
        annotations = {
            k: v for k, v in (meta.get("annotations") or {}).items() if k not in NOT_IN_TEMPLATE
        }
        return {"predictor": predictor, "annotations": annotations, "labels": meta.get("labels")}

    def revision(self, name: str | None) -> Revision | None:
        return next((r for r in self.revisions if r.name == name), None)


def _mode_of(annotations: dict[str, Any], default: str, kserve: tuple[int, ...]) -> str:
    """The mode KServe resolves for a new InferenceService (utils.go GetDeploymentMode:
    v0.15.2 L176-191 takes only its three names, else the default; v0.16.0 L221-245 and
    v0.18.0 L223-247 map the legacy names first). From v0.16.0 a legacy default is read as
    its new name (configmap.go L361-368 at v0.16.0, L363-370 at v0.18.0)."""
    mode = annotations.get(DEPLOYMENT_MODE)
    if kserve < (0, 16):
        return mode if mode in KNOWN_MODES_0_15 else default
    mode = LEGACY_MODES.get(mode, mode)
    return mode if mode in KNOWN_MODES_0_16 else LEGACY_MODES.get(default, default)


class KServeController:
    def __init__(
        self,
        base_url: str,
        # Kubeflow's: kserve.yaml's inferenceservice-config `deploy` at v1.11.0 L32838
        # (KServe v0.15.2, L33015) and 26.03 L73109 (v0.16.0, L73322).
        default_mode: str = "Serverless",
        progress_deadline_s: float = 5.0,
        kserve_version: str = "0.15.2",
    ) -> None:
        self.base_url = base_url
        self.default_mode = default_mode
        self.kserve = tuple(int(x) for x in kserve_version.split("."))
        self.progress_deadline_s = progress_deadline_s
        self.services: dict[tuple[str, str], Service] = {}
        # (namespace, kind, name) -> object: service accounts and secrets.
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.applied: list[tuple[str, dict[str, Any]]] = []  # (verb, body) as received
        self.predict_requests: list[dict[str, Any]] = []
        self._fail_next: tuple[str, str] | None = None
        self._wrong = False
        self._routes_held = False
        self._route_first = False
        self._lock = threading.RLock()

    # --- the test's side -------------------------------------------------
    def add_object(self, namespace: str, kind: str, body: dict[str, Any]) -> None:
        """A ServiceAccount (`serviceaccounts`) or Secret (`secrets`) in `namespace`."""
        self.objects[(namespace, kind, body["metadata"]["name"])] = body

    def seed(
        self, namespace: str, name: str, storage_uri: str, runtime_version: str = "2.16.1"
    ) -> None:
        """An InferenceService someone else created, serving `storage_uri` with all its traffic."""
        with self._lock:
            body = {
                "apiVersion": "serving.kserve.io/v1beta1",
                "kind": "InferenceService",
                "metadata": {"name": name, "namespace": namespace, "generation": 1},
                "spec": {
                    "predictor": {
                        "model": {
                            "modelFormat": {"name": "tensorflow"},
                            "storageUri": storage_uri,
                            "runtimeVersion": runtime_version,
                        }
                    }
                },
            }
            service = Service(body, mode=_mode_of({}, self.default_mode, self.kserve))
            self.services[(namespace, name)] = service
            service.template_changed = -1e9  # long settled
            self._settle(service, time.monotonic())

    def fail_next_revision(self, reason: str, message: str) -> None:
        """The next revision of a storageUri no revision served before crashes."""
        self._fail_next = (reason, message)

    def answer_wrongly(self, wrong: bool = True) -> None:
        """Revisions of a storageUri no revision served before answer 1 - p from now on."""
        self._wrong = wrong

    def report_route_first(self, first: bool = True) -> None:
        """Knative's Service reports its Route's new traffic before its Configuration reports
        the new revision: the Configuration observes the new generation ROUTE_LAG_S later
        than it does by default (knative v0.44.0 and v0.48.1 reconciler/service/service.go
        L83-96: a Configuration that has not observed its generation leaves
        latestCreatedRevision and latestReadyRevision as they were, and L116-122 propagate
        the Route's status anyway)."""
        self._route_first = first

    def hold_routes(self, held: bool = True) -> None:
        """Routes stop following the spec (an ingress that does not take its configuration)."""
        self._routes_held = held

    def rerender(self) -> None:
        """What a KServe upgrade does: every Knative Service is rendered anew."""
        with self._lock:
            for service in self.services.values():
                service.ksvc_generation += 1

    def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            found = self.services.get((namespace, name))
            return None if found is None else self._with_status(found)

    def serving_storage_uri(self, namespace: str, name: str) -> str | None:
        """The storageUri of the revision the routed traffic gives the most."""
        with self._lock:
            found = self.services.get((namespace, name))
            if found is None:
                return None
            self._settle(found, time.monotonic())
            if not found.ingress:
                return None
            best = max(found.ingress, key=lambda t: t.percent).revision
            revision = found.revision(best)
            return revision.storage_uri if revision else None

    def ingress_history(self, namespace: str, name: str) -> list[list[tuple[str, int]]]:
        """Each traffic split the ingress has served, as (storageUri, percent) pairs."""
        with self._lock:
            found = self.services[(namespace, name)]
            self._settle(found, time.monotonic())
            return copy.deepcopy(found.ingress_history)

    # --- the controllers -----------------------------------------------------
    def _new_revision(self, service: Service, now: float) -> None:
        meta = service.body["metadata"]
        model = service.body["spec"]["predictor"]["model"]
        name = f"{meta['name']}-predictor-{len(service.revisions) + 1:05d}"
        uri = model["storageUri"]
        tag = model.get("runtimeVersion") or DEFAULT_IMAGE_TAG
        new_model = all(r.storage_uri != uri for r in service.revisions)
        revision = Revision(
            name=name, storage_uri=uri, image_tag=tag, created=now, wrong=self._wrong and new_model
        )
        if self._fail_next is not None and new_model:
            revision.outcome = "crash"
            revision.message = self._fail_next[1]
            self._fail_next = None
        else:
            self._load(revision)
        service.revisions.append(revision)

    def _load(self, revision: Revision) -> None:
        """TF Serving on the revision's storageUri: loads, crashes or waits."""
        base = Path(revision.storage_uri)
        exported = _exported_by(base) if base.is_dir() else None
        if exported is not None and _release(revision.image_tag) < _release(exported):
            revision.outcome = "crash"
            revision.message = (
                f"Container failed with: Loading servable: {{name: model version: 1}} failed: "
                f"NOT_FOUND: Op type not registered 'DisableCopyOnRead' in binary running "
                f"tensorflow/serving:{revision.image_tag} (the model was written by TensorFlow "
                f"{exported})"
            )
            return
        try:
            revision.server = ModelServer(base)
        except (FileNotFoundError, OSError):
            # TF Serving logs "No versions of servable found" and waits; the pod is never Ready.
            revision.outcome = "hang"
            revision.message = "Initial scale was never achieved"

    def _desired_traffic(self, service: Service) -> list[Target]:
        """The Knative Service's traffic as its Route resolves it: `latestRevision` to
        latestReadyRevision, and no targets while no revision is Ready (knative v0.44.0
        route/traffic/traffic.go addConfigurationTarget L354-377)."""
        if service.latest_ready is None:
            return []
        return [
            Target(
                service.latest_ready if target["latestRevision"] else target["revisionName"],
                target["percent"],
                target["tag"],
                target["latestRevision"],
            )
            for target in self._ksvc_traffic(service)
        ]

    def _ksvc_traffic(self, service: Service) -> list[dict[str, Any]]:
        """The Knative Service's spec.traffic as KServe writes it (ksvc_reconciler.go
        L128-160): `latestRevision: true`, not a name, so a revision becoming Ready changes
        nothing here; the rolled-out revision is named only in a canary split."""
        annotations = service.body["metadata"].get("annotations") or {}
        tag = "latest" if annotations.get(TAG_ROUTING) == "true" else None
        canary = service.body["spec"]["predictor"].get("canaryTrafficPercent")
        if canary is not None and service.rolled_out:
            targets = [{"latestRevision": True, "percent": canary, "tag": tag}]
            if canary < 100:
                targets.append(
                    {
                        "revisionName": service.rolled_out,
                        "latestRevision": False,
                        "percent": 100 - canary,
                        "tag": "prev",
                    }
                )
            return targets
        return [{"latestRevision": True, "percent": 100, "tag": tag}]

    def _next_event(self, service: Service) -> tuple[float, str] | None:
        """The earliest thing a controller does next, and when."""
        due: list[tuple[float, str]] = []
        if service.template_changed is not None:
            lag = CREATE_LAG_S + (ROUTE_LAG_S if self._route_first else 0.0)
            due.append((service.template_changed + lag, "configuration"))
        latest = service.revisions[-1] if service.revisions else None
        if latest is not None and latest.outcome == "ready" and service.latest_ready != latest.name:
            due.append((latest.created + READY_AFTER_S, "ready"))
        if service.routed != service.desired:
            due.append((service.desired_since + ROUTE_LAG_S, "route"))
        if service.ingress != service.routed:
            due.append((service.routed_since + INGRESS_LAG_S, "ingress"))
        return min(due, default=None)

    def _settle(self, service: Service, now: float) -> None:
        """Everything the controllers would have done by `now`, one event at a time in the
        order they come, so that what KServe reads between two of them counts."""
        if service.standard:
            return
        self._follow(service, now)
        while (event := self._next_event(service)) is not None and event[0] <= now:
            at, kind = event
            if kind == "configuration":
                self._new_revision(service, at)
                service.template_changed = None
            elif kind == "ready":
                service.latest_ready = service.revisions[-1].name
            elif kind == "route":
                service.routed, service.routed_since = list(service.desired), at
            else:
                service.ingress = list(service.routed)
                service.ingress_history.append(
                    [
                        (service.revision(t.revision).storage_uri, t.percent)
                        for t in service.ingress
                        if t.percent
                    ]
                )
            self._follow(service, at)
        rendered = json.dumps([service.template(), self._ksvc_traffic(service)], sort_keys=True)
        if rendered != service.rendered:
            if service.rendered:
                service.ksvc_generation += 1
            service.rendered = rendered
        ksvc_ready = self._configuration(service, now)[0] == "True" and self._route_ready(service)
        if service.url is None and ksvc_ready:
            meta = service.body["metadata"]
            service.url = f"{self.base_url}/serving/{meta['namespace']}/{meta['name']}"

    def _follow(self, service: Service, at: float) -> None:
        """KServe reads the Knative Service's status, then renders its traffic anew."""
        self._propagate(service)
        desired = self._desired_traffic(service)
        if desired != service.desired and not self._routes_held:
            service.desired, service.desired_since = desired, at

    @staticmethod
    def _propagate(service: Service) -> None:
        """kserve v0.15.0 pkg/apis/serving/v1beta1/inference_service_status.go PropagateStatus
        L444-472 (v0.16.0 L527-555, v0.17.0 L529-557, unchanged), on the Knative Service's
        status: a latestRevision target on the latest Ready revision with 100% rolls it out
        and keeps the one before as previousRolledoutRevision (L451-458). The second branch
        (L459-470) is KServe's rollback: when that revision is already the rolled-out one and
        also the latest created, and its latestRevision target has less than 100% while all
        its targets add up to 100%, the rolled-out revision goes back to the previous one,
        and the traffic KServe renders sends `prev` there (ksvc_reconciler.go L119, L140-148).
        A canaryTrafficPercent patched onto an unchanged template does that on purpose; a
        model and canaryTrafficPercent patched together do it when the Route reports before
        the Configuration (`report_route_first`)."""
        latest_created = service.revisions[-1].name if service.revisions else None
        totals: dict[str, int] = {}
        for target in service.routed:
            totals[target.revision] = totals.get(target.revision, 0) + target.percent
        for target in service.routed:
            if target.revision != service.latest_ready or not target.latest:
                continue
            if service.rolled_out != service.latest_ready:
                if target.percent == 100:
                    service.previous_rolled_out = service.rolled_out
                    service.rolled_out = service.latest_ready
            elif (
                service.latest_ready == latest_created
                and target.percent < 100
                and totals[target.revision] == 100
                and service.previous_rolled_out
            ):
                service.rolled_out = service.previous_rolled_out

    @staticmethod
    def _route_ready(service: Service) -> bool:
        """Knative's RoutesReady: the traffic routed as the spec says, and the ingress serving it
        (knative service.go checkRoutesNotReady; the Route's IngressReady)."""
        return bool(service.routed) and service.routed == service.desired == service.ingress

    def _configuration(self, service: Service, now: float) -> tuple[str, str, str]:
        """Knative's ConfigurationsReady for the latest created revision."""
        latest = service.revisions[-1] if service.revisions else None
        if latest is None:
            return "Unknown", "", ""
        if latest.failed(now, self.progress_deadline_s):
            reason = "RevisionFailed"
            message = f'Revision "{latest.name}" failed with message: {latest.message}.'
            return "False", reason, message
        if service.latest_ready == latest.name:
            return "True", "", ""
        return "Unknown", "", ""

    def _with_status(self, service: Service) -> dict[str, Any]:
        now = time.monotonic()
        self._settle(service, now)
        body = copy.deepcopy(service.body)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        if service.standard:
            body["status"] = {
                "observedGeneration": body["metadata"]["generation"],
                "url": f"{self.base_url}/serving/{namespace}/{name}",
                "conditions": [{"type": "Ready", "status": "True"}],
                "components": {"predictor": {}},
            }
            return body
        config_status, reason, message = self._configuration(service, now)
        route_ready = self._route_ready(service)
        conditions = [
            {"type": "PredictorConfigurationReady", "status": config_status}
            | ({"reason": reason, "message": message} if reason else {}),
            {"type": "PredictorRouteReady", "status": "True" if route_ready else "Unknown"},
        ]
        if config_status == "False":
            ready = {"status": "False", "reason": reason, "message": message}
        else:
            ready = {"status": "True" if config_status == "True" and route_ready else "Unknown"}
        conditions.append({"type": "PredictorReady", **ready})
        conditions.append(
            {"type": "LatestDeploymentReady", "status": config_status}
            | (
                {"reason": "PredictorConfigurationReady not ready"}
                if config_status != "True"
                else {}
            )
        )
        conditions.append({"type": "Ready", "status": ready["status"]})
        latest = service.revisions[-1] if service.revisions else None
        # Empty fields are left out, as Go's omitempty leaves them (ComponentStatusSpec).
        # In ComponentStatusSpec's order (inference_service_status.go v0.15.0 L57-69).
        revisions = {
            key: value
            for key, value in (
                ("latestReadyRevision", service.latest_ready),
                ("latestCreatedRevision", latest.name if latest else None),
                ("previousRolledoutRevision", service.previous_rolled_out),
                ("latestRolledoutRevision", service.rolled_out),
            )
            if value
        }
        status: dict[str, Any] = {
            "observedGeneration": service.ksvc_generation,
            "conditions": conditions,
            "components": {
                "predictor": {
                    **revisions,
                    "traffic": [
                        {
                            "revisionName": target.revision,
                            "percent": target.percent,
                            "latestRevision": target.latest,
                        }
                        | (
                            {"tag": target.tag, "url": self._url(service, target.tag)}
                            if target.tag is not None
                            else {}
                        )
                        for target in service.routed
                    ],
                }
            },
        }
        if not service.routed:
            del status["components"]["predictor"]["traffic"]  # omitempty, as above
        if self.kserve >= MODE_IN_STATUS_FROM:  # status.deploymentMode
            status["deploymentMode"] = service.mode
        if service.url:
            status["url"] = service.url
            status["components"]["predictor"]["url"] = service.url
        body["status"] = status
        return body

    def _url(self, service: Service, tag: str) -> str:
        meta = service.body["metadata"]
        return f"{self.base_url}/serving/{meta['namespace']}/{meta['name']}/tag/{tag}"

    # --- the API ------------------------------------------------------------
    def answers(self, path: str) -> bool:
        return any(r.match(path) for r in (_CORE, _PREDICT, _ISVC))

    def handle(self, method: str, path: str, raw: bytes) -> tuple[int, Any] | None:
        """(status, JSON) for a call this controller answers; None for any other."""
        if match := _PREDICT.match(path):
            return self._predict(*match.groups(), raw) if method == "POST" else None
        body = json.loads(raw) if raw else None
        if match := _CORE.match(path):
            if method != "GET":
                return None
            namespace, kind, name = match.groups()
            found = self.objects.get((namespace, kind, name))
            if found is None:
                return 404, _status(404, "NotFound", f'{kind} "{name}" not found')
            return 200, found
        match = _ISVC.match(path)
        if not match:
            return None
        namespace, name = match.groups()
        with self._lock:
            now = time.monotonic()
            if method == "POST" and not name:
                name = body["metadata"]["name"]
                if (namespace, name) in self.services:
                    return 409, _status(
                        409,
                        "AlreadyExists",
                        f'inferenceservices.serving.kserve.io "{name}" already exists',
                    )
                self.applied.append(("create", copy.deepcopy(body)))
                body["metadata"].update(namespace=namespace, generation=1, uid=f"isvc-{name}")
                self._default(body)
                annotations = body["metadata"].get("annotations") or {}
                mode = _mode_of(annotations, self.default_mode, self.kserve)
                service = Service(body, mode=mode, template_changed=now)
                self.services[(namespace, name)] = service
                return 201, self._with_status(service)
            service = self.services.get((namespace, name or ""))
            if service is None:
                return 404, _status(
                    404, "NotFound", f'inferenceservices.serving.kserve.io "{name}" not found'
                )
            if method == "GET":
                return 200, self._with_status(service)
            if method == "PATCH":
                self.applied.append(("patch", copy.deepcopy(body)))
                self._settle(service, now)
                before = service.template()
                updated = _merge(copy.deepcopy(service.body), body)
                self._default(updated)
                denied = self._validate_mode(service, updated)
                if denied:
                    return 400, _status(400, "BadRequest", denied)
                service.body = updated
                service.body["metadata"]["generation"] += 1
                if service.template() != before:
                    service.template_changed = now
                return 200, self._with_status(service)
            if method == "DELETE":
                self.applied.append(("delete", {"name": name}))
                del self.services[(namespace, name)]
                return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
        return None

    def _default(self, body: dict[str, Any]) -> None:
        """The mutating webhook: from v0.17.0 it rewrites a legacy mode annotation
        (inference_service_defaults.go L160-170 at v0.17.0, L166-176 at v0.18.0); v0.15.2
        and v0.16.0 leave it (L157-168)."""
        annotations = body["metadata"].get("annotations") or {}
        mode = annotations.get(DEPLOYMENT_MODE)
        if self.kserve >= (0, 17) and mode in LEGACY_MODES:
            annotations[DEPLOYMENT_MODE] = LEGACY_MODES[mode]

    def _validate_mode(self, service: Service, updated: dict[str, Any]) -> str | None:
        """The validating webhook from v0.15.2 (inference_service_validation.go
        validateDeploymentMode: v0.15.2 L446-457, v0.16.0 L493-503, v0.18.0 L584-594): the
        annotation must equal the mode in the status, as written. So v0.15.2 refuses a
        `Knative` it took as its default, v0.16.0 a `Serverless` against the status'
        `Knative`; v0.17.0's defaulter has rewritten that one by then."""
        if self.kserve < MODE_IN_STATUS_FROM:
            return None
        annotation = (updated["metadata"].get("annotations") or {}).get(DEPLOYMENT_MODE)
        if annotation is not None and annotation != service.mode:
            return (
                'admission webhook "inferenceservice.kserve-webhook-server.validator" denied '
                f"the request: update rejected: deploymentMode cannot be changed from "
                f"'{service.mode}' to '{annotation}'"
            )
        return None

    def _predict(
        self, namespace: str, name: str, tag: str | None, model: str, body: bytes
    ) -> tuple[int, Any]:
        with self._lock:
            service = self.services.get((namespace, name))
            if service is None:
                return 404, {"error": f"no route for {name}.{namespace}"}
            self._settle(service, time.monotonic())
            if tag is not None:
                target = next((t for t in service.ingress if t.tag == tag), None)
                if target is None:
                    return 404, {"error": f"no route for {tag}-{name}.{namespace}"}
                revision = service.revision(target.revision)
            else:
                revision = self._split(service)
        if revision is None or revision.server is None:
            return 503, {"error": f"no revision of {name} is serving"}
        if model != name:
            return 404, {"error": f"Servable not found for request: Latest({model})"}
        # With the share of the traffic the revision had when the request came.
        percent = sum(t.percent for t in service.ingress if t.revision == revision.name)
        self.predict_requests.append(
            {
                "revision": revision.name,
                "storage_uri": revision.storage_uri,
                "tag": tag,
                "percent": percent,
                "body": json.loads(body),
            }
        )
        status, answer = revision.server.predict(body)
        if status == 200 and revision.wrong:
            answer["predictions"] = (1.0 - np.asarray(answer["predictions"])).tolist()
        return status, answer

    def _split(self, service: Service) -> Revision | None:
        """The revision the service's URL sends this request to: the routed percentages, played
        in a fixed order (request n goes to the target holding slot n mod 100)."""
        slot = service.request_count % 100
        service.request_count += 1
        for target in service.ingress:
            if slot < target.percent:
                return service.revision(target.revision)
            slot -= target.percent
        return None


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
