"""KServe's controller and its predictors, played inside tests/kubernetes_standin.py.

The API calls the Deploy step makes (kubeflow/kserve/cluster.py):

    GET/POST       /apis/serving.kserve.io/v1beta1/namespaces/NS/inferenceservices[/NAME]
    PATCH (merge)  /apis/serving.kserve.io/v1beta1/namespaces/NS/inferenceservices/NAME
    DELETE         /apis/serving.kserve.io/v1beta1/namespaces/NS/inferenceservices/NAME
    GET            /api/v1/namespaces/NS/serviceaccounts/NAME, /api/v1/namespaces/NS/secrets/NAME

and each revision's REST predict endpoint, `POST <revision URL>/v1/models/NAME:predict`.

What it does as KServe 0.15 does, in miniature: a change to the predictor
(anything but `canaryTrafficPercent`) creates a revision `<name>-predictor-0000N`.
A revision becomes Ready shortly after it is created if TF Serving could load
its `storageUri` (read as TF Serving reads a model base path:
tests/tf_serving_standin.py), and fails otherwise (`LatestDeploymentReady`
False, `RevisionFailed`, with TF Serving's message). Traffic: a Ready latest
revision takes `canaryTrafficPercent` (all of it when unset) and the last
rolled-out revision the rest; a revision that is not Ready takes none. With
tag routing, the latest and previous revisions have URLs of their own.
`metadata.generation` and `status.observedGeneration` follow each change.

Faults on demand: `fail_next_revision(reason, message)` fails the next revision
created; `answer_wrongly()` makes every revision created from then on answer
1 - p instead of p.

Not reproduced: the real controller and webhook (defaulting, validation beyond
what the step's manifest is checked against: tests/test_kserve.py checks it
against KServe's own models), Knative (serverless mode, scale to zero, the
activator, revision garbage collection) or raw deployment mode, the storage
initializer (storageUri is read here directly; gs:// and s3:// are not read),
TF Serving itself (tests/tf_serving_standin.py plays its REST API), networking
(DNS, Istio, the ingress), and watches.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tests.tf_serving_standin import ModelServer

_ISVC = re.compile(
    r"^/apis/serving\.kserve\.io/v1beta1/namespaces/([^/]+)/inferenceservices(?:/([^/]+))?$"
)
_CORE = re.compile(r"^/api/v1/namespaces/([^/]+)/(serviceaccounts|secrets)/([^/]+)$")
_PREDICT = re.compile(r"^/serving/([^/]+)/([^/]+)/v1/models/([^/:]+):predict$")
READY_AFTER_S = 0.5


@dataclass
class Revision:
    name: str
    storage_uri: str
    created: float
    failure: tuple[str, str] | None = None  # (reason, message)
    wrong: bool = False
    server: ModelServer | None = None

    def ready(self) -> bool:
        return self.failure is None and time.monotonic() - self.created >= READY_AFTER_S


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


class Service:
    """One InferenceService: its object, its revisions, the last rolled-out one."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.revisions: list[Revision] = []
        self.rolled_out: str | None = None

    def predictor_spec(self) -> dict[str, Any]:
        spec = copy.deepcopy(self.body["spec"]["predictor"])
        spec.pop("canaryTrafficPercent", None)
        return spec


class KServeController:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.services: dict[tuple[str, str], Service] = {}
        # (namespace, kind, name) -> object: service accounts and secrets.
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.applied: list[tuple[str, dict[str, Any]]] = []  # (verb, body) as received
        self.predict_requests: list[dict[str, Any]] = []
        self._fail_next: tuple[str, str] | None = None
        self._wrong = False
        self._lock = threading.RLock()

    # --- the test's side -------------------------------------------------
    def add_object(self, namespace: str, kind: str, body: dict[str, Any]) -> None:
        """A ServiceAccount (`serviceaccounts`) or Secret (`secrets`) in `namespace`."""
        self.objects[(namespace, kind, body["metadata"]["name"])] = body

    def seed(self, namespace: str, name: str, storage_uri: str) -> None:
        """An InferenceService already serving `storage_uri` with all its traffic."""
        with self._lock:
            body = {
                "apiVersion": "serving.kserve.io/v1beta1",
                "kind": "InferenceService",
                "metadata": {"name": name, "namespace": namespace, "generation": 1},
                "spec": {
                    "predictor": {
                        "model": {"modelFormat": {"name": "tensorflow"}, "storageUri": storage_uri}
                    }
                },
            }
            service = Service(body)
            self.services[(namespace, name)] = service
            self._new_revision(service)
            service.revisions[-1].created -= READY_AFTER_S
            self._traffic(service)

    def fail_next_revision(self, reason: str, message: str) -> None:
        self._fail_next = (reason, message)

    def answer_wrongly(self, wrong: bool = True) -> None:
        self._wrong = wrong

    def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            found = self.services.get((namespace, name))
            return None if found is None else self._with_status(found)

    def serving_storage_uri(self, namespace: str, name: str) -> str | None:
        """The storageUri of the revision that has the most traffic."""
        with self._lock:
            found = self.services.get((namespace, name))
            if found is None:
                return None
            traffic = self._traffic(found)
            best = max(traffic, key=lambda t: t[1])[0] if traffic else None
            return next((r.storage_uri for r in found.revisions if r.name == best), None)

    # --- the controller ----------------------------------------------------
    def _new_revision(self, service: Service) -> None:
        meta = service.body["metadata"]
        name = f"{meta['name']}-predictor-{len(service.revisions) + 1:05d}"
        uri = service.body["spec"]["predictor"]["model"]["storageUri"]
        revision = Revision(name=name, storage_uri=uri, created=time.monotonic(), wrong=self._wrong)
        if self._fail_next is not None:
            revision.failure, self._fail_next = self._fail_next, None
        else:
            try:
                revision.server = ModelServer(uri)
            except (FileNotFoundError, OSError) as err:
                revision.failure = (
                    "RevisionFailed",
                    f'Revision "{name}" failed with message: container kserve-container: {err}',
                )
        service.revisions.append(revision)

    def _traffic(self, service: Service) -> list[tuple[str, int, str | None]]:
        """(revision, percent, tag) per target; updates the rolled-out revision."""
        latest = service.revisions[-1] if service.revisions else None
        canary = service.body["spec"]["predictor"].get("canaryTrafficPercent")
        if latest is None:
            return []
        if not latest.ready():
            return [(service.rolled_out, 100, "prev")] if service.rolled_out else []
        if canary is None or service.rolled_out in (None, latest.name):
            service.rolled_out = latest.name
            return [(latest.name, 100, "latest")]
        return [(service.rolled_out, 100 - canary, "prev"), (latest.name, canary, "latest")]

    def _with_status(self, service: Service) -> dict[str, Any]:
        body = copy.deepcopy(service.body)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        traffic = self._traffic(service)
        latest = service.revisions[-1] if service.revisions else None
        ready = [r.name for r in service.revisions if r.ready()]
        conditions = []
        if latest is not None and latest.failure is not None:
            reason, message = latest.failure
            conditions.append(
                {
                    "type": "LatestDeploymentReady",
                    "status": "False",
                    "reason": reason,
                    "message": message,
                }
            )
        elif latest is not None:
            conditions.append(
                {"type": "LatestDeploymentReady", "status": "True" if latest.ready() else "Unknown"}
            )
        conditions.append({"type": "Ready", "status": "True" if traffic else "False"})
        body["status"] = {
            "observedGeneration": body["metadata"]["generation"],
            "url": f"{self.base_url}/serving/{namespace}/{name}",
            "conditions": conditions,
            "components": {
                "predictor": {
                    "latestCreatedRevision": latest.name if latest else None,
                    "latestReadyRevision": ready[-1] if ready else None,
                    "latestRolledoutRevision": service.rolled_out,
                    "traffic": [
                        {
                            "revisionName": r,
                            "percent": p,
                            "tag": tag,
                            "latestRevision": tag == "latest",
                            "url": f"{self.base_url}/serving/{namespace}/{r}",
                        }
                        for r, p, tag in traffic
                    ],
                }
            },
        }
        return body

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
                service = Service(body)
                self.services[(namespace, name)] = service
                self._new_revision(service)
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
                self._traffic(service)  # settle the rollout so far before the change
                before = service.predictor_spec()
                _merge(service.body, body)
                service.body["metadata"]["generation"] += 1
                if service.predictor_spec() != before:
                    self._new_revision(service)
                return 200, self._with_status(service)
            if method == "DELETE":
                self.applied.append(("delete", {"name": name}))
                del self.services[(namespace, name)]
                return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
        return None

    def _predict(self, namespace: str, target: str, model: str, body: bytes) -> tuple[int, Any]:
        with self._lock:
            revision = next(
                (
                    r
                    for (ns, _), s in self.services.items()
                    if ns == namespace
                    for r in s.revisions
                    if r.name == target
                ),
                None,
            )
        if revision is None or not revision.ready() or revision.server is None:
            return 503, {"error": f"revision {target} is not serving"}
        service_name = target.rsplit("-predictor-", 1)[0]
        if model != service_name:
            return 404, {"error": f"Servable not found for request: Latest({model})"}
        self.predict_requests.append({"revision": target, "body": json.loads(body)})
        status, answer = revision.server.predict(body)
        if status == 200 and revision.wrong:
            answer["predictions"] = (1.0 - np.asarray(answer["predictions"])).tolist()
        return status, answer


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
