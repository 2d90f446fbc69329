"""What a Kubeflow step records about its attempts, and what the exit handler makes of it.

The executed package (tests/test_kubeflow_executed.py) runs all of it end to
end; these cases pin each rule on small inputs, one guard at a time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import struct_pb2

from components.report.outputs import RunOutputs, report_fields
from kubeflow import step_attempt
from kubeflow.steps import step_records
from kubeflow.steps.run_status.executor import (
    CACHED,
    INTERRUPTED,
    NO_VERDICT_STATES,
    NOT_RUN,
    failure_text,
    final_status_dict,
    kfp_verdict,
    retry_notes,
    run_outputs,
    step_states,
    verdict_note,
)

# A -> B -> C, and A -> D (D beside B).
ORDER = ["A", "B", "C", "D"]
UPSTREAM = {"A": [], "B": ["A"], "C": ["B"], "D": ["A"]}


def record(*outcomes: str, error: str | None = None) -> step_records.StepRecord:
    attempts = tuple(
        step_records.Attempt(
            number=i,
            started_ms=1_000 * (i + 1),
            ended_ms=None if outcome == step_records.RUNNING else 1_000 * (i + 1) + 500,
            outcome=outcome,
            error=error if outcome == step_records.FAILED else None,
        )
        for i, outcome in enumerate(outcomes)
    )
    return step_records.StepRecord(attempts=attempts)


# --- where records live ---------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "run_dir"),
    [
        # The backend's driver: <root>/<pipeline>/<run id>/<task>/<uuid>/<output>.
        ("s3://b/root/taxi/run-7/RunStatus/0f3c/report", "s3://b/root/taxi/run-7"),
        # Before the uuid (KFP 2.x up to 2.14): <root>/<pipeline>/<run id>/<task>/<output>.
        ("gs://b/root/taxi/run-7/RunStatus/report", "gs://b/root/taxi/run-7"),
        # kfp.local, as run_compiled.py names task directories.
        ("/tmp/root/taxi-2026-11-24/RunStatus/report", "/tmp/root/taxi-2026-11-24"),
    ],
)
def test_the_run_directory_is_above_the_task_segment(uri, run_dir):
    assert step_records.run_directory(uri, "RunStatus") == run_dir


def test_no_run_directory_when_the_task_is_not_in_the_uri():
    assert step_records.run_directory("s3://b/root/run-7/atus/report", "RunStatus") is None
    # The artifact's own name does not count as the task's segment.
    assert step_records.run_directory("s3://b/root/run-7/x/RunStatus", "RunStatus") is None


def test_records_are_found_with_and_without_the_uuid_level(tmp_path):
    run = tmp_path / "run-7"
    flat = step_records.record_path([str(run / "A" / "examples")])
    nested = step_records.record_path(
        [str(run / "B" / "0f3c" / "model"), str(run / "B" / "0f3c" / "a")]
    )
    assert nested == str(run / "B" / "0f3c" / step_records.RECORD_FILE)
    step_records.start_attempt(flat)
    step_records.start_attempt(nested)
    step_records.finish_attempt(nested, step_records.SUCCEEDED)
    assert step_records.find_record(str(run), "A").last.outcome == step_records.RUNNING
    assert step_records.find_record(str(run), "B").last.outcome == step_records.SUCCEEDED
    assert step_records.find_record(str(run), "C") is None
    assert step_records.record_path([]) is None


def test_attempts_accumulate_and_a_finish_closes_the_latest(tmp_path):
    path = str(tmp_path / "T" / step_records.RECORD_FILE)
    step_records.start_attempt(path)
    step_records.start_attempt(path)  # the first never finished: killed
    closed = step_records.finish_attempt(path, step_records.FAILED, error="ValueError: bad")
    assert [a.number for a in closed.attempts] == [0, 1]
    assert [a.outcome for a in closed.attempts] == [step_records.RUNNING, step_records.FAILED]
    assert closed.last.error == "ValueError: bad" and closed.last.ended_ms is not None
    # KFP's retry index wins over counting, when the backend gives it.
    assert step_records.start_attempt(path, number=5).last.number == 5
    assert step_records.read_record(path) == step_records.StepRecord.from_json(
        step_records.read_record(path).to_json()
    )


# --- one attempt of a step --------------------------------------------------------


def executor_input(tmp_path: Path) -> dict:
    task = tmp_path / "run" / "Trainer"
    return {
        "outputs": {
            "artifacts": {
                "model": {"artifacts": [{"uri": str(task / "model")}]},
                "model_run": {"artifacts": [{"uri": str(task / "model_run")}]},
            },
            "outputFile": str(task / "executor_output.json"),
        }
    }


def test_an_attempt_starts_from_empty_outputs_and_records_its_success(tmp_path):
    executor = executor_input(tmp_path)
    task = tmp_path / "run" / "Trainer"
    # What a killed attempt left: a half-written SavedModel and a stray log.
    (task / "model" / "Format-Serving").mkdir(parents=True)
    (task / "model" / "Format-Serving" / "saved_model.pb").write_bytes(b"half")
    (task / "model_run").write_text("a file where a directory will be")
    with step_attempt.recorded_attempt(executor):
        assert not (task / "model").exists() and not (task / "model_run").exists()
        (task / "model").mkdir()
        (task / "executor_output.json").write_text(
            json.dumps(
                {
                    "artifacts": {
                        "model": {
                            "artifacts": [{"uri": str(task / "model"), "metadata": {"x": 1.0}}]
                        }
                    }
                }
            )
        )
    found = step_records.find_record(str(tmp_path / "run"), "Trainer")
    assert found.last.outcome == step_records.SUCCEEDED
    assert found.output("model") == step_records.OutputArtifact(str(task / "model"), {"x": 1.0})


def test_an_attempt_that_raises_records_the_error_and_still_raises(tmp_path):
    executor = executor_input(tmp_path)
    with pytest.raises(RuntimeError), step_attempt.recorded_attempt(executor):
        raise RuntimeError("feature 'tips': out of range")
    found = step_records.find_record(str(tmp_path / "run"), "Trainer")
    assert found.last.outcome == step_records.FAILED
    assert found.last.error == "RuntimeError: feature 'tips': out of range"


def test_an_attempt_that_exits_non_zero_is_recorded_failed(tmp_path):
    executor = executor_input(tmp_path)
    with step_attempt.recorded_attempt(executor) as attempt:
        attempt.exit_code = 3
    found = step_records.find_record(str(tmp_path / "run"), "Trainer")
    assert (found.last.outcome, found.last.error) == (step_records.FAILED, "exited with code 3")


def test_a_record_that_cannot_be_written_does_not_fail_the_step(tmp_path, caplog):
    executor = executor_input(tmp_path)
    (tmp_path / "run").write_text("a file where the run directory should be")
    with step_attempt.recorded_attempt(executor) as outcome:
        pass  # no exception: the step's own work decides its outcome
    assert outcome is not None
    assert "Could not write the step record" in caplog.text  # said, not raised


def test_a_step_without_outputs_is_not_recorded(tmp_path):
    with step_attempt.recorded_attempt({"outputs": {}}):
        pass
    assert list(tmp_path.iterdir()) == []


# --- the exit handler's reading of the records -------------------------------------


def test_states_infer_cached_from_a_step_that_ran_after_it():
    states = step_states(ORDER, UPSTREAM, {"C": record(step_records.SUCCEEDED)})
    assert states == {"A": CACHED, "B": CACHED, "C": "succeeded", "D": NOT_RUN}


def test_states_of_failed_interrupted_and_never_started_steps():
    records = {
        "A": record(step_records.SUCCEEDED),
        "B": record(step_records.FAILED, error="DataValidationError: feature 'tips'"),
        "D": record(step_records.RUNNING),
    }
    states = step_states(ORDER, UPSTREAM, records)
    assert states == {"A": "succeeded", "B": "failed", "C": NOT_RUN, "D": INTERRUPTED}
    assert failure_text(ORDER, states, records, "FAILED", "") == (
        "B failed: DataValidationError: feature 'tips'"
    )
    del records["B"]
    states = step_states(ORDER, UPSTREAM, records)
    assert failure_text(ORDER, states, records, "FAILED", "").startswith(
        "D: attempt 1 started 1970-01-01 00:00:01 UTC and never finished: its pod was killed"
    )


def test_a_failure_no_step_recorded_is_still_reported():
    states = step_states(ORDER, UPSTREAM, {"A": record(step_records.SUCCEEDED)})
    text = failure_text(ORDER, states, {}, "FAILED", "Task tfx-dag failed.")
    assert text.startswith("KFP reports the run FAILED: Task tfx-dag failed. No step recorded")
    for state in ("SUCCEEDED", "COMPLETE", "CACHED"):
        assert failure_text(ORDER, states, {}, state, "") is None


@pytest.mark.parametrize(
    ("state", "verdict"),
    [
        ("COMPLETE", True),  # ML Metadata's, from the 2.x backend
        ("CACHED", True),
        ("SUCCEEDED", True),  # kfp.local, Vertex, the 3.0 line
        ("FAILED", False),
        ("CANCELED", False),
        ("CANCELLED", False),
        ("RUNNING", None),  # the 3.0 line may send it after a successful DAG
        ("NEW", None),
        ("UNKNOWN", None),
        ("SKIPPED", None),  # the 3.0 line: "skipped, for example due to caching"
        ("PENDING", None),
        ("RUNTIME_STATE_UNSPECIFIED", None),
        ("", None),
        ("running", None),
    ],
)
def test_final_states_say_succeeded_failed_or_nothing(state, verdict):
    assert kfp_verdict(state) is verdict
    assert (verdict_note(state) is not None) is (verdict is None)


@pytest.mark.parametrize("state", NO_VERDICT_STATES)
def test_no_verdict_with_every_record_succeeded_is_not_a_failure(state):
    records = {step: record(step_records.SUCCEEDED) for step in ORDER}
    states = step_states(ORDER, UPSTREAM, records)
    assert failure_text(ORDER, states, records, state, "") is None
    # Cached steps and steps with no record are no failure either.
    records = {"C": record(step_records.SUCCEEDED)}
    states = step_states(ORDER, UPSTREAM, records)
    assert failure_text(ORDER, states, records, state, "") is None


@pytest.mark.parametrize("state", NO_VERDICT_STATES)
def test_no_verdict_with_a_failed_or_interrupted_record_is_a_failure(state):
    records = {
        "A": record(step_records.SUCCEEDED),
        "B": record(step_records.FAILED, error="DataValidationError: feature 'tips'"),
    }
    states = step_states(ORDER, UPSTREAM, records)
    assert failure_text(ORDER, states, records, state, "") == (
        "B failed: DataValidationError: feature 'tips'"
    )
    records = {"A": record(step_records.SUCCEEDED), "D": record(step_records.RUNNING)}
    states = step_states(ORDER, UPSTREAM, records)
    assert failure_text(ORDER, states, records, state, "").startswith(
        "D: attempt 1 started 1970-01-01 00:00:01 UTC and never finished"
    )


def test_the_report_says_when_kfp_gave_no_verdict():
    assert verdict_note("RUNNING") == (
        "KFP's final status (RUNNING) says nothing of how the run ended: the run is judged "
        "by its steps' records."
    )
    assert verdict_note("").startswith("KFP's final status (none)")
    assert verdict_note("FAILED") is None and verdict_note("COMPLETE") is None


def test_retried_steps_get_a_note_per_earlier_attempt():
    records = {
        "A": record(step_records.SUCCEEDED),
        "B": record(
            step_records.RUNNING, step_records.FAILED, step_records.SUCCEEDED, error="OSError: x"
        ),
    }
    (note,) = retry_notes(ORDER, records)
    assert note == (
        "B ran 3 times (KFP retried it); the last attempt succeeded. Earlier: attempt 1 was "
        "killed before it finished; attempt 2 failed: OSError: x."
    )


def test_final_status_comes_as_kfp_sends_it():
    as_dict = {"state": "FAILED", "error": {"message": "m", "code": 1.0}}
    struct = struct_pb2.Struct()
    struct.update(as_dict)
    assert final_status_dict(struct) == as_dict  # open-source KFP: a struct
    assert final_status_dict(json.dumps(as_dict)) == as_dict  # Vertex: a JSON string
    assert final_status_dict(as_dict) == as_dict
    assert final_status_dict("") == {}


def test_the_report_takes_outputs_only_from_steps_that_succeeded_here():
    ok = step_records.StepRecord(
        attempts=(step_records.Attempt(0, 1, 2, step_records.SUCCEEDED),),
        outputs={
            "blessing": (step_records.OutputArtifact("/r/E/blessing", {"blessed": 1.0}),),
            "pushed_model": (step_records.OutputArtifact("/r/P/pushed", {"pushed": 0.0}),),
        },
    )
    failed = step_records.StepRecord(
        attempts=(step_records.Attempt(0, 1, 2, step_records.FAILED, "e"),),
        outputs={"examples": (step_records.OutputArtifact("/r/G/examples", {"span": 3}),)},
    )
    roles = {
        "blessing": ["E", "blessing"],
        "pushed": ["E", "pushed_model"],
        "examples": ["G", "examples"],
    }
    states = {"E": "succeeded", "G": "failed"}
    outputs = run_outputs(states, {"E": ok, "G": failed}, roles)
    assert outputs == RunOutputs(blessing={"blessed": 1.0}, pushed={"pushed": 0.0})
    fields = report_fields(outputs)
    assert fields["blessed"] is True and "input" not in fields
    assert "pushed_destination" not in fields


def test_examples_properties_read_through_tfxs_custom_prefix():
    fields = report_fields(
        RunOutputs(examples={"custom:span": 3.0, "span": 0, "spans": "2,3", "custom:version": 1.0})
    )
    assert fields["input"].spans == (2, 3) and fields["input"].version == 1


@pytest.mark.parametrize(
    ("broken", "note"),
    [
        ("a chart", "step timeline chart is left out"),
        ("the artifacts", "sections are left out: they could not be read or drawn"),
    ],
)
def test_the_exit_handler_writes_its_report_when_a_part_cannot_be_read_or_drawn(
    tmp_path, monkeypatch, broken, note
):
    """A chart that raises leaves the page without it, and artifacts that cannot be
    read leave the page with the steps' states alone, each saying so; the step succeeds."""
    from components.report import outputs, plots
    from kubeflow.steps.kfp_artifacts import HTML
    from kubeflow.steps.run_status.component import RunStatus
    from tests.harness import parse

    def fail(*_args):
        raise ValueError("cannot draw this")

    monkeypatch.setattr(
        plots if broken == "a chart" else outputs,
        "timeline" if broken == "a chart" else "report_fields",
        fail,
    )
    report = HTML()
    report.uri = str(tmp_path / "run-7" / "RunStatus" / "report")
    RunStatus.EXECUTOR_SPEC.executor_class().Do(
        {},
        {"report": [report]},
        {
            "final_status": json.dumps({"state": "SUCCEEDED"}),
            "pipeline_name": "p",
            "steps": json.dumps({"order": ORDER, "upstream": UPSTREAM, "outputs": {}}),
            "task_name": "RunStatus",
        },
    )
    html = Path(report.uri).read_text()
    notes = [a for _t, a in parse(html) if "left-out" in a.get("class", "")]
    assert len(notes) == 1
    assert note in html
    assert "ValueError: cannot draw this" in html
    assert {a["data-step"] for _t, a in parse(html) if "data-step" in a} == set(ORDER)
