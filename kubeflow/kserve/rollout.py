"""A pushed version's way to traffic: at 0%, smoke request, canary, promotion; else roll back.

First version (no InferenceService yet): create it (Serverless, tag routing),
wait until the Route sends its `latest` tag to the new revision, send the
smoke request there. If it fails or answers wrongly, delete the service:
nothing served before, so nothing is lost, and no wrong model stays up.

Later versions:

0. if KServe could roll traffic back to a revision before the rolled-out one
   (`previousRolledoutRevision`, see `_pin_fallback`), roll the rolled-out
   model out once more as a new revision with all the traffic, so that the
   revision KServe falls back to serves the same model;
1. patch the predictor's model with `canaryTrafficPercent: 0`: the revision
   rolled out before keeps all the traffic (KServe splits only when a
   revision was rolled out: ksvc_reconciler.go L130);
2. wait until the new revision is Ready *and* routed: the `latest` tag's
   traffic entry names it, with a URL, and `PredictorRouteReady` is True
   (Knative marks a revision Ready before its Route lists it);
3. send the smoke request to that tag URL, never to the service's URL;
4. give it `canary_traffic_percent`, then promote it (remove
   `canaryTrafficPercent`) under `after_smoke`, or leave the canary for a
   person under `manual`.

A revision that fails, is not routed in time or answers wrongly is rolled
back to the model that was *rolled out* (not whatever the spec held): its
storage URI, version and runtime are recorded on the InferenceService with
every change of the model, because an annotation written alone would roll out
a revision of its own. The restored model comes back at 0% (traffic stays on
the rolled-out revision) and takes the traffic once routed. The step then
fails, naming the revision and Knative's message.

Whatever the InferenceService has rolled out (`latestRolledoutRevision`'s
model) is also recorded in `<storage_root>/rolled_out.json`
(components/serving/served_version.py): when a rollout starts (the version before,
which keeps the traffic through the canary and any rollback), and when a
version takes all the traffic. The batch scorer on Kubeflow scores with
that version, read with the object store's credentials it already has.

What a rerun finds after a step killed mid-rollout, and does, is in
docs/serving.md ("A Deploy step cut short").
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from components.serving.rollout_record import record_rolled_out, rolled_out_record
from kubeflow.kserve import manifest
from kubeflow.kserve.cluster import ServingCluster
from kubeflow.kserve.credentials import CredentialError, check_credentials
from kubeflow.kserve.manifest import PredictorStatus, ServedModel
from kubeflow.kserve.smoke import SmokeError, disagreement, predict, request_body

POLL_SECONDS = 1.0
T = TypeVar("T")
# What a timeout waiting for a revision cannot tell apart, and where to look.
PROGRESS_DEADLINE_HINT = (
    "Knative fails a revision that never becomes Ready only at its progress deadline "
    "(600s unless config-deployment's progress-deadline says otherwise): an image it "
    "cannot pull, a storage initializer that cannot read storageUri, or a model TF "
    "Serving finds no version of all look like this until then; `kubectl describe "
    "revision` and the revision's pod events say which"
)


class DeployError(RuntimeError):
    """The version did not reach traffic; the message says why and what serves instead.

    `rejects`: the version does not serve and never will from this step, so it
    must not be taken for the served version (a promotion that only ran late
    does not reject).
    """

    def __init__(self, message: str, *, rejects: bool = True) -> None:
        super().__init__(message)
        self.rejects = rejects


@dataclass
class Outcome:
    """What the step did; the run report and the KFP metrics show it."""

    outcome: str  # created, promoted, canary, already_serving, skipped
    summary: str
    version: str | None = None
    storage_uri: str | None = None
    url: str | None = None
    traffic: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Rollout:
    """One version's rollout on one InferenceService (config: `Serving.to_json()`)."""

    cluster: ServingCluster
    config: Mapping[str, Any]
    namespace: str
    version: str
    storage_uri: str
    # The rows and what the pushed model scores for them (kubeflow/kserve/smoke.py).
    instances: list[dict]
    expected: Any
    # The predictor's runtimeVersion (kubeflow/kserve/serving_runtime.py).
    runtime_version: str | None = None
    log: Callable[[str], None] = print
    poll_seconds: float = POLL_SECONDS

    @property
    def name(self) -> str:
        return self.config["inference_service"]

    @property
    def where(self) -> str:
        return f"InferenceService {self.namespace}/{self.name}"

    @property
    def candidate(self) -> ServedModel:
        return ServedModel(self.storage_uri, self.version, self.runtime_version)

    def check_credentials(self) -> str:
        """What the predictor reads its model with (logged); DeployError when it cannot."""
        try:
            used = check_credentials(
                self.cluster,
                self.namespace,
                self.config.get("service_account"),
                self.storage_uri,
                self.config["kserve_version"],
            )
        except CredentialError as err:
            raise DeployError(str(err)) from None
        self.log(f"Credentials for {self.storage_uri}: {used}")
        return used

    # --- the rollout --------------------------------------------------------------------
    def run(self) -> Outcome:
        self.check_credentials()
        existing = self.cluster.get_service(self.namespace, self.name)
        if existing is None:
            return self._first(None)
        status = PredictorStatus.of(existing)
        self._check_mode(existing, status)
        rolled_out = self._rolled_out(existing, status)
        if rolled_out is None:
            return self._first(status)
        if (
            rolled_out.storage_uri == self.storage_uri
            and status.settled()
            and manifest.canary_percent(existing) is None
        ):
            self._record(self.candidate)
            return self._outcome(
                "already_serving", f"version {self.version} already serves all traffic", status
            )
        return self._canary(status, rolled_out)

    def _check_mode(self, existing: Mapping[str, Any], status: PredictorStatus) -> None:
        mode = (
            manifest.metadata_annotations(existing).get(manifest.DEPLOYMENT_MODE_ANNOTATION)
            or status.deployment_mode
        )
        standard = mode is not None and mode not in manifest.SERVERLESS_MODES
        # Standard (raw deployment) mode reports no revisions even once Ready.
        if not standard and mode is None and status.is_true("Ready") and not status.latest_created:
            standard, mode = True, "Standard (it reports no revisions)"
        if standard:
            raise DeployError(
                f"{self.where} runs in {mode} mode: it has no revisions, so no version can be "
                "tried at 0% of the traffic, canaried or rolled back. The Deploy step serves "
                "from a Serverless (Knative) InferenceService, which it creates itself: delete "
                "this one or name another serving.inference_service (docs/serving.md)"
            )

    def _rolled_out(
        self, existing: Mapping[str, Any], status: PredictorStatus
    ) -> ServedModel | None:
        """The model of `latestRolledoutRevision`; None when nothing was rolled out yet."""
        if status.rolled_out is None:
            if manifest.metadata_annotations(existing).get(manifest.MANAGED_ANNOTATION) != (
                manifest.MANAGED_BY
            ):
                raise DeployError(
                    f"{self.where} was not created by the Deploy step and has no rolled-out "
                    f"revision ({status.describe()}): it will not take it over. Delete it, or "
                    "name another serving.inference_service"
                )
            return None
        if status.rolled_out == status.latest_created:
            return manifest.spec_model(existing)
        recorded = manifest.recorded_rolled_out(existing)
        if recorded is None:
            raise DeployError(
                f"{self.where} is in the middle of a rollout the Deploy step did not start "
                f"({status.describe()}) and records no rolled-out model, so there would be "
                "nothing certain to roll back to. Finish or undo that rollout (all traffic on "
                "one revision, no canaryTrafficPercent), then run again"
            )
        return recorded

    def _first(self, status: PredictorStatus | None) -> Outcome:
        """Creates the service (or, if a cut-short step left one that never served, replaces
        its model); the version takes the traffic once its smoke request passes."""
        if status is None:
            self.log(f"Creating {self.where} on {self.storage_uri}")
            self.cluster.create_service(
                manifest.inference_service(
                    self.config, self.namespace, self.candidate, self._change("create")
                )
            )
            before = None
        else:
            self.log(f"{self.where} never served a version: putting {self.storage_uri} on it")
            before = status.latest_created
            self._put_model(self.candidate, None, None, status, "replace")
        try:
            revision, url = self._await_routed(before)
            self._smoke(url, revision)
        except DeployError as err:
            self.cluster.delete_service(self.namespace, self.name)
            self._record(None)
            raise DeployError(
                f"{err}. Nothing served before: the InferenceService is deleted"
            ) from None
        status = self._settle(
            lambda s: s.percent_of(revision) == 100, f"revision {revision} to take all traffic"
        )
        self._record(self.candidate)
        return self._outcome("created", f"version {self.version} serves all traffic", status)

    def _canary(self, status: PredictorStatus, rolled_out: ServedModel) -> Outcome:
        # Before anything changes: a step cut short, a canary left for a person, or a
        # rollback leaves this version serving, and the record saying so.
        self._record(rolled_out)
        status = self._pin_fallback(status, rolled_out)
        self.log(
            f"Rolling out {self.storage_uri} on {self.where} at 0% of the traffic; "
            f"{rolled_out.storage_uri} (version {rolled_out.version}, rolled out) keeps it"
        )
        self._put_model(self.candidate, rolled_out, 0, status, "rollout")
        try:
            revision, url = self._await_routed(status.latest_created)
            self._smoke(url, revision)
        except DeployError as err:
            self._roll_back(rolled_out, str(err))
        percent = self.config["canary_traffic_percent"]
        if percent:
            self.log(f"Giving revision {revision} {percent}% of the traffic")
            self.cluster.patch_service(self.namespace, self.name, manifest.traffic_patch(percent))
            status = self._settle(
                lambda s: s.percent_of(revision) == percent,
                f"revision {revision} to take {percent}% of the traffic",
            )
        if self.config["promotion"] == "manual":
            return self._outcome(
                "canary",
                f"version {self.version} passed its smoke request and takes {percent}% of the "
                "traffic; promotion is manual (docs/serving.md)",
                status,
            )
        self.log(f"Promoting revision {revision} to all traffic")
        self.cluster.patch_service(self.namespace, self.name, manifest.traffic_patch(None))
        status = self._settle(
            lambda s: s.percent_of(revision) == 100 and s.rolled_out == revision,
            f"revision {revision} to take all traffic",
        )
        self._record(self.candidate)
        return self._outcome("promoted", f"version {self.version} serves all traffic", status)

    def _pin_fallback(self, status: PredictorStatus, rolled_out: ServedModel) -> PredictorStatus:
        """Makes the revision KServe's rollback sends traffic to serve the rolled-out model.

        Knative's Service reports its Route's new traffic even while its Configuration has
        not yet observed the new template (knative v0.44.0 to HEAD reconciler/service/
        service.go L83-96, L116-122; KServe never names the template, which would serialize
        them). For that moment the split `[rolled-out 0% latest, rolled-out 100% prev]`
        comes with the rolled-out revision still the latest created, and KServe moves
        `latestRolledoutRevision` back to `previousRolledoutRevision` for the rest of the
        canary (kserve v0.15.0 inference_service_status.go L459-470; v0.16.0 L542-553,
        v0.17.0 L544-555). No order of patches avoids it: `canaryTrafficPercent` patched
        before the model does it every time (that is KServe's documented rollback), and the
        model patched first gives the new revision all the traffic once Ready. So the
        rolled-out model is rolled out once more, without a split (a new revision takes all
        the traffic; no rollback branch applies), and the revision it replaces, which serves
        the same model, becomes the one KServe would fall back to."""
        if not status.rollback_target_differs():
            return status
        self.log(
            f"KServe would fall back to revision {status.previous_rolled_out} during a canary; "
            f"rolling {rolled_out.storage_uri} (version {rolled_out.version}) out again first "
            "so that the revision it falls back to serves it"
        )
        self._put_model(rolled_out, rolled_out, None, status, "pin")
        try:
            revision, _ = self._await_routed(status.latest_created)
            return self._settle(
                lambda s: s.rolled_out == revision and s.percent_of(revision) == 100,
                f"revision {revision} (version {rolled_out.version} again) to take all traffic",
            )
        except DeployError as err:
            raise DeployError(
                f"version {self.version} was not tried: rolling version {rolled_out.version} "
                f"out again before its canary did not finish ({err}). Version "
                f"{rolled_out.version} keeps the traffic",
                rejects=False,
            ) from None

    def _roll_back(self, rolled_out: ServedModel, reason: str) -> None:
        """Restores the rolled-out model (its revision keeps the traffic meanwhile); raises."""
        self.log(f"Rolling back to {rolled_out.storage_uri}: {reason}")
        status = self._status()
        self._put_model(rolled_out, rolled_out, 0, status, "rollback")
        restored = "serves all traffic again"
        try:
            self._await_routed(status.latest_created)
            self.cluster.patch_service(self.namespace, self.name, manifest.traffic_patch(None))
        except DeployError as err:
            restored = (
                f"is back in the spec, but its new revision is not routed yet ({err}); "
                "canaryTrafficPercent 0 keeps all traffic on the last rolled-out revision"
            )
        raise DeployError(
            f"version {self.version} rolled back: {reason}. {rolled_out.storage_uri} (version "
            f"{rolled_out.version}) {restored}"
        )

    def _put_model(
        self,
        served: ServedModel,
        rolled_out: ServedModel | None,
        canary_percent: int | None,
        status: PredictorStatus,
        kind: str,
    ) -> None:
        """Patches `served` onto the predictor (a new revision), recording `rolled_out`."""
        self.cluster.patch_service(
            self.namespace,
            self.name,
            manifest.model_patch(
                self.config,
                served,
                rolled_out,
                canary_percent=canary_percent,
                mode=status.deployment_mode,
                change=self._change(kind),
            ),
        )

    def _record(self, model: ServedModel | None) -> None:
        """Records `model` as what the InferenceService rolled out (None: nothing serves)."""
        record_rolled_out(
            rolled_out_record(self.config["storage_root"]),
            None if model is None else model.version,
            "" if model is None else model.storage_uri,
            f"{self.namespace}/{self.name}",
        )

    def _change(self, kind: str) -> str:
        """A name for one change of the model: what, for which version, when (UTC)."""
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        return f"{kind} {self.version} {stamp}"

    # --- waiting and reading ------------------------------------------------------------
    def _status(self) -> PredictorStatus:
        service = self.cluster.get_service(self.namespace, self.name)
        if service is None:
            raise DeployError(f"{self.where} disappeared")
        return PredictorStatus.of(service)

    def _wait(
        self,
        check: Callable[[PredictorStatus], T | None],
        what: str,
        *,
        hint: str = "",
        rejects: bool = True,
    ) -> tuple[T, PredictorStatus]:
        """Polls until `check` returns something; raises with the last status on timeout."""
        timeout = self.config["ready_timeout_seconds"]
        deadline = time.monotonic() + timeout
        while True:
            status = self._status()
            found = check(status)
            if found is not None and found is not False:
                return found, status
            if time.monotonic() > deadline:
                raise DeployError(
                    f"timed out after {timeout}s waiting for {what} (serving.ready_timeout); "
                    f"last seen: {status.describe()}" + (f". {hint}" if hint else ""),
                    rejects=rejects,
                )
            time.sleep(self.poll_seconds)

    def _await_routed(self, before: str | None) -> tuple[str, str]:
        """A revision created after `before`, Ready and routed: its name and tag URL."""

        def routed(status: PredictorStatus) -> tuple[str, str] | None:
            new = status.latest_created
            if new is None or new == before:
                return None
            if status.latest_ready != new:
                failure = status.failure()
                if failure is not None:
                    raise DeployError(f"revision {new} failed: {failure}")
                return None
            target = status.routed(new)
            return (new, target.url) if target is not None and target.url else None

        found, _ = self._wait(
            routed,
            "a new revision to be Ready and routed (its `latest` tag URL)",
            hint=PROGRESS_DEADLINE_HINT,
        )
        return found

    def _settle(self, done: Callable[[PredictorStatus], bool], what: str) -> PredictorStatus:
        """Waits for traffic to move after the smoke request passed: a timeout here fails the
        step but never rejects the version, which serves or is about to. Done once the
        Route serves it too (`PredictorRouteReady`: the ingress follows the status' traffic)."""
        _, status = self._wait(
            lambda s: done(s) and s.is_true(manifest.ROUTE_READY), what, rejects=False
        )
        return status

    def _smoke(self, url: str, revision: str) -> None:
        try:
            answered = predict(url, self.name, request_body(self.instances))
        except SmokeError as err:
            raise DeployError(f"revision {revision}'s smoke request failed: {err}") from None
        problem = disagreement(self.expected, answered, self.config["tolerance"])
        if problem:
            raise DeployError(
                f"revision {revision} answered the smoke request ({len(self.instances)} eval "
                f"rows) differently from the pushed model: {problem}"
            )
        self.log(f"Revision {revision} answered {len(self.instances)} eval rows as the model does")

    def _outcome(self, outcome: str, summary: str, status: PredictorStatus) -> Outcome:
        return Outcome(
            outcome=outcome,
            summary=summary,
            version=self.version,
            storage_uri=self.storage_uri,
            url=status.url,
            traffic=[t.to_json() for t in status.traffic],
        )
