"""Retries of failed Kubeflow steps: the `retries:` section of kubeflow/pipeline.yaml.

A scheduled run meets failures that a second attempt cures: a preempted GPU
node, an evicted pod, an object store that timed out. KFP (backend 2.5 and
later) retries a step whose task carries a `retryPolicy`: Argo starts the
step's pod again with the same executor input, so the same output URIs
(kubeflow/step_entrypoint.py empties them before each attempt).

A retry cannot cure a data failure: the same data fails the same way, later.
So the gates, which fail on data and nothing else, never retry, and the
steps that do retry by default are those whose failures are mostly
infrastructure: the Beam steps and the Trainer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DURATION = re.compile(r"^([0-9]+)(s|m|h|d)$")
_SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
# The fields of a policy in the settings file.
FIELDS = ("max_retries", "backoff", "backoff_factor", "backoff_max")


@dataclass(frozen=True)
class RetryPolicy:
    """How often one step is retried, and how long KFP waits between attempts.

    The wait before retry n (from 1) is `backoff * backoff_factor**(n-1)`,
    capped at `backoff_max`: kfp's own `set_retry` semantics.
    """

    max_retries: int = 0
    backoff: str = "60s"
    backoff_factor: float = 2.0
    backoff_max: str = "3600s"

    def spec(self) -> dict[str, Any] | None:
        """The task's `retryPolicy`, field for field as kfp's `set_retry` compiles it."""
        if self.max_retries == 0:
            return None
        return {
            "maxRetryCount": self.max_retries,
            "backoffDuration": f"{duration_seconds(self.backoff)}s",
            "backoffFactor": float(self.backoff_factor),
            "backoffMaxDuration": f"{duration_seconds(self.backoff_max)}s",
        }


# What a step retried by default gets: two more attempts, one and then two
# minutes later (a node pool's autoscaler usually has a replacement by then).
DEFAULT_RETRY = RetryPolicy(max_retries=2, backoff="60s", backoff_factor=2.0, backoff_max="30m")


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

    def policy_for(self, component_id: str) -> RetryPolicy:
        return self.components.get(component_id, self.default)


def duration_seconds(text: str) -> int:
    match = DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration (e.g. 30s, 5m, 1h)")
    return int(match.group(1)) * _SECONDS_PER_UNIT[match.group(2)]
