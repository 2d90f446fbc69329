"""Recurring runs: the `schedule:` section of kubeflow/pipeline.yaml for the training package,
`scoring_schedule:` for the batch scoring package (both read by kubeflow.submit)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contract.fields import declare, field_names, typed
from kubeflow import cron
from kubeflow.settings.fields import SettingsError, check, required_str

# The API server's bounds (backend/src/apiserver/server/api_converter.go 2.16.1 L1970-1972).
MAX_CONCURRENCY = (1, 10)


@dataclass(frozen=True)
class Schedule:
    cron: str = field(
        metadata=declare(
            typed(str),
            "when runs start: KFP's cron, 6 fields from the seconds, or a descriptor (@daily)",
        )
    )
    experiment: str = field(
        default="default", metadata=declare(typed(str), "the KFP experiment the runs join")
    )
    max_concurrency: int = field(
        default=1,
        metadata=declare(typed(int), "runs of the schedule that may run at once (1 to 10)"),
    )
    catchup: bool = field(
        default=False, metadata=declare(typed(bool), "start the runs a paused schedule missed")
    )


def parse_schedule(values: Any, section: str = "schedule") -> Schedule | None:
    """The `section` (`schedule` or `scoring_schedule`); absent or empty, runs are
    submitted one at a time. Checked as the API server checks a recurring run, so
    that a release refuses before it uploads anything."""
    if not values:
        return None
    raw = check.typed(values, dict, section)
    check.no_unknown(raw, field_names(Schedule), section)
    text = required_str(raw, "cron") if "cron" in raw else required_str({}, f"{section}.cron")
    if not text.startswith("@") and len(text.split()) != 6:
        # KFP takes five fields too, as seconds to month: a Unix cron written there
        # ('0 3 * * *', 03:00 daily) would run at minute 3 of every hour.
        raise SettingsError(
            f"{section}.cron: {text!r} must have 6 fields (KFP cron starts with seconds: "
            "'0 0 3 * * *' is 03:00 daily) or be a descriptor such as @daily"
        )
    try:
        cron.parse(text)
    except cron.CronError as err:
        raise SettingsError(f"{section}.cron: {text!r} is not a cron KFP takes: {err}") from None
    schedule = check.read(Schedule, raw, section, cron=text)
    low, high = MAX_CONCURRENCY
    if not low <= schedule.max_concurrency <= high:
        raise SettingsError(
            f"{section}.max_concurrency: must be {low} to {high} (KFP refuses others), "
            f"got {schedule.max_concurrency}"
        )
    return schedule
