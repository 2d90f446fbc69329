"""The Kubeflow tuning package: the `tuning:` section of kubeflow/pipeline.yaml.

Read only by `python -m kubeflow.compile --tuning` (docs/tuning.md): the
tuning step serves KerasTuner's oracle in its own pod (the chief) and starts
`workers` worker pods, placed as this section says, which ask it for trials
until `max_trials` trials of `steps_per_trial` steps are done or `deadline`
has passed; a search the deadline cut short fails the step (its retry
resumes it) unless `accept_partial`. The training package reads none of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contract.fields import field_names
from kubeflow.settings.fields import SettingsError, check, namespace_and_service_account
from kubeflow.settings.placement import Placement, parse_placement
from kubeflow.settings.retries import DURATION, duration_seconds


@dataclass(frozen=True)
class Tuning:
    """K worker pods beside the chief, the trial budget, the workers' pods."""

    workers: int = 2
    max_trials: int = 20
    steps_per_trial: int = 200
    deadline: str = "6h"
    accept_partial: bool = False
    placement: Placement = field(default_factory=Placement)
    namespace: str | None = None
    service_account: str | None = None

    @property
    def deadline_seconds(self) -> int:
        return duration_seconds(self.deadline)


def _positive_int(raw: dict[str, Any], name: str, default: int, what: str) -> int:
    value = raw.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SettingsError(f"tuning.{name}: must be an integer >= 1 ({what}), got {value!r}")
    return value


def parse_tuning(values: Any) -> Tuning:
    """The `tuning:` section; the workers' placement is written inline, as training.tfjob's."""
    where = "tuning"
    raw = check.typed(values or {}, dict, where)
    own = [name for name in field_names(Tuning) if name != "placement"]
    check.no_unknown(raw, [*own, *field_names(Placement)], where)
    deadline = raw.get("deadline", "6h")
    if not (isinstance(deadline, str) and DURATION.match(deadline) and duration_seconds(deadline)):
        raise SettingsError(
            f"{where}.deadline: {deadline!r} is not a duration above zero (30m, 6h)"
        )
    accept_partial = raw.get("accept_partial", False)
    if not isinstance(accept_partial, bool):
        raise SettingsError(
            f"{where}.accept_partial: must be true or false, got {accept_partial!r}"
        )
    names = namespace_and_service_account(raw, where)
    return Tuning(
        workers=_positive_int(raw, "workers", 2, "worker pods beside the chief"),
        max_trials=_positive_int(raw, "max_trials", 20, "the trial budget"),
        steps_per_trial=_positive_int(raw, "steps_per_trial", 200, "training steps per trial"),
        deadline=deadline,
        accept_partial=accept_partial,
        placement=parse_placement(
            {k: raw[k] for k in ("resources", "node_selector", "tolerations") if k in raw}, where
        ),
        namespace=names["namespace"],
        service_account=names["service_account"],
    )
