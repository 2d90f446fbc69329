"""Retries of failed Kubeflow steps: the `retries:` section of kubeflow/pipeline.yaml.

A scheduled run meets failures that a second attempt may cure: an object
store that timed out, a pod evicted from a node under pressure, a node
preempted or drained. KFP retries a step whose task carries a `retryPolicy`:
Argo starts the step's pod again with the same executor input, so the same
output URIs (kubeflow/step_entrypoint.py empties them before each attempt).
Every step here sits in the `tfx-dag` sub-DAG of the exit handler, where the
backend honours a policy (kubeflow/backend.py: 2.15.0 to 2.18.x).

Which failures Argo retries is the cluster's choice, not this file's
(docs/kubeflow-operations.md, "Retries on the cluster"). Argo ends an attempt
either Failed or Error (argo-workflows v4.0.5, workflow/controller/
operator.go:1709-1807, `inferFailedReason`; v3.7.3, the Argo of KFP 2.15
and 2.16, operator.go:1652-1729, the same rules):

* Failed: the step exited non-zero; the pod failed with a status message,
  as an eviction ("The node was low on resource") and a node's graceful
  shutdown before a preemption write one;
* Error: the pod was deleted, as it is with a node that went away before its
  kubelet reported (operator.go:1289, "pod deleted"); a container that never
  started (a missing secret).

KFP compiles a policy into Argo's `limit` and `backoff` with no
`retryPolicy` (kubeflow/backend.py cites it). Argo's default is then
OnFailure, Failed attempts only (argo-workflows v4.0.5,
pkg/apis/workflow/v1alpha1/workflow_types.go:2295, `RetryPolicyActual`): so
on 2.15 and 2.16 a step is retried after a non-zero exit, an eviction or a
graceful shutdown, not after a deleted pod. Stock 2.17 and later set
`retryPolicy: OnError` for every template in Argo's configmap: a step is
retried after an Error only, never after a Failure, until the admin changes
it (the docs give the change).

What the fields mean on the cluster, where the backend hands them to Argo's
`retryStrategy` (`backoff.duration`, `backoff.factor`, `backoff.maxDuration`):

* retry n (from 1) starts `backoff * backoff_factor**(n-1)` after attempt n
  ended;
* `backoff_factor` is a whole number: KFP hands Argo the float's text (Go's
  `%v`: 2.0 is "2", 1.5 is "1.5"; kubeflow/pipelines 2.17.0,
  backend/src/v2/compiler/argocompiler/container.go:638, `AnyStringPtr`),
  and Argo reads `backoff.factor` as an integer (argo-workflows v4.0.5,
  operator.go:1055, `intstr.Int32`; util/intstr/parametrizable.go:12-25,
  `strconv.Atoi`, "value '1.5' cannot be resolved to an int"). A factor of
  1.5 fails that parse after the step's first failure, and Argo ends the
  step in Error instead of retrying it (operator.go:2325-2326,
  `markNodeError`);
* `retry_window` (the policy's `backoffMaxDuration`) is the longest time,
  counted from the start of the *first* attempt, during which the step may
  still be retried. Argo starts no retry after it ("Max duration limit
  exceeded"), none whose backoff would end after it ("Backoff would exceed
  max duration limit"), and kills a retried attempt still running when it
  passes (the pod's deadline). It is no cap on the wait between attempts.

A retry cannot cure a data failure: the same data fails the same way, later.
So the gates, which fail on data and nothing else, never retry, and the
steps that do retry by default are those whose failures are mostly
infrastructure: the Beam steps and the Trainer.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from contract.fields import field_names
from kubeflow.settings.fields import SettingsError, check, component_entries

DURATION = re.compile(r"^([0-9]+)(s|m|h|d)$")
_SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
# Settings files written before the field was named for what KFP does with it.
DEPRECATED_FIELDS = {"backoff_max": "retry_window"}
# The window of a step with no deadline of its own: a Beam step or a Trainer in
# its pod may run for hours on a large span, and a window that ends before a
# retry does kills that retry. Too long costs nothing: Argo stops at
# max_retries either way.
DEFAULT_RETRY_WINDOW = "24h"


@dataclass(frozen=True)
class RetryPolicy:
    """How often one step is retried, how long KFP waits, and until when it may.

    `retry_window` None: derived from the step's deadline where it has one
    (every attempt may run its whole deadline, plus the backoffs between
    them), else DEFAULT_RETRY_WINDOW.
    """

    max_retries: int = 0
    backoff: str = "60s"
    backoff_factor: int = 2  # a whole number: Argo parses it as one (module docstring)
    retry_window: str | None = None

    def backoff_seconds(self) -> list[float]:
        """The wait before each retry, as Argo computes it (no cap)."""
        first = duration_seconds(self.backoff)
        return [first * self.backoff_factor**n for n in range(self.max_retries)]

    def window_seconds(self, step_deadline: int | None = None) -> int:
        """The retry window, from the first attempt's start; `step_deadline` in seconds."""
        if self.retry_window is not None:
            return duration_seconds(self.retry_window)
        if step_deadline is None:
            return duration_seconds(DEFAULT_RETRY_WINDOW)
        attempts = self.max_retries + 1
        return int(attempts * step_deadline + sum(self.backoff_seconds()))

    def spec(self, step_deadline: int | None = None) -> dict[str, Any] | None:
        """The task's `retryPolicy`, field for field as kfp's `set_retry` compiles it."""
        if self.max_retries == 0:
            return None
        return {
            "maxRetryCount": self.max_retries,
            "backoffDuration": f"{duration_seconds(self.backoff)}s",
            "backoffFactor": float(self.backoff_factor),
            "backoffMaxDuration": f"{self.window_seconds(step_deadline)}s",
        }

    def window_problem(self, step_deadline: int) -> str | None:
        """Why this window cannot hold one retry of a step that runs up to `step_deadline`
        seconds, or None. The earliest retry starts one backoff after the first attempt
        ends; Argo kills it when the window closes."""
        if not self.max_retries:
            return None
        window = self.window_seconds(step_deadline)
        needed = duration_seconds(self.backoff) + step_deadline
        if window >= needed:
            return None
        derived = replace(self, retry_window=None)
        return (
            f"{format_duration(window)} cannot hold even one retry: a retry starts at least "
            f"{self.backoff} after the first attempt ends and may run "
            f"{format_duration(step_deadline)}, and Argo kills it "
            f"{format_duration(window)} after the first attempt began. Set at least "
            f"{format_duration(needed)}, or leave it out for "
            f"{format_duration(derived.window_seconds(step_deadline))} (each attempt its "
            "whole deadline, plus the backoffs)"
        )


# What a step retried by default gets: two more attempts, one and then two
# minutes later (a node pool's autoscaler usually has a replacement by then),
# within the window its deadline calls for.
DEFAULT_RETRY = RetryPolicy(max_retries=2, backoff="60s", backoff_factor=2)


@dataclass(frozen=True)
class RetryRoles:
    """Which of the pipeline's steps retry by default, and which never may."""

    retried_by_default: frozenset[str] = frozenset()
    never_retried: Mapping[str, str] = field(default_factory=dict)  # step id -> why


@dataclass(frozen=True)
class Retries:
    """Each step's retry policy: its own entry, else the default for its role."""

    default: RetryPolicy = RetryPolicy()
    components: Mapping[str, RetryPolicy] = field(default_factory=dict)

    def policy_for(self, step_id: str) -> RetryPolicy:
        return self.components.get(step_id, self.default)


def duration_seconds(text: str) -> int:
    match = DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration (e.g. 30s, 5m, 1h)")
    return int(match.group(1)) * _SECONDS_PER_UNIT[match.group(2)]


def format_duration(seconds: float) -> str:
    """Whole seconds as the settings write a duration: in the largest unit that holds
    them exactly (6h, 361m, 90s)."""
    seconds = round(seconds)
    for unit in ("d", "h", "m"):
        if seconds and seconds % _SECONDS_PER_UNIT[unit] == 0:
            return f"{seconds // _SECONDS_PER_UNIT[unit]}{unit}"
    return f"{seconds}s"


def _retry_policy(values: Any, where: str, fallback: RetryPolicy) -> RetryPolicy:
    values = check.typed(values or {}, dict, where)
    values = _renamed_retry_fields(values, where)
    check.no_unknown(values, field_names(RetryPolicy), where)
    count = values.get("max_retries", fallback.max_retries)
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= 10:
        raise SettingsError(f"{where}.max_retries: must be an integer 0..10, got {count!r}")
    factor = values.get("backoff_factor", fallback.backoff_factor)
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor < 1:
        raise SettingsError(f"{where}.backoff_factor: must be a whole number >= 1, got {factor!r}")
    if isinstance(factor, float) and not factor.is_integer():
        raise SettingsError(
            f"{where}.backoff_factor: must be a whole number (2, 3), got {factor!r}: Argo "
            "reads backoff.factor as an integer, and a fraction would end the step in Error "
            "at its first failure instead of retrying it"
        )
    backoff = values.get("backoff", fallback.backoff)
    window = values.get("retry_window", fallback.retry_window)
    # The window may be left unset (derived from the step's deadline); the backoff may not.
    for name, value in (("backoff", backoff), ("retry_window", window)):
        if value is None and name == "retry_window":
            continue
        if not isinstance(value, str) or not DURATION.match(value):
            raise SettingsError(
                f"{where}.{name}: {value!r} is not a duration (whole seconds, minutes, hours "
                "or days: 30s, 5m, 1h)"
            )
    if window is not None and duration_seconds(window) < duration_seconds(backoff):
        raise SettingsError(
            f"{where}.retry_window: {window} is shorter than backoff {backoff}: "
            "no retry could start inside it"
        )
    return RetryPolicy(count, backoff, int(factor), window)


def _renamed_retry_fields(values: dict[str, Any], where: str) -> dict[str, Any]:
    """`values` with deprecated field names read as their new ones, each with a warning."""
    values = dict(values)
    for old, new in DEPRECATED_FIELDS.items():
        if old not in values:
            continue
        if new in values:
            raise SettingsError(
                f"{where}.{old}: deprecated, and {new} is set as well; keep {new} alone"
            )
        warnings.warn(
            f"{where}.{old} is deprecated: rename it {new}. KFP never read it as a cap on the "
            "wait between attempts: it compiles to backoffMaxDuration, the longest time from "
            "the first attempt's start during which the step may still be retried, and is "
            f"kept as that ({values[old]!r})",
            FutureWarning,
            stacklevel=2,
        )
        values[new] = values.pop(old)
    return values


def parse_retries(values: Any, step_ids: set[str], roles: RetryRoles | None) -> Retries:
    """The `retries:` section; absent, the steps retried by default get DEFAULT_RETRY.

    `defaults` is the policy of every step without its own entry except the
    gates; `components.<id>` replaces it field by field for one step.
    """
    roles = roles or RetryRoles()
    if values is None:
        return Retries(components={step: DEFAULT_RETRY for step in roles.retried_by_default})
    values = check.typed(values, dict, "retries")
    check.no_unknown(values, {"defaults", "components"}, "retries")
    default = _retry_policy(values.get("defaults"), "retries.defaults", RetryPolicy())
    entries = component_entries(values.get("components"), "retries.components", step_ids)
    policies = {
        step: _retry_policy(spec, f"retries.components.{step}", default)
        for step, spec in entries.items()
    }
    for step, why in roles.never_retried.items():
        if policies.get(step, RetryPolicy()).max_retries:
            raise SettingsError(
                f"retries.components.{step}.max_retries: {step} must not retry: {why}"
            )
        # The defaults never reach a gate.
        policies.setdefault(step, RetryPolicy())
    return Retries(default=default, components=policies)
