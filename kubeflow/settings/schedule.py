"""Recurring runs: the `schedule:` section of kubeflow/pipeline.yaml for the training package,
`scoring_schedule:` for the batch scoring package (both read by kubeflow.submit)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubeflow.settings.fields import SettingsError, check, required_str
from trainer.fields import declare, field_names, typed


@dataclass(frozen=True)
class Schedule:
    cron: str = field(
        metadata=declare(typed(str), "when runs start: KFP's cron, 6 fields from the seconds")
    )
    experiment: str = field(
        default="default", metadata=declare(typed(str), "the KFP experiment the runs join")
    )
    max_concurrency: int = field(
        default=1, metadata=declare(typed(int), "runs of the schedule that may run at once")
    )
    catchup: bool = field(
        default=False, metadata=declare(typed(bool), "start the runs a paused schedule missed")
    )


def parse_schedule(values: Any, section: str = "schedule") -> Schedule | None:
    """The `section` (`schedule` or `scoring_schedule`); absent or empty, runs are
    submitted one at a time."""
    if not values:
        return None
    raw = check.typed(values, dict, section)
    check.no_unknown(raw, field_names(Schedule), section)
    cron = required_str(raw, "cron") if "cron" in raw else required_str({}, f"{section}.cron")
    if len(cron.split()) != 6:
        raise SettingsError(
            f"{section}.cron: {cron!r} must have 6 fields (KFP cron starts with seconds: "
            "'0 0 3 * * *' is 03:00 daily)"
        )
    return check.read(Schedule, raw, section, cron=cron)
