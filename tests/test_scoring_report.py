"""The scoring run's HTML report: its numbers are the partition's and the manifest's."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from components.report.scoring_report import (
    REPORTS_DIR,
    Distribution,
    ScoringReport,
    ServedEvaluation,
    distribution_of,
    read_errors,
    render_scoring_html,
    served_evaluation,
)
from components.scoring.output import ERRORS_FILE, SUCCESS_FILE, TEMPORARY_DIR
from tests.harness import (
    HOSTILE_VALUES,
    assert_self_contained,
    fake_version,
    parse,
    report_path_printed,
    served_copy,
    svg_texts,
    with_attr,
)

# --- pure pieces (fast) ------------------------------------------------------------------


def record_with(sums: dict) -> dict:
    """An evaluation record holding `sums` for the overall slice, as the batched
    evaluator writes it (components/evaluator/batched_metrics.py, `recorded_sums`)."""
    import numpy as np

    from components.evaluator.batched_metrics import recorded_sums

    overall = {key: np.asarray(value, np.float64) for key, value in sums.items()}
    return {"candidate_sums": recorded_sums([((), overall)], None)}


def test_the_served_models_class_mix_comes_from_its_evaluation_record(taxi_spec):
    from tensorflow_model_analysis.metrics import metric_types

    # [tp, tn, fp, fn] at 0.5; a per-class key and a sliced entry are not the overall mix.
    record = record_with(
        {
            metric_types.MetricKey(name="binary_accuracy"): [3, 4, 1, 2],
            metric_types.MetricKey(name="precision", sub_key=metric_types.SubKey(class_id=1)): [
                9,
                9,
                9,
                9,
            ],
        }
    )
    record["candidate_sums"].append({"slice": [["company", "x"]], "sums": {}})
    served = served_evaluation(record, taxi_spec)
    assert served.classes == (("ordinary_tip", 6.0), ("big_tip", 4.0))

    assert served_evaluation(None, taxi_spec).classes == ()
    assert "holds no evaluation record" in served_evaluation(None, taxi_spec).note
    no_counts = served_evaluation(record_with({}), taxi_spec)
    assert no_counts.classes == () and "no confusion counts" in no_counts.note


def test_a_multiclass_mix_is_the_confusion_matrixs_predicted_columns(taxi_spec):
    import dataclasses

    from tensorflow_model_analysis.metrics import metric_types

    label = dataclasses.replace(taxi_spec.label, task="multiclass", classes=("a", "b", "c"))
    spec = dataclasses.replace(taxi_spec, label=label)
    # Rows: actual class; columns: no class above 0, then predicted a, b, c.
    matrix = [[1, 5, 0, 0], [0, 2, 3, 0], [0, 0, 1, 4]]
    record = record_with({metric_types.PlotKey(name="multi_class_confusion_matrix_plot"): matrix})
    assert served_evaluation(record, spec).classes == (("a", 7.0), ("b", 4.0), ("c", 4.0))
    regression = dataclasses.replace(
        taxi_spec, label=dataclasses.replace(taxi_spec.label, task="regression", classes=())
    )
    assert "error sums" in served_evaluation(record, regression).note


def test_score_distributions_per_task(taxi_spec):
    import dataclasses

    import pyarrow as pa

    table = pa.table(
        {
            "probability_big_tip": pa.array([0.05, 0.55, 0.95, 1.0], pa.float32()),
            "class": ["ordinary_tip", "big_tip", "big_tip", "big_tip"],
        }
    )
    binary = distribution_of(table, taxi_spec)
    assert binary.rows == 4 and binary.label == "probability of big_tip"
    assert [b.count for b in binary.histogram] == [1, 0, 0, 0, 0, 1, 0, 0, 0, 2]
    assert binary.classes == (("ordinary_tip", 1.0), ("big_tip", 3.0))
    regression = dataclasses.replace(
        taxi_spec, label=dataclasses.replace(taxi_spec.label, task="regression", classes=())
    )
    values = distribution_of(pa.table({"prediction": [2.0, 4.0, 4.0]}), regression)
    assert (values.histogram[0].low, values.histogram[-1].high) == (2.0, 4.0)
    assert sum(b.count for b in values.histogram) == 3 and values.classes == ()
    assert distribution_of(None, taxi_spec).rows == 0


def hostile_scoring_report(tmp_path: Path) -> ScoringReport:
    """A failed run whose keys, reasons and classes hold HOSTILE_VALUES, read back from
    an errors file as the scorer writes it."""
    from components.scoring.executor import csv_line

    # Python 3.10's csv module cannot write NUL: the value is written without it.
    written = [value.replace("\x00", "") for value in HOSTILE_VALUES]
    lines = [csv_line(["trip_id", "reason"])]
    lines += [csv_line([value, f"the model refused the row: {value}"]) for value in written]
    (tmp_path / ERRORS_FILE).write_text("\n".join(lines) + "\n")
    columns, errors, first = read_errors(str(tmp_path))
    classes = tuple((value, 1.0) for value in HOSTILE_VALUES)
    return ScoringReport(
        pipeline_name="<b>taxi</b>",
        run_id="r1",
        status="failed",
        model_version="1",
        model_digest="d" * 64,
        span=3,
        input_fingerprint="split:<x>",
        max_error_share=0.001,
        rows=len(HOSTILE_VALUES),
        errors=errors,
        error_columns=columns,
        first_errors=first,
        distribution=Distribution("class", len(classes), classes=classes),
        served=ServedEvaluation("<i>note</i>", classes=classes),
        error="ScoredOutputError: 8 of 16 rows <50%>",
    )


def test_the_report_shows_keys_and_reasons_as_text_and_says_failed(tmp_path):
    report = hostile_scoring_report(tmp_path)
    assert report.errors == len(HOSTILE_VALUES) and len(report.first_errors) == 5
    first = HOSTILE_VALUES[0]
    assert report.first_errors[0] == (first, f"the model refused the row: {first}")
    html = render_scoring_html(report)
    assert_self_contained(html)
    elements = parse(html)
    assert with_attr(elements, "data-status", data_status="failed")
    assert "FAILED" in html and "8 of 16 rows &lt;50%&gt;" in html
    assert "<b>" not in html and "<i>" not in html
    assert "&lt;b&gt;&amp;amp;" in html  # the key and the reason, escaped
    assert "\x07" not in html and "bell\\x07" in html  # control characters shown as escapes
    (chart,) = [a["src"] for t, a in elements if t == "img"]
    texts = svg_texts(base64.b64decode(chart.removeprefix("data:image/svg+xml;base64,")).decode())
    assert "$0_to_$10" in texts and "<b>&amp;" in texts
    assert not [a for _t, a in elements if "left-out" in a.get("class", "")]


def test_a_run_stopped_before_scoring_says_failed_and_what_is_not_known():
    report = ScoringReport(
        pipeline_name="taxi-scoring",
        run_id="r2",
        status="failed",
        model_version="1",
        model_digest="d" * 64,
        span=None,
        input_fingerprint=None,
        max_error_share=0.001,
        error="DataValidationError: 'fare' <out of range>",
    )
    html = render_scoring_html(report)
    elements = parse(html)
    assert with_attr(elements, "data-status", data_status="failed")
    assert "DataValidationError: &#39;fare&#39; &lt;out of range&gt;" in html
    (rows,) = with_attr(elements, "id", id="rows")
    assert rows["data-value"] == "" and "Not known: the run stopped before it scored" in html
    assert "No scores: the run wrote none" in html and "none committed" in html
    assert not [t for t, _a in elements if t == "img"]


# --- the scoring package's exit handler, on a failed run (fast) ------------------------


def test_on_kubeflow_a_run_whose_scorer_failed_gets_its_report_from_the_attempt(
    tmp_path, taxi_spec
):
    """The ScoringReport exit handler, on the records a run leaves when BatchScorer's
    checks fail: the counts come from the attempt the scorer's error names, the version
    from that attempt's path; the rollout record's version (2) is not the one shown."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from components.artifact_names import FINGERPRINT_PROPERTY, SPAN_PROPERTY
    from components.scoring.executor import csv_line
    from components.scoring.output import ScoredOutputError, attempts_dir
    from components.serving.rollout_record import record_rolled_out, rolled_out_record
    from kubeflow.steps import step_records
    from kubeflow.steps.kfp_artifacts import HTML
    from kubeflow.steps.scoring_report.component import ScoringReport
    from pipeline.steps import BATCH_SCORER, EXAMPLE_GEN

    serving = tmp_path / "serving"
    for version in ("1", "2"):
        fake_version(serving, version, taxi_spec)
    record = rolled_out_record(str(tmp_path / "kserve"))
    record_rolled_out(record, "2", str(tmp_path / "kserve" / "2"), "models/taxi")
    attempt = Path(attempts_dir(str(tmp_path / "scores"), 4, "1")) / "0a1b"
    attempt.mkdir(parents=True)
    table = pa.table(
        {
            "trip_id": ["a", "b", "c"],
            "probability_ordinary_tip": pa.array([0.9, 0.2, 0.7], pa.float32()),
            "probability_big_tip": pa.array([0.1, 0.8, 0.3], pa.float32()),
            "class": ["ordinary_tip", "big_tip", "ordinary_tip"],
        }
    )
    pq.write_table(table, attempt / "part-00000-of-00001.parquet")
    lines = [csv_line(["trip_id", "reason"]), csv_line(["d", "<bad> fare"])]
    (attempt / ERRORS_FILE).write_text("\n".join(lines) + "\n")
    error = ScoredOutputError("1 of 4 rows (25.00%) could not be scored")
    error.attempt = str(attempt)

    run = tmp_path / "root" / "run-7"
    step_records.finish_attempt(
        f"{run}/{EXAMPLE_GEN}/{step_records.RECORD_FILE}",
        step_records.SUCCEEDED,
        outputs={
            "examples": (
                step_records.OutputArtifact(
                    f"{run}/{EXAMPLE_GEN}/examples",
                    {SPAN_PROPERTY: 4, FINGERPRINT_PROPERTY: "split:single_split,num_files:1"},
                ),
            )
        },
    )
    step_records.finish_attempt(
        f"{run}/{BATCH_SCORER}/{step_records.RECORD_FILE}",
        step_records.FAILED,
        error=f"ScoredOutputError: {error}",
    )
    report = HTML()
    report.uri = f"{run}/ScoringReport/report"
    steps = {"order": [EXAMPLE_GEN, BATCH_SCORER], "upstream": {BATCH_SCORER: [EXAMPLE_GEN]}}
    ScoringReport.EXECUTOR_SPEC.executor_class._FUNCTION(
        final_status=json.dumps({"state": "FAILED"}),
        pipeline_name="taxi-scoring",
        steps=json.dumps(steps),
        task_name="ScoringReport",
        serving_model_dir=str(serving),
        rolled_out_record=record,
        settings=json.dumps({"keys": ["trip_id"]}),
        report=report,
    )
    html = Path(report.uri).read_text()
    elements = parse(html)
    assert with_attr(elements, "data-status", data_status="failed")
    assert "BatchScorer failed: ScoredOutputError: 1 of 4 rows (25.00%)" in html
    (rows,) = with_attr(elements, "id", id="rows")
    (errors,) = with_attr(elements, "id", id="errors")
    assert (rows["data-value"], errors["data-value"]) == ("3", "1")
    assert 'id="model-version">1<' in html and 'id="span">4<' in html
    assert "&lt;bad&gt; fare" in html and "none committed" in html
    assert len([t for t, _a in elements if t == "img"]) == 2


# --- a scoring run, through the runner (the small trained model: slow) -----------------


def test_a_scoring_run_reports_the_partitions_numbers_and_a_failed_one_says_why(
    tmp_path, small_model_base, capsys
):
    import pandas as pd

    import score_runner
    from tests.conftest import read_taxi_rows, write_csv

    header, rows = read_taxi_rows(limit=230)
    rows = rows[200:]  # the sample's first rows have no drop-off at all, which the schema refuses
    for i, row in enumerate(rows):
        # Two rows without a key cannot be scored: 2 of 30 is over the default share.
        row["trip_id"] = "" if i in (3, 17) else str(1000 + i)
    write_csv(tmp_path / "new" / "data.csv", [c for c in header if c != "tips"] + ["trip_id"], rows)
    serving = served_copy(small_model_base, tmp_path)
    out = tmp_path / "scores"
    argv = ["--data-root", str(tmp_path / "new"), "--serving-dir", str(serving),
            "--output-dir", str(out), "--key", "trip_id"]  # fmt: skip

    assert score_runner.main(argv) == 1
    printed = capsys.readouterr()
    assert "2 of 30 rows (6.67%) could not be scored" in printed.err
    failed = report_path_printed(printed.out)
    assert failed.parent == out / REPORTS_DIR
    html = failed.read_text()
    elements = parse(html)
    assert with_attr(elements, "data-status", data_status="failed") and "FAILED" in html
    assert "2 of 30 rows (6.67%) could not be scored" in html
    (attempt,) = (out / TEMPORARY_DIR).iterdir()
    (rows_shown,) = with_attr(elements, "id", id="rows")
    (errors_shown,) = with_attr(elements, "id", id="errors")
    assert (rows_shown["data-value"], errors_shown["data-value"]) == ("28", "2")
    assert float(errors_shown["data-limit"]) == 0.001
    assert len(pd.read_parquet(attempt)) == 28
    assert not list(out.rglob(SUCCESS_FILE)) and not list(out.glob("span=*"))

    assert score_runner.main([*argv, "--max-error-share", "0.1"]) == 0
    printed = capsys.readouterr().out
    path = report_path_printed(printed)
    html = path.read_text()
    assert html == (out / REPORTS_DIR / "latest.html").read_text()
    partition = out / "span=0" / "version=1"
    manifest = json.loads((partition / SUCCESS_FILE).read_text())
    scores = pd.read_parquet(partition)
    errors = pd.read_csv(partition / ERRORS_FILE)
    elements = parse(html)
    (rows_shown,) = with_attr(elements, "id", id="rows")
    (errors_shown,) = with_attr(elements, "id", id="errors")
    assert int(rows_shown["data-value"]) == manifest["rows"] == len(scores) == 28
    assert int(errors_shown["data-value"]) == manifest["errors"] == len(errors) == 2
    assert float(errors_shown["data-share"]) == pytest.approx(2 / 30)
    assert with_attr(elements, "data-status", data_status="written")
    for name, value in (("model-version", manifest["model_version"]), ("span", "0")):
        assert html.split(f'id="{name}">')[1].split("<")[0] == value
    assert manifest["model_digest"] in html and manifest["input_fingerprint"].split("\n")[0] in html
    buckets = with_attr(elements, "data-low")
    assert sum(int(b["data-count"]) for b in buckets) == len(scores)
    for bucket in buckets:
        low, high = float(bucket["data-low"]), float(bucket["data-high"])
        inside = scores["probability_big_tip"].between(low, high, inclusive="left")
        if high == 1.0:
            inside |= scores["probability_big_tip"] == 1.0
        assert int(bucket["data-count"]) == int(inside.sum()), (low, high)
    mix = scores["class"].value_counts()
    for cls in with_attr(elements, "data-class"):
        assert int(cls["data-count"]) == int(mix.get(cls["data-class"], 0))
    assert "holds no evaluation record" in html  # the fixture's model was not pushed
    # The report is outside the partition: the partition holds what its manifest lists.
    assert sorted(p.name for p in partition.iterdir()) == sorted([*manifest["files"], SUCCESS_FILE])

    assert score_runner.main([*argv, "--max-error-share", "0.1", "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert "Scores unchanged" in printed and "Report: " not in printed
    assert len(list((out / REPORTS_DIR).glob("*.html"))) == 3  # two runs' pages and latest


def test_keys_holding_line_breaks_stay_one_row_in_the_errors_and_csv_files(tmp_path):
    """A key with a newline was written unquoted (the writer's line terminator was
    empty), so it split its row in two: the errors file miscounted, or its reader
    failed on a row without a reason."""
    import pyarrow as pa

    from components.scoring.executor import (
        csv_line,
        csv_lines,
        read_error_reasons,
        read_written_keys,
    )

    keys = ["two\nlines", "cr\rx", "next\x85 sep\u2028", 'quote " ,comma']
    table = pa.table({"trip_id": keys, "prediction": pa.array([1.0] * 4, pa.float32())})
    header = csv_line(table.column_names)
    (tmp_path / "part-00000-of-00001.csv").write_text("\n".join([header, *csv_lines(table)]) + "\n")
    errors = [csv_line(["trip_id", "reason"])] + [csv_line([k, f"bad: {k}"]) for k in keys]
    (tmp_path / ERRORS_FILE).write_text("\n".join(errors) + "\n")
    parts, rows = read_written_keys(str(tmp_path), ["trip_id"], {"trip_id": "string"}, "csv")
    assert parts == ["part-00000-of-00001.csv"] and rows == [(k,) for k in keys]
    assert read_error_reasons(str(tmp_path), ["trip_id"]) == {f"bad: {k}": 1 for k in keys}
    columns, count, first = read_errors(str(tmp_path))
    assert (columns, count, first[0]) == (("trip_id", "reason"), 4, (keys[0], f"bad: {keys[0]}"))
