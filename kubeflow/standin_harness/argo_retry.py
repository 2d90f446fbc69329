"""Argo's retry rules for a KFP step, as the backend's Argo applies them: a pure module.

`run_compiled.py` asks it, after each failed attempt, whether Argo starts
another and when. Each rule is ported from the source at the releases read
(kubeflow/pipelines 2.14.0 to 2.17.0 and master; argo-workflows v4.0.5, the
Argo that KFP 2.17.0 pins in third_party/argo/VERSION), cited beside it;
docs/executed-spec.md lists each with its test (tests/test_argo_retry.py).

How a task's `retryPolicy` becomes Argo's `retryStrategy`:

* KFP compiles `maxRetryCount`, `backoffDuration`, `backoffFactor` and
  `backoffMaxDuration` into `limit` and `backoff` and sets **no**
  `retryPolicy` (kubeflow/pipelines 2.17.0,
  backend/src/v2/compiler/argocompiler/container.go:667,
  `getTaskRetryStrategyFromInput`). The factor travels as a string of the
  float (`wfapi.AnyStringPtr(retryPolicy.GetBackoffFactor())`, line 638).
* Argo merges the cluster's `templateDefaults` into every template, the
  template's own fields winning (argo-workflows v4.0.5,
  workflow/controller/operator.go:4448, `mergedTemplateDefaultsInto`, a
  strategic merge patch). Stock KFP from 2.17.0 sets
  `templateDefaults.retryStrategy: {limit: '2', retryPolicy: OnError}`
  (kubeflow/pipelines 2.17.0, manifests/kustomize/third-party/argo/base/
  workflow-controller-configmap-patch.yaml:56-59; commit 2dea6fd468,
  #13485); 2.14 to 2.16 set none.
* No `retryPolicy` after the merge means `OnFailure`
  (pkg/apis/workflow/v1alpha1/workflow_types.go:2295, `RetryPolicyActual`).

What an attempt's end is to Argo (operator.go:1709, `inferFailedReason`):
a pod with a status message (an eviction, a node's graceful shutdown) is
Failed; the main container's non-zero exit is Failed; a container still
waiting (CreateContainerConfigError: a secret or key missing) is Error.
A pod deleted before it ended, as with a node lost before its kubelet could
report, is Error too: the controller finds a started pod node whose pod is
gone and marks it "pod deleted" (operator.go:1253-1291, `podReconciliation`;
after a grace of 10 s from the pod's start, `recentlyStarted`, :1305). Which
of the two a policy retries: operator.go:1101-1124 (`OnFailure` only Failed,
`OnError` only Error, `Always` both).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FAILED = "Failed"
ERROR = "Error"
ON_FAILURE = "OnFailure"
ON_ERROR = "OnError"
ALWAYS = "Always"
ON_TRANSIENT_ERROR = "OnTransientError"
POLICIES = (ALWAYS, ON_FAILURE, ON_ERROR, ON_TRANSIENT_ERROR)

# operator.go:1039, 1083, 1137: the messages Argo marks the node with when it stops retrying.
MAX_DURATION_EXCEEDED = "Max duration limit exceeded"
BACKOFF_EXCEEDS_MAX_DURATION = "Backoff would exceed max duration limit"
NO_RETRIES_LEFT = "No more retries left"

_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_release(text: str) -> tuple[int, int, int]:
    match = _RELEASE.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a release (2.16.1, 2.17.0)")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


@dataclass(frozen=True)
class TemplateDefaults:
    """`workflowDefaults.spec.templateDefaults.retryStrategy` of the cluster's configmap."""

    limit: int | None
    retry_policy: str | None


def stock_template_defaults(release: tuple[int, int, int]) -> TemplateDefaults | None:
    """What a stock install of `release` sets (see the module docstring)."""
    if release >= (2, 17, 0):
        return TemplateDefaults(limit=2, retry_policy=ON_ERROR)
    return None


def _seconds(value: str | None) -> float | None:
    return None if value is None else float(str(value).removesuffix("s"))


@dataclass(frozen=True)
class RetryStrategy:
    """A template's `retryStrategy` after the merge, in seconds."""

    limit: int | None  # None: no limit (workflow_types.go: a nil Limit retries forever)
    retry_policy: str  # as RetryPolicyActual reads it
    backoff_seconds: float
    # As KFP hands it to Argo: the float's text ("2", "1.5"); None: no `backoff`
    # at all (a template with only the cluster's defaults).
    factor: str | None
    window_seconds: float | None  # backoff.maxDuration

    @classmethod
    def for_task(
        cls, policy: dict | None, defaults: TemplateDefaults | None
    ) -> RetryStrategy | None:
        """A task's `retryPolicy` (None: none) merged with the cluster's defaults."""
        if policy is None and defaults is None:
            return None
        policy = policy or {}
        limit = policy.get("maxRetryCount")
        if limit is None and defaults is not None:
            limit = defaults.limit
        factor = None if not policy else f"{float(policy.get('backoffFactor', 0)):g}"
        return cls(
            limit=None if limit is None else int(limit),
            retry_policy=(defaults.retry_policy if defaults else None) or ON_FAILURE,
            backoff_seconds=_seconds(policy.get("backoffDuration")) or 0.0,
            # Go's %v of a float64: 2.0 is "2", 1.5 is "1.5" (AnyStringPtr).
            factor=factor,
            window_seconds=_seconds(policy.get("backoffMaxDuration")),
        )

    def integer_factor(self) -> int:
        """`intstr.Int32(backoff.factor)` (operator.go:1055): strconv.Atoi on the text
        (argo-workflows v4.0.5, util/intstr/parametrizable.go:12-24)."""
        if self.factor is None:
            return 0
        if not re.fullmatch(r"[+-]?\d+", self.factor):
            raise ValueError(f"value '{self.factor}' cannot be resolved to an int")
        return int(self.factor)

    def wait_before(self, attempt: int) -> float:
        """The wait before attempt `attempt` (2 is the first retry), uncapped as in Argo.

        operator.go:1056-1067: duration * factor**(retries so far - 1), the factor
        applied only when it is > 0.
        """
        factor = self.integer_factor()
        if factor <= 0:
            return self.backoff_seconds
        return self.backoff_seconds * factor ** (attempt - 2)

    def refusal(
        self,
        attempt: int,
        first_started: float,
        last_ended: float,
        now: float,
        last_phase: str,
    ) -> str | None:
        """Why Argo starts no attempt `attempt` after one that ended `last_phase`, or None.

        In Argo's order (operator.go:978-1140): the window and the backoff
        first, then whether the policy retries the phase, then the limit.
        """
        window_end = None if self.window_seconds is None else first_started + self.window_seconds
        if window_end is not None and now > window_end:
            return MAX_DURATION_EXCEEDED
        try:
            wait = self.wait_before(attempt)
        except ValueError as err:
            # processNodeRetries returns the error and the node ends in Error with it.
            return str(err)
        if window_end is not None and last_ended + wait > window_end:
            return BACKOFF_EXCEEDS_MAX_DURATION
        if not retries(self.retry_policy, last_phase):
            return f"retryPolicy {self.retry_policy} does not retry a node that ended {last_phase}"
        if self.limit is not None and attempt - 1 > self.limit:
            return NO_RETRIES_LEFT
        return None


def retries(policy: str, phase: str) -> bool:
    """Whether `policy` retries a node that ended `phase` (operator.go:1101-1124).

    OnTransientError retries only errors whose message Argo deems transient
    (network faults, "is forbidden: exceeded quota"); none of the faults
    reproduced here is one.
    """
    if policy == ALWAYS:
        return True
    if policy == ON_FAILURE:
        return phase == FAILED
    if policy == ON_ERROR:
        return phase == ERROR
    if policy == ON_TRANSIENT_ERROR:
        return False
    raise ValueError(f"{policy} is not a valid RetryPolicy")
