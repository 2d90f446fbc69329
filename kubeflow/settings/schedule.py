"""Recurring runs: the `schedule:` section of kubeflow/pipeline.yaml (read by kubeflow.submit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubeflow.settings.fields import SettingsError, expect, no_unknown, required_str


@dataclass(frozen=True)
class Schedule:
    cron: str
    experiment: str
    max_concurrency: int = 1
    catchup: bool = False


def parse_schedule(values: Any) -> Schedule | None:
    """The `schedule:` section; absent or empty, runs are submitted one at a time."""
    if not values:
        return None
    raw = expect(values, dict, "schedule")
    no_unknown(raw, {"cron", "experiment", "max_concurrency", "catchup"}, "schedule")
    cron = required_str(raw, "cron") if "cron" in raw else required_str({}, "schedule.cron")
    if len(cron.split()) != 6:
        raise SettingsError(
            f"schedule.cron: {cron!r} must have 6 fields (KFP cron starts with seconds: "
            "'0 0 3 * * *' is 03:00 daily)"
        )
    return Schedule(
        cron=cron,
        experiment=expect(raw.get("experiment", "default"), str, "schedule.experiment"),
        max_concurrency=expect(raw.get("max_concurrency", 1), int, "schedule.max_concurrency"),
        catchup=expect(raw.get("catchup", False), bool, "schedule.catchup"),
    )
