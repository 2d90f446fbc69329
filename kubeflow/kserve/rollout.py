"""A pushed version's way to traffic: create, or canary, smoke request, promote; else roll back.

First version (no InferenceService yet): create it, wait for it to be Ready,
send the smoke request. If it fails or answers wrongly, delete it: nothing
served before, so nothing is lost, and no wrong model stays up.

Later versions: patch the predictor's `storageUri` with `canaryTrafficPercent`
(the last rolled-out revision keeps the rest of the traffic), wait for the new
revision to be Ready, send the smoke request to its own URL, then promote it
(remove `canaryTrafficPercent`: it takes all traffic) under `after_smoke`, or
leave the split for a person under `manual`. A revision that fails, is not
Ready in time or answers wrongly is rolled back: the previous `storageUri`
returns with `canaryTrafficPercent: 0`, so traffic stays on the last
rolled-out revision while the restored one starts, which then takes it over.
The step then fails, naming the revision and its failed condition.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kubeflow.kserve import manifest
from kubeflow.kserve.cluster import ServingCluster
from kubeflow.kserve.manifest import PredictorStatus
from kubeflow.kserve.smoke import SmokeError, disagreement, predict, request_body

POLL_SECONDS = 1.0
S3_ENDPOINT_ANNOTATION = "serving.kserve.io/s3-endpoint"
S3_HTTPS_ANNOTATION = "serving.kserve.io/s3-usehttps"
S3_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


class DeployError(RuntimeError):
    """The version did not reach traffic; the message says why and what serves instead."""


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
    log: Callable[[str], None] = print
    poll_seconds: float = POLL_SECONDS

    @property
    def name(self) -> str:
        return self.config["inference_service"]

    # --- checks before anything is applied -------------------------------------------------
    def check_credentials(self) -> None:
        """The predictor's service account exists, and for s3:// its secret is one KServe reads."""
        account_name = self.config.get("service_account")
        if not account_name:
            return
        account = self.cluster.get_core("serviceaccounts", self.namespace, account_name)
        if account is None:
            raise DeployError(
                f"serving.service_account: service account {self.namespace}/{account_name} "
                "does not exist; create it with the secret KServe's storage initializer reads "
                "(docs/serving.md)"
            )
        if not self.storage_uri.startswith("s3://"):
            return
        problems = []
        for ref in account.get("secrets") or []:
            secret = self.cluster.get_core("secrets", self.namespace, ref.get("name", ""))
            if secret is None:
                problems.append(f"secret {ref.get('name')} is listed but does not exist")
                continue
            annotations = secret.get("metadata", {}).get("annotations") or {}
            if S3_ENDPOINT_ANNOTATION not in annotations:
                continue
            where = f"secret {self.namespace}/{secret['metadata']['name']}"
            endpoint = annotations[S3_ENDPOINT_ANNOTATION]
            if "://" in endpoint:
                problems.append(
                    f"{where}: annotation {S3_ENDPOINT_ANNOTATION} is {endpoint!r}; KServe "
                    "wants HOST:PORT without a scheme (say http or https with "
                    f"{S3_HTTPS_ANNOTATION}: '0' or '1')"
                )
            https = annotations.get(S3_HTTPS_ANNOTATION)
            if https not in (None, "0", "1"):
                problems.append(f"{where}: annotation {S3_HTTPS_ANNOTATION} must be '0' or '1'")
            data = {**(secret.get("data") or {}), **(secret.get("stringData") or {})}
            missing = [k for k in S3_KEYS if k not in data]
            if missing:
                problems.append(
                    f"{where}: has no {', '.join(missing)}: the storage initializer reads "
                    "exactly these keys"
                )
            if not problems:
                return
        if not problems:
            problems.append(
                f"none of its secrets has the annotation {S3_ENDPOINT_ANNOTATION}, so KServe's "
                "storage initializer has no S3 credentials or endpoint"
            )
        raise DeployError(
            f"serving.service_account {self.namespace}/{account_name} cannot read "
            f"{self.storage_uri}: " + "; ".join(problems) + " (docs/serving.md)"
        )

    # --- the rollout --------------------------------------------------------------------
    def run(self) -> Outcome:
        self.check_credentials()
        existing = self.cluster.get_service(self.namespace, self.name)
        if existing is None:
            return self._create()
        return self._canary(existing)

    def _create(self) -> Outcome:
        self.log(f"Creating InferenceService {self.namespace}/{self.name} on {self.storage_uri}")
        self.cluster.create_service(
            manifest.inference_service(self.config, self.namespace, self.storage_uri, self.version)
        )
        try:
            status = self._wait_for_new_revision(before=None)
            self._smoke(status.url_of(status.latest_ready), status.latest_ready)
        except DeployError as err:
            self.cluster.delete_service(self.namespace, self.name)
            raise DeployError(
                f"{err}. Nothing served before: the InferenceService is deleted"
            ) from None
        status = self._status()
        return self._outcome("created", f"version {self.version} serves all traffic", status)

    def _canary(self, existing: dict[str, Any]) -> Outcome:
        status = PredictorStatus.of(existing)
        current = manifest.storage_uri(existing)
        annotations = existing.get("metadata", {}).get("annotations") or {}
        if current == self.storage_uri:
            if (
                status.latest_ready == status.latest_created
                and status.percent_of(status.latest_ready) == 100
            ):
                return self._outcome(
                    "already_serving", f"version {self.version} already serves all traffic", status
                )
            # A retried step: the rollout was started; go back to where it began.
            rollback_uri = annotations.get(manifest.ROLLBACK_ANNOTATION) or current
        else:
            rollback_uri = current
        before = status.latest_created
        percent = self.config["canary_traffic_percent"]
        self.log(
            f"Rolling out {self.storage_uri} on {self.namespace}/{self.name} with "
            f"{percent}% canary traffic; {rollback_uri} keeps the rest"
        )
        self.cluster.patch_service(
            self.namespace,
            self.name,
            manifest.rollout_patch(self.config, self.storage_uri, self.version, rollback_uri),
        )
        try:
            status = self._wait_for_new_revision(before=before)
            self._smoke(status.url_of(status.latest_ready), status.latest_ready)
        except DeployError as err:
            self._roll_back(rollback_uri, str(err))
        if self.config["promotion"] == "manual":
            status = self._status()
            return self._outcome(
                "canary",
                f"version {self.version} passed its smoke request and takes {percent}% of the "
                "traffic; promotion is manual (docs/serving.md)",
                status,
            )
        self.log(f"Promoting {status.latest_ready} to all traffic")
        self.cluster.patch_service(
            self.namespace, self.name, {"spec": {"predictor": {"canaryTrafficPercent": None}}}
        )
        status = self._wait(
            lambda s: s.percent_of(s.latest_ready) == 100 and s.latest_ready == s.latest_created,
            "the promoted revision to take all traffic",
        )
        return self._outcome("promoted", f"version {self.version} serves all traffic", status)

    def _roll_back(self, rollback_uri: str, reason: str) -> None:
        """Restores `rollback_uri` (traffic never leaves the last rolled-out revision); raises."""
        self.log(f"Rolling back to {rollback_uri}: {reason}")
        before = self._status().latest_created
        self.cluster.patch_service(
            self.namespace,
            self.name,
            {
                "spec": {
                    "predictor": {"canaryTrafficPercent": 0, "model": {"storageUri": rollback_uri}}
                }
            },
        )
        restored = "serves all traffic again"
        try:
            self._wait_for_new_revision(before=before)
            self.cluster.patch_service(
                self.namespace, self.name, {"spec": {"predictor": {"canaryTrafficPercent": None}}}
            )
        except DeployError as err:
            restored = (
                f"is back in the spec, but its new revision is not Ready yet ({err}); "
                "canaryTrafficPercent 0 keeps all traffic on the last rolled-out revision"
            )
        raise DeployError(
            f"version {self.version} rolled back: {reason}. {rollback_uri} {restored}"
        )

    # --- waiting and reading ------------------------------------------------------------
    def _status(self) -> PredictorStatus:
        service = self.cluster.get_service(self.namespace, self.name)
        if service is None:
            raise DeployError(f"InferenceService {self.namespace}/{self.name} disappeared")
        return PredictorStatus.of(service)

    def _wait(self, done: Callable[[PredictorStatus], bool], what: str) -> PredictorStatus:
        deadline = time.monotonic() + self.config["ready_timeout_seconds"]
        while True:
            status = self._status()
            if status.observed and done(status):
                return status
            if time.monotonic() > deadline:
                raise DeployError(
                    f"timed out after {self.config['ready_timeout_seconds']}s waiting for {what} "
                    f"(serving.ready_timeout)"
                )
            time.sleep(self.poll_seconds)

    def _wait_for_new_revision(self, before: str | None) -> PredictorStatus:
        """Waits for a revision created after `before` to be Ready; raises if it fails."""

        def settled(status: PredictorStatus) -> bool:
            new = status.latest_created is not None and status.latest_created != before
            if new and status.failure is not None and status.latest_ready != status.latest_created:
                condition, reason, message = status.failure
                raise DeployError(
                    f"revision {status.latest_created} failed: {condition} is False "
                    f"({reason}): {message}"
                )
            return new and status.latest_ready == status.latest_created

        return self._wait(settled, "the new revision to be Ready")

    def _smoke(self, url: str | None, revision: str | None) -> None:
        if not url:
            raise DeployError(f"revision {revision} has no URL to send the smoke request to")
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
