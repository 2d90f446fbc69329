"""Bad data stops the pipeline before Trainer, says why, and pushes nothing."""

from __future__ import annotations

import pytest
from tfx.orchestration import metadata as tfx_metadata

import local_runner
from components.report import render
from pipeline import steps as dag
from pipeline.local.run_summary import summarize_latest_run
from tests.conftest import read_taxi_rows, write_csv
from tests.harness import ANOMALOUS_FEATURE, CASES, parse, with_attr

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def run_and_get_last_error_line(tmp_path, capsys, data_root, *flags) -> tuple[int, str]:
    output_dir = tmp_path / "out"
    rc = local_runner.main(
        [
            "--data-root",
            str(data_root),
            "--output-dir",
            str(output_dir),
            "--train-steps",
            "5",
            *flags,
        ]
    )
    err = capsys.readouterr().err
    # Errors a step logs on the way (Transform's, beside the gate) come as one line each.
    assert "Traceback" not in err
    err_lines = [line for line in err.splitlines() if line.strip()]
    assert not (output_dir / "serving_model").exists(), "a model was pushed from bad data"
    return rc, err_lines[-1] if err_lines else ""


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_data_stops_before_trainer(tmp_path, capfd, case):
    corrupt, expected = CASES[case]
    header, rows = read_taxi_rows(limit=600)
    header, rows = corrupt(header, rows)
    data_root = tmp_path / "data"
    write_csv(data_root / "data.csv", header, rows)

    rc, last_line = run_and_get_last_error_line(tmp_path, capfd, data_root)
    check_failed_run_report(tmp_path / "out", case)

    assert rc == 1
    assert last_line.startswith("error: DataValidationError: data validation failed")
    for fragment in expected:
        assert fragment in last_line
    summary = summarize_latest_run(
        tfx_metadata.sqlite_metadata_connection_config(str(tmp_path / "out" / "metadata.sqlite")),
        "taxi-big-tipper",
    )
    ran = {s.step_id: s.state for s in summary.steps}
    assert ran[dag.DATA_GATE] == "failed"
    # Transform runs beside validation, and may fail on the same data; the gate's
    # error is the one reported, and nothing after the gate runs.
    assert dag.TRAINER not in ran and dag.PUSHER not in ran


def check_failed_run_report(output_dir, case):
    """A failed run's report: what ran, the anomaly, the error; no later sections."""
    html = (output_dir / "reports" / render.LATEST).read_text()
    elements = parse(html)
    states = {a["data-step"]: a["data-state"] for a in with_attr(elements, "data-step")}
    assert states[dag.STATISTICS_GEN] == "complete"
    assert states[dag.DATA_GATE] == "failed"
    assert states[dag.TRAINER] == states[dag.PUSHER] == "not run"
    assert with_attr(elements, "id", id="error")
    assert "DataValidationError: data validation failed" in html
    assert ANOMALOUS_FEATURE[case] in {
        a["data-feature"] for a in with_attr(elements, "class", class_="anomaly")
    }
    assert with_attr(elements, "data-examples")  # statistics were computed before the gate
    assert "Not evaluated: the Evaluator did not complete" in html
    assert "FAILED" in html


def test_no_report_flag_writes_no_report(tmp_path, capsys):
    """A run that fails in its first step (ExampleGen: a row one cell short) writes no
    report: every failed run reaches the report through the same `except` in
    pipeline/local/run.py's `_run_pipeline`, wherever it failed."""
    header, rows = read_taxi_rows(limit=600)
    data_root = tmp_path / "data"
    with write_csv(data_root / "data.csv", header, rows).open("a") as csv_file:
        csv_file.write(",".join(["1"] * (len(header) - 1)) + "\n")
    # One process: ExampleGen fails before the DAG branches, in either mode; the runner's
    # second process would only import TensorFlow and TFX once more.
    flags = ("--no-report", "--sequential")
    rc, last_line = run_and_get_last_error_line(tmp_path, capsys, data_root, *flags)
    assert rc == 1
    assert last_line.startswith("error: CsvError: "), last_line
    assert (tmp_path / "out" / "metadata.sqlite").exists()
    assert not (tmp_path / "out" / "reports").exists()


def test_empty_file_stops_before_any_step(tmp_path, capsys):
    data_root = tmp_path / "data"
    data_root.mkdir()
    (data_root / "data.csv").write_text("")
    rc, last_line = run_and_get_last_error_line(tmp_path, capsys, data_root)
    assert rc == 1
    assert last_line == (
        f"error: InputDataError: {data_root / 'data.csv'} is empty: "
        "it has no header row (nor any data)"
    )
    assert not (tmp_path / "out" / "metadata.sqlite").exists()
