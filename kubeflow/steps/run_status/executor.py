"""The run's status report, from what its steps recorded: the work of the RunStatus exit handler.

kubeflow/steps/run_status/component.py declares the exit handler for TFX (local
compilation, TFX's compiler); on Kubeflow its pod runs `write_status_report`
through kubeflow/light_step.py, without TFX's entrypoint, TensorFlow or TFMA
(docs/kubeflow.md, "What a step loads"). ScoringReport reads the run's records
with the same functions.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from absl import logging

from components import store_files
from kubeflow.steps import step_records
from kubeflow.steps.kfp_display import OutputFile, shown_as

# Step states beyond a record's outcome.
CACHED, NOT_RUN, INTERRUPTED = "cached", "not run", "interrupted"
_STATE_OF_OUTCOME = {
    step_records.SUCCEEDED: "succeeded",
    step_records.FAILED: "failed",
    step_records.RUNNING: INTERRUPTED,
}
# PipelineTaskFinalStatus.state: KFP's backend sends the DAG execution's ML
# Metadata state (kubeflow/pipelines 2.15.0 to 2.17.0,
# backend/src/v2/driver/resolve.go, 2.17.0 lines 471-472,
# `GetLastKnownState().String()`: UNKNOWN, NEW, RUNNING, COMPLETE, FAILED,
# CACHED, CANCELED, third_party/ml-metadata/ml_metadata/proto/
# metadata_store.proto:307-315); the 3.0 line, the task's state
# (kubeflow/pipelines#13986, backend/src/v2/driver/resolver/parameters.go:552;
# RUNTIME_STATE_UNSPECIFIED, RUNNING, SUCCEEDED, SKIPPED, FAILED, CACHED, ...,
# backend/api/v2beta1/run.proto:440); kfp.local and Vertex a run state
# (SUCCEEDED, FAILED, CANCELLED).
_SUCCESSFUL_FINAL_STATES = ("SUCCEEDED", "COMPLETE", "CACHED")
# States that say the DAG has not ended, or not how: no verdict. The report
# then judges the run by the steps' records alone: a failed or interrupted
# step fails it, and no record of one does not. SKIPPED is the 3.0 line's
# state for a task "skipped, for example due to caching" (run.proto:450).
NO_VERDICT_STATES = (
    "",
    "UNKNOWN",
    "NEW",
    "RUNNING",
    "PENDING",
    "SKIPPED",
    "RUNTIME_STATE_UNSPECIFIED",
)
# How an earlier attempt of a retried step ended, by its recorded outcome.
_ATTEMPT_ENDINGS = {
    step_records.RUNNING: "was killed before it finished",
    step_records.SUCCEEDED: "finished, but KFP did not see it end (its pod went away)",
}


def final_status_dict(final_status: object) -> dict[str, Any]:
    """PipelineTaskFinalStatus as a dict, from a JSON string (Vertex) or a Struct (KFP)."""
    from google.protobuf import json_format, message

    if isinstance(final_status, str):
        return json.loads(final_status) if final_status.strip() else {}
    if isinstance(final_status, message.Message):
        return json_format.MessageToDict(final_status)
    return dict(final_status)  # type: ignore[call-overload]


def step_states(
    order: Sequence[str],
    upstream: Mapping[str, Sequence[str]],
    records: Mapping[str, step_records.StepRecord],
) -> dict[str, str]:
    """Each step's state in this run.

    A step with a record ran. One without a record was served from cache if a
    step that depends on it ran or was cached (it could not have started
    otherwise), and did not run at all if not.
    """
    states = {step: _STATE_OF_OUTCOME[records[step].last.outcome] for step in records}
    pending = list(states)
    while pending:
        for parent in upstream.get(pending.pop(), ()):
            if parent not in states:
                states[parent] = CACHED
                pending.append(parent)
    return {step: states.get(step, NOT_RUN) for step in order}


def _clock(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC"
    )


def kfp_verdict(final_state: str) -> bool | None:
    """What KFP's final state says of the run: succeeded (True), failed (False), or
    no verdict (None: NO_VERDICT_STATES)."""
    state = final_state.strip().upper()
    if state in NO_VERDICT_STATES:
        return None
    return state in _SUCCESSFUL_FINAL_STATES


def verdict_note(final_state: str) -> str | None:
    """The report's note where KFP's final state gives no verdict, else None."""
    if kfp_verdict(final_state) is not None:
        return None
    return (
        f"KFP's final status ({final_state or 'none'}) says nothing of how the run ended: "
        "the run is judged by its steps' records."
    )


def failure_text(
    order: Sequence[str],
    states: Mapping[str, str],
    records: Mapping[str, step_records.StepRecord],
    final_state: str,
    kfp_error: str,
) -> str | None:
    """The run's error for the report: the first step that failed, and why.

    Where no step recorded a failure, KFP's final state decides; a state with
    no verdict (NO_VERDICT_STATES) leaves the run not failed.
    """
    for step in order:
        if states[step] == "failed":
            return f"{step} failed: {records[step].last.error or 'no error was recorded'}"
        if states[step] == INTERRUPTED:
            attempt = records[step].last
            return (
                f"{step}: attempt {attempt.number + 1} started {_clock(attempt.started_ms)} "
                "and never finished: its pod was killed (out of memory, a preempted or "
                "drained node, the step's deadline) or the run was stopped."
            )
    if kfp_verdict(final_state) is False:
        return (
            f"KFP reports the run {final_state}"
            + (f": {kfp_error.rstrip('.')}" if kfp_error else "")
            + ". No step recorded a failure: a step's pod may not have started "
            "(image pull, scheduling, a missing secret); its events are on the KFP run page "
            "while the run's workflow lasts (an hour after the run on stock KFP 2.17+)."
        )
    return None


def retry_notes(
    order: Sequence[str], records: Mapping[str, step_records.StepRecord]
) -> tuple[str, ...]:
    notes = []
    for step in order:
        record = records.get(step)
        if record is None or len(record.attempts) < 2:
            continue
        earlier = "; ".join(
            f"attempt {a.number + 1} "
            + (
                f"failed: {a.error}"
                if a.outcome == step_records.FAILED
                else _ATTEMPT_ENDINGS[a.outcome]
            )
            for a in record.attempts[:-1]
        )
        notes.append(
            f"{step} ran {len(record.attempts)} times (KFP retried it); the last attempt "
            f"{record.last.outcome}. Earlier: {earlier}."
        )
    return tuple(notes)


@dataclass(frozen=True)
class EndedRun:
    """What an exit handler finds of the run it guards: the steps' records and states,
    and the run's error (None when it did not fail)."""

    run_dir: str | None
    records: dict[str, step_records.StepRecord]
    states: dict[str, str]
    error: str | None


def ended_run(own_uri: str, task_name: str, dag: Mapping[str, Any], status: Mapping) -> EndedRun:
    """Reads the records of `dag`'s steps (`{"order": [...], "upstream": {...}}`) from the
    run's directory, found from the exit handler's own output URI and task name."""
    order = dag["order"]
    run_dir = step_records.run_directory(own_uri, task_name)
    records = {}
    if run_dir is not None:
        for step in order:
            record = step_records.find_record(run_dir, step)
            if record is not None:
                records[step] = record
    states = step_states(order, dag["upstream"], records)
    error = failure_text(
        order,
        states,
        records,
        str(status.get("state") or ""),
        str((status.get("error") or {}).get("message", "")),
    )
    return EndedRun(run_dir, records, states, error)


def run_outputs(
    states: Mapping[str, str],
    records: Mapping[str, step_records.StepRecord],
    roles: Mapping[str, Sequence[str]],
):
    """What the steps that succeeded in this run produced, for the report's sections.

    `roles` maps each report field to the [step, output key] that fills it
    (the step registry's report roles).
    """
    from components.report.outputs import RunOutputs

    found = {}
    for role, (step, output) in roles.items():
        record = records.get(step)
        artifact = record.output(output) if record and states.get(step) == "succeeded" else None
        if artifact is not None:
            found[role] = (artifact.uri, artifact.metadata)
    return RunOutputs.from_artifacts(found)


def write_status_report(
    final_status: object,
    pipeline_name: str,
    steps: str,
    task_name: str,
    report: OutputFile,
) -> None:
    """Writes the run's status report at `report`.

    `steps` is the DAG as JSON: `{"order": [ids], "upstream": {id: [ids]},
    "outputs": {report field: [id, output key]}}`; `task_name` is this
    step's own task name, which locates the run's directory in its output URI.
    """
    from components.report import contents as report_contents
    from components.report.outputs import report_fields
    from components.report.render import render_what_it_can

    status = final_status_dict(final_status)
    dag = json.loads(steps)
    order = dag["order"]
    ended = ended_run(report.uri, task_name, dag, status)
    run_dir, records, states, error = ended.run_dir, ended.records, ended.states, ended.error
    notes = [
        f"Written by the {task_name} exit handler after the run ended (KFP: "
        f"{status.get('state') or 'no final status'}). Steps served from KFP's cache ran in "
        "an earlier run, which holds their details; the RunReport step's report covers "
        "them when every step succeeded.",
        *retry_notes(order, records),
    ]
    if note := verdict_note(str(status.get("state") or "")):
        notes.insert(1, note)
    if run_dir is None:
        notes.append(f"The run's directory is not in this step's output URI {report.uri}.")
    bare = report_contents.RunReport(
        pipeline_name=pipeline_name,
        run_id=run_dir or report.uri,
        steps=tuple(
            report_contents.StepRun(
                step,
                states[step],
                started_ms=records[step].attempts[0].started_ms if step in records else None,
                ended_ms=records[step].last.ended_ms if step in records else None,
            )
            for step in order
        ),
        error=error,
        notes=tuple(notes),
    )
    # The only report a failed run gets: its steps' states are written whatever
    # else cannot be read or drawn.
    contents, html = render_what_it_can(
        lambda: dataclasses.replace(
            bare, **report_fields(run_outputs(states, records, dag["outputs"]))
        ),
        bare,
    )
    store_files.write_text(report.uri, html)
    shown_as(report, "status report")
    logging.info("Run status: %s; steps: %s", contents.outcome, json.dumps(states, sort_keys=True))
