"""A release's schedules: one enabled per scheduled package, never two, and no run
for a tick that came before the release.

The rules, each from the KFP source it answers (kubeflow/pipelines):

* **Never re-enable.** The ScheduledWorkflow controller takes the next run from
  the schedule's last triggered time, else its start time, else its creation
  time, and only then looks at the enabled flag
  (backend/src/crd/controller/scheduledworkflow/util/scheduled_workflow.go
  2.16.1 L193-253; cron_schedule.go L62-81, L97-140). Enabling a schedule that
  has missed ticks starts a run at once (`no_catchup`) or one per missed tick.
  So a release always creates a new schedule, already enabled, and an old one is
  only ever disabled.
* **The new schedule starts where the old one stopped.** Its trigger's
  `start_time` is the server's time when the schedule it replaces was disabled
  (that schedule's `updated_at`: the store sets it on Enable and Disable,
  storage/job_store.go 2.16.1 L410-416), or, with none enabled, the server's time
  the release took its lock. The controller runs `Next(max(last, start_time))`,
  strictly after it (cron_schedule.go L119-124; robfig/cron spec.go L59-60): a
  tick at or before the cut is the old schedule's, a tick after it the new one's.
  A tick that fell in the seconds between the disable and the create is run by
  the new schedule as soon as it exists: one run, not none and not two.
* **Disable first, then create.** There is never a moment with two enabled.
* **Delete late.** A recurring run's Workflow gets its KFP run record only when
  the persistence agent reports it through the schedule that owns it
  (backend/src/apiserver/resource/resource_manager.go 2.17.0 L1565-1615: a
  report for a schedule that no longer exists fails, and its run is never
  recorded). So a disabled schedule is deleted only DELETE_AFTER past its
  disable, by a later release, and then with ORPHAN from 2.16.0 (its Workflows
  finish) or, on 2.15, once none of its runs is in progress (2.15 drops the
  propagation policy, resource_manager.go 2.15.0 L1246-1256).
* **Found by marker, namespace-wide.** A release finds its schedules by the
  record it writes in their description, in every experiment of the namespace,
  so that a changed `schedule.experiment`, a removed `scoring_schedule:` or a
  renamed dataset leaves no schedule of the project enabled (`sweep`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from kubeflow import backend
from kubeflow.release_lock import Lock, utc
from kubeflow.settings.schedule import Schedule

MARKER = "kubeflow.release"
# ORPHAN first came with 2.16.0 (kubeflow/pipelines 2.16.0,
# backend/src/apiserver/resource/resource_manager.go L1270, DeleteJob's propagationPolicy).
ORPHAN_FROM = (2, 16, 0)
# A run in one of these states has ended (backend/api/v2beta1/run.proto, RuntimeState).
ENDED = {"SUCCEEDED", "SKIPPED", "FAILED", "CANCELED"}
# How long a disabled schedule stays before a release deletes it: far longer than
# the persistence agent takes to report the Workflows it started.
DELETE_AFTER = timedelta(hours=1)
# The page size asked for on every list; every page is read.
PAGE_SIZE = 100


def every_page(list_call, key: str, **kwargs) -> list:
    """Every item of a list call, page after page (the client asks for 10 a page unless told)."""
    items: list[Any] = []
    token = ""
    while True:
        response = list_call(page_token=token, page_size=PAGE_SIZE, **kwargs)
        items += getattr(response, key) or []
        token = response.next_page_token
        if not token:
            return items


def record_of(item) -> dict | None:
    """What the release wrote in a version's or a schedule's description; None if not ours."""
    try:
        record = json.loads(item.description or "")
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get("released_by") == MARKER else None


def version_of(job) -> str | None:
    reference = job.pipeline_version_reference
    return reference.pipeline_version_id if reference else None


def all_schedules(client, namespace: str | None) -> list:
    """Every recurring run in the namespace (single-user: on the server), any experiment
    (job_server.go 2.16.1 L181-200: a list by namespace alone)."""
    kwargs = {"namespace": namespace} if namespace else {}
    return every_page(client.list_recurring_runs, "recurring_runs", **kwargs)


def ours(jobs: list, pipeline_id: str) -> list:
    return [j for j in jobs if (record_of(j) or {}).get("pipeline_id") == pipeline_id]


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def runs_in_progress(client, job) -> list:
    runs = every_page(client.list_runs, "runs", experiment_id=job.experiment_id)
    return [r for r in runs if r.recurring_run_id == job.recurring_run_id and r.state not in ENDED]


@dataclass(frozen=True)
class Target:
    """What one package's schedule should run."""

    pipeline: Any
    version: Any
    schedule: Schedule
    experiment_id: str
    root: str
    project: str


def point_schedule(client, tag: str | None, target: Target, found: list, lock: Lock, out) -> str:
    """The package's one enabled schedule runs `target.version`; returns its id.
    `found` is every recurring run in the namespace. Safe to stop anywhere and run again."""
    name = target.pipeline.display_name
    mine = ours(found, target.pipeline.pipeline_id)
    enabled = [j for j in mine if j.status == "ENABLED"]
    if len(enabled) == 1 and _runs_as_wanted(enabled[0], target):
        print(
            f"{name}: schedule {enabled[0].recurring_run_id} runs {target.version.display_name}",
            file=out,
        )
        return enabled[0].recurring_run_id
    cuts = []
    for job in enabled:
        lock.check(client)
        client.disable_recurring_run(job.recurring_run_id)
        cuts.append(utc(client.get_recurring_run(job.recurring_run_id).updated_at))
        print(f"{name}: schedule {job.recurring_run_id} disabled", file=out)
    cut = max(cuts) if cuts else lock.server_now
    record = {
        "released_by": MARKER,
        "pipeline_id": target.pipeline.pipeline_id,
        "version": target.version.display_name,
        "project": target.project,
    }
    lock.check(client)
    new_id = client.create_recurring_run(
        experiment_id=target.experiment_id,
        job_name=name,
        description=json.dumps(record, sort_keys=True),
        start_time=rfc3339(cut),
        cron_expression=target.schedule.cron,
        max_concurrency=target.schedule.max_concurrency,
        no_catchup=not target.schedule.catchup,
        pipeline_id=target.pipeline.pipeline_id,
        version_id=target.version.pipeline_version_id,
        enabled=True,
        pipeline_root=target.root,
    ).recurring_run_id
    print(
        f"{name}: schedule {new_id} runs {target.version.display_name}, ticks after {rfc3339(cut)}",
        file=out,
    )
    return new_id


def _runs_as_wanted(job, target: Target) -> bool:
    trigger = job.trigger.cron_schedule if job.trigger else None
    return (
        version_of(job) == target.version.pipeline_version_id
        and job.experiment_id == target.experiment_id
        and trigger is not None
        and trigger.cron == target.schedule.cron
        and int(job.max_concurrency or 0) == target.schedule.max_concurrency
        and bool(job.no_catchup) == (not target.schedule.catchup)
    )


def is_project_schedule(job, project: str, pipeline_ids: set[str]) -> bool:
    """One of this project's released schedules: its record names the project, or (a
    schedule released before records named one) it runs one of the project's pipelines."""
    record = record_of(job)
    if record is None:
        return False
    if "project" in record:
        return record["project"] == project
    return record.get("pipeline_id") in pipeline_ids


def sweep(client, tag, found: list, keep: set[str], project: str, pipeline_ids, lock, out):
    """Disable every enabled schedule of the project the release no longer wants (in
    another experiment, of a package no longer scheduled, of a renamed dataset), and
    delete the project's disabled ones once DELETE_AFTER has passed."""
    release = backend.parse_release(tag)
    for job in found:
        if job.recurring_run_id in keep or not is_project_schedule(job, project, pipeline_ids):
            continue
        job_id = job.recurring_run_id
        if job.status == "ENABLED":
            lock.check(client)
            client.disable_recurring_run(job_id)
            print(
                f"schedule {job_id} ({job.display_name}, experiment {job.experiment_id}) "
                "disabled: the settings no longer schedule it",
                file=out,
            )
            continue
        since = utc(job.updated_at)
        if lock.server_now - since < DELETE_AFTER:
            print(
                f"schedule {job_id} ({job.display_name}) stays disabled until "
                f"{rfc3339(since + DELETE_AFTER)}, so that its last runs are recorded first",
                file=out,
            )
            continue
        lock.check(client)
        if release is not None and release >= ORPHAN_FROM:
            # ORPHAN: the Workflows it started are left to finish.
            client._recurring_run_api.recurring_run_service_delete_recurring_run(
                recurring_run_id=job_id, propagation_policy="ORPHAN"
            )
            print(f"schedule {job_id} ({job.display_name}) deleted (ORPHAN)", file=out)
        elif not runs_in_progress(client, job):
            # 2.15 (or a release it cannot read): deleting would delete the runs it
            # started; it goes once none is left in progress.
            client.delete_recurring_run(job_id)
            print(f"schedule {job_id} ({job.display_name}) deleted (no run left)", file=out)
        else:
            print(
                f"schedule {job_id} ({job.display_name}) left disabled until its runs end "
                "(no ORPHAN before KFP 2.16)",
                file=out,
            )
