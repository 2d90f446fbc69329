"""The HTML run report: every section, its numbers equal to MLMD's and the data's, offline."""

from __future__ import annotations

import csv
import datetime
import json
import os
import shutil
from pathlib import Path

import pytest

from components.report import render
from components.report.contents import RunReport, StepRun
from components.report.evaluation import OVERALL_SLICE, _metric_name
from components.report.training import read_training_curves
from tests.harness import (
    HOSTILE_VALUES,
    assert_models_differ,
    assert_self_contained,
    candidate_vs_baseline_by_tfma,
    frozen_hyperparameter_rows,
    latest_artifact,
    metadata_store_of,
    metrics_by_tfma,
    parse,
    report_path_printed,
    run_report_inputs,
    svg_texts,
    with_attr,
)
from trainer.hyperparameters import FrozenHyperparameters, frozen_json
from trainer.run import epoch_plan

# --- pure pieces --------------------------------------------------------------


@pytest.mark.parametrize(
    ("class_name", "config", "expected"),
    [
        ("BinaryAccuracy", "", "binary_accuracy"),
        ("AUC", "", "auc"),
        ("ExampleCount", "", "example_count"),
        ("AUC", '{"name": "auc_pr", "curve": "PR"}', "auc_pr"),
    ],
)
def test_metric_names_follow_tfma(class_name, config, expected):
    assert _metric_name(class_name, config) == expected


def test_report_file_name_keeps_the_run_id_and_nothing_a_path_cannot_hold():
    assert render.report_filename("2026-11-22T21:17:34.359002") == "2026-11-22T21:17:34.359002.html"
    assert render.report_filename("a/b c") == "a_b_c.html"


def test_training_curves_read_both_keras_and_custom_loop_logs(tmp_path):
    import tensorflow as tf

    # Keras' TensorBoard callback: train/ and validation/ with epoch_<metric>.
    for subdir, values in (("train", [0.5, 0.4]), ("validation", [0.6, 0.55])):
        with tf.summary.create_file_writer(str(tmp_path / "keras" / subdir)).as_default():
            for step, v in enumerate(values):
                tf.summary.scalar("epoch_loss", v, step=step)
                tf.summary.scalar("epoch_learning_rate", 0.1, step=step)
    # The multi-worker loop: only train/, validation metrics as epoch_val_<metric>.
    with tf.summary.create_file_writer(str(tmp_path / "loop" / "train")).as_default():
        tf.summary.scalar("epoch_loss", 0.5, step=0)
        tf.summary.scalar("epoch_val_loss", 0.6, step=0)

    keras = read_training_curves(str(tmp_path / "keras"))
    assert keras.metrics == ["loss"]  # learning_rate is not a curve worth a chart
    assert [v for _, v in keras.train["loss"]] == pytest.approx([0.5, 0.4])
    assert [e for e, _ in keras.validation["loss"]] == [1, 2]
    loop = read_training_curves(str(tmp_path / "loop"))
    assert loop.train["loss"] == ((1, pytest.approx(0.5)),)
    assert loop.validation["loss"] == ((1, pytest.approx(0.6)),)


def test_a_run_that_failed_before_any_artifact_still_renders_every_section():
    report = RunReport(
        pipeline_name="p",
        run_id="r1",
        steps=(
            StepRun("ExampleGen", "failed", 1_000, 2_500),
            StepRun("Trainer", "not run"),
        ),
        error="InputDataError: <no rows> & more",
    )
    html = render.render_html(report)
    elements = parse(html)
    for section in render.SECTIONS:
        assert with_attr(elements, "id", id=section), section
    assert "InputDataError: &lt;no rows&gt; &amp; more" in html  # escaped, not markup
    assert with_attr(elements, "data-step", data_step="Trainer", data_state="not run")
    (example_gen,) = with_attr(elements, "data-step", data_step="ExampleGen")
    assert float(example_gen["data-seconds"]) == pytest.approx(1.5)
    assert "FAILED" in html
    assert_self_contained(html)


def test_feature_charts_draw_every_bar_and_escape_values():
    from xml.etree import ElementTree

    from components.report import plots
    from components.report.data_statistics import FeatureStatistics, HistogramBucket

    svg_ns = "{http://www.w3.org/2000/svg}"
    buckets = tuple(HistogramBucket(low, low + 1.0, count) for low, count in ((0, 5), (1, 3)))
    numeric = [
        (split, FeatureStatistics("fare", "numeric", 10, 8, histogram=buckets))
        for split in ("train", "eval")
    ]
    tree = ElementTree.fromstring(plots.feature_distribution(numeric))
    bars = [r for r in tree.iter(svg_ns + "rect") if r.get("fill-opacity")]
    assert len(bars) == 4  # two buckets, two splits
    # Heights are proportional to shares of the split's examples: 5/10 vs 3/10.
    heights = sorted(float(r.get("height")) for r in bars)
    assert heights[-1] == pytest.approx(heights[0] * 5 / 3, rel=1e-3)

    categorical = [
        ("train", FeatureStatistics("kind", "categorical", 4, 4, top_values=(("<a & b>", 3.0),)))
    ]
    text = plots.feature_distribution(categorical)
    tree = ElementTree.fromstring(text)  # parses: the value is escaped, not markup
    assert "<a & b>" in [t.text for t in tree.iter(svg_ns + "text")]
    assert "&lt;a &amp; b&gt;" in text


def hostile_report() -> RunReport:
    """A report whose every drawn name and value holds one of HOSTILE_VALUES."""
    from components.report.data_statistics import FeatureStatistics, SplitStatistics
    from components.report.evaluation import Evaluation, MetricComparison, SliceMetrics
    from components.report.training import TrainingCurves

    top = tuple((value, 3.0) for value in HOSTILE_VALUES)
    return RunReport(
        pipeline_name="p",
        run_id="r",
        steps=tuple(StepRun(value, "succeeded", 1_000, 2_000) for value in HOSTILE_VALUES),
        statistics=(
            SplitStatistics(
                "train",
                30,
                tuple(
                    FeatureStatistics(name, "categorical", 30, 30, unique=8, top_values=top)
                    for name in HOSTILE_VALUES[:2]
                ),
            ),
        ),
        curves=TrainingCurves(train={value: ((1, 0.5), (2, 0.4)) for value in HOSTILE_VALUES[:2]}),
        evaluation=Evaluation(
            slices=tuple(
                SliceMetrics(f"kind = {value}", {"auc": MetricComparison(0.7, 0.6, 0.1)})
                for value in HOSTILE_VALUES
            ),
            thresholds=(),
            validation_ok=True,
            has_baseline=True,
        ),
        # A pushed model's signature and input names, as its saved_model.pb holds them.
        signatures=tuple((value, (value, "x")) for value in HOSTILE_VALUES),
    )


def test_every_chart_draws_values_that_renderers_read_as_markup_as_text():
    """`$0_to_$10` was mathtext to matplotlib (ValueError); a control character broke
    the hand-drawn SVG's XML. Each chart now parses, and shows each value."""
    from components.report import plots

    report = hostile_report()
    assert report.statistics and report.curves and report.evaluation
    charts = {
        "timeline": plots.timeline(report.steps),
        "feature": plots.feature_distribution([("train", report.statistics[0].features[0])]),
        "curve": plots.training_curve(report.curves, "$0_to_$10"),
        "slices": plots.slice_comparison(report.evaluation.slices, "auc"),
    }
    for name, svg in charts.items():
        texts = " ".join(svg_texts(svg))
        for value in HOSTILE_VALUES:
            if name == "curve" and value != "$0_to_$10":
                continue  # one metric per chart
            assert plots.shown(value)[:19] in texts, (name, value)
    assert "$0_to_$10" in " ".join(svg_texts(charts["curve"]))
    assert plots.shown("bell\x07 nul\x00") == "bell\\x07 nul\\x00"
    assert plots.shown("two\nlines") == "two\\nlines"  # one label, one line


def test_the_report_renders_values_that_renderers_read_as_markup():
    import base64

    html = render.render_html(hostile_report())
    elements = parse(html)
    images = [a["src"] for t, a in elements if t == "img"]
    # The timeline, a chart per feature, a curve per metric, one slice chart.
    assert len(images) == 1 + 2 + 2 + 1
    for src in images:
        svg_texts(base64.b64decode(src.removeprefix("data:image/svg+xml;base64,")).decode())
    assert not [a for _t, a in elements if "left-out" in a.get("class", "")]
    assert "&lt;b&gt;&amp;amp;" in html  # the page escapes it too
    # The signatures section: each name and its inputs read back as they were written.
    signatures = with_attr(elements, "data-signature")
    shown = [(a["data-signature"], a["data-inputs"]) for a in signatures]
    assert shown == [(value, f"{value},x") for value in HOSTILE_VALUES]


@pytest.mark.parametrize(
    "chart", ["timeline", "feature_distribution", "training_curve", "slice_comparison"]
)
def test_a_chart_that_cannot_be_drawn_is_left_out_with_a_note(monkeypatch, chart):
    from components.report import plots

    def fail(*_args):
        raise ValueError("cannot draw this")

    monkeypatch.setattr(plots, chart, fail)
    html = render.render_html(hostile_report())
    elements = parse(html)
    notes = [a for _t, a in elements if "left-out" in a.get("class", "")]
    assert notes, "no note says what was left out"
    assert html.count("ValueError: cannot draw this") == len(notes)
    for section in render.SECTIONS:
        assert with_attr(elements, "id", id=section), section
    drawn = len([a for t, a in elements if t == "img"])
    assert drawn == 1 + 2 + 2 + 1 - len(notes)


def run_report_step(tmp_path, *, anomalies_pb: bytes | None = None, blessed: str = "1"):
    """The Kubeflow RunReport step's executor on artifacts of no run: an anomalies
    artifact holding `anomalies_pb` (when given) and a blessing saying `blessed`.
    Returns the page it wrote and its metrics artifact."""
    from tfx.types import standard_artifacts

    from components.gates.drift.artifact import DataDrift
    from kubeflow.steps.kfp_artifacts import HTML, Metrics
    from kubeflow.steps.run_report.component import RunReport as RunReportStep
    from pipeline import steps as dag

    inputs = {
        "examples": standard_artifacts.Examples(),
        "statistics": standard_artifacts.ExampleStatistics(),
        "anomalies": standard_artifacts.ExampleAnomalies(),
        "drift": DataDrift(),
        "model_run": standard_artifacts.ModelRun(),
        "evaluation": standard_artifacts.ModelEvaluation(),
        "blessing": standard_artifacts.ModelBlessing(),
        "baseline_model": standard_artifacts.Model(),
        "pushed_model": standard_artifacts.PushedModel(),
    }
    if anomalies_pb is not None:
        split = tmp_path / "anomalies" / "Split-train"
        split.mkdir(parents=True)
        (split / "SchemaDiff.pb").write_bytes(anomalies_pb)
        inputs["anomalies"].uri = str(tmp_path / "anomalies")
    inputs["blessing"].set_string_custom_property("blessed", blessed)
    report, metrics = HTML(), Metrics()
    report.uri = str(tmp_path / "run-7" / "RunReport" / "report")
    metrics.uri = str(tmp_path / "run-7" / "RunReport" / "metrics")
    RunReportStep.EXECUTOR_SPEC.executor_class().Do(
        {key: [artifact] for key, artifact in inputs.items()},
        {"report": [report], "metrics": [metrics]},
        {
            "pipeline_name": "p",
            "component_ids": json.dumps(dag.DAG_STEPS.ids),
            "hyperparameters": "null",
        },
    )
    return Path(report.uri).read_text(), metrics


@pytest.mark.parametrize(
    ("broken", "note"),
    [
        ("a chart", "The step timeline chart is left out: it could not be drawn (ValueError"),
        ("an artifact", "The anomalies section is left out: its artifact could not be read ("),
        ("the whole report", "sections are left out: they could not be read or drawn (ValueError"),
        ("nothing", None),
    ],
)
def test_the_kubeflow_run_report_step_writes_what_it_can_and_says_what_it_left_out(
    tmp_path, monkeypatch, broken, note
):
    """The RunReport step runs after Deploy has served the model: a chart it cannot
    draw, an artifact it cannot read, or a report it cannot build at all leaves the
    step succeeding with a page that names what is missing (before, the step raised
    and the run read FAILED with the model served)."""
    from components.report import plots
    from pipeline import steps as dag

    def fail(*_args):
        raise ValueError("cannot draw this")

    if broken == "a chart":
        monkeypatch.setattr(plots, "timeline", fail)
    html, metrics = run_report_step(
        tmp_path,
        anomalies_pb=b"not a protocol buffer" if broken == "an artifact" else None,
        blessed="yes, by hand" if broken == "the whole report" else "1",
    )
    elements = parse(html)
    notes = [a for _t, a in elements if "left-out" in a.get("class", "")]
    if note is None:
        assert notes == [], html
    else:
        assert len(notes) == 1 and html.count(note) == 1, html
    assert {a["data-step"] for a in with_attr(elements, "data-step")} == set(dag.DAG_STEPS.ids)
    assert metrics.get_string_custom_property("display_name") == "metrics"
    if broken != "the whole report":  # the blessing read, the rest shown
        assert metrics.get_float_custom_property("blessed") == 1.0


def test_axis_labels_get_the_digits_that_tell_ticks_apart():
    from components.report.plots import _axis_labels

    assert _axis_labels([0.0, 0.5, 1.0]) == ["0", "0.5", "1"]
    tracts = _axis_labels([17_031_010_100, 17_031_495_100, 17_031_980_100])
    assert len(set(tracts)) == 3


# --- a real run ---------------------------------------------------------------


@pytest.fixture(scope="module")
def second_report(two_local_runs) -> tuple[str, list]:
    path = report_path_printed(two_local_runs.second_stdout)
    html = path.read_text()
    return html, parse(html)


@pytest.mark.slow
@pytest.mark.e2e
def test_each_run_writes_its_own_report_and_latest(two_local_runs):
    runs = two_local_runs
    reports = runs.output_dir / "reports"
    first = report_path_printed(runs.first_stdout)
    second = report_path_printed(runs.second_stdout)
    assert first == reports / render.report_filename(runs.first.run_id)
    assert second == reports / render.report_filename(runs.second.run_id)
    assert first.exists() and second.exists()
    assert (reports / render.LATEST).read_text() == second.read_text()
    assert runs.first.run_id in first.read_text()


@pytest.mark.slow
@pytest.mark.e2e
def test_report_is_self_contained(second_report):
    html, _ = second_report
    assert_self_contained(html)


def step_executions(output_dir: Path, run_id: str) -> dict[str, object]:
    """Step id -> its execution in run `run_id`, read from ML Metadata directly (not
    through pipeline.local.run_summary): each node context's executions that are also
    the run context's."""
    store = metadata_store_of(output_dir)
    run = store.get_context_by_type_and_name("pipeline_run", run_id)
    in_run = {e.id: e for e in store.get_executions_by_context(run.id)}
    found = {}
    for node in store.get_contexts_by_type("node"):
        pipeline_name, step = node.name.split(".", 1)
        executions = [e for e in store.get_executions_by_context(node.id) if e.id in in_run]
        if pipeline_name == "taxi-big-tipper" and executions:
            (found[step],) = executions
    return found


@pytest.mark.slow
@pytest.mark.e2e
def test_report_steps_equal_mlmd(two_local_runs, second_report):
    from ml_metadata.proto import metadata_store_pb2

    from pipeline.steps import DAG_STEPS

    _, elements = second_report
    rows = {r["data-step"]: r for r in with_attr(elements, "data-step")}
    executions = step_executions(two_local_runs.output_dir, two_local_runs.second.run_id)
    assert sorted(rows) == sorted(executions) == sorted(DAG_STEPS.ids)
    for step, execution in executions.items():
        state = metadata_store_pb2.Execution.State.Name(execution.last_known_state).lower()
        assert rows[step]["data-state"] == state, step
        seconds = (execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1e3
        assert float(rows[step]["data-seconds"]) == pytest.approx(seconds), step
    # The second run trained a model of its own on the data the first run read.
    assert rows["Trainer"]["data-state"] == rows["Evaluator"]["data-state"] == "complete"
    assert rows["ExampleGen"]["data-state"] == rows["Transform"]["data-state"] == "cached"
    for section in render.SECTIONS:
        assert with_attr(elements, "id", id=section), f"section {section} missing"


@pytest.mark.slow
@pytest.mark.e2e
def test_report_statistics_count_what_the_csv_holds(two_local_runs, second_report, taxi_slice):
    _, elements = second_report
    with (taxi_slice / "data.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    splits = with_attr(elements, "data-examples")
    assert {s["data-split"] for s in splits} == {"train", "eval"}
    assert sum(int(s["data-examples"]) for s in splits) == len(rows)
    # Empty cells, per column, in the raw file: the report's "missing" over both splits.
    for feature in ("company", "dropoff_census_tract", "dropoff_latitude", "fare"):
        feature_rows = _feature_rows(elements, feature)
        assert {r["data-split"] for r in feature_rows} == {"train", "eval"}, feature
        empty = sum(1 for r in rows if r[feature] == "")
        assert sum(int(r["data-missing"]) for r in feature_rows) == empty, feature
    # An ignored column is never read, so it is in no example and no statistic (issue 71).
    assert _feature_rows(elements, "pickup_census_tract") == []
    (fare_train,) = [r for r in _feature_rows(elements, "fare") if r["data-split"] == "train"]
    assert 0 < float(fare_train["data-mean"]) < 100


def _feature_rows(elements, feature: str) -> list[dict[str, str]]:
    """The per-split rows inside the card of `feature`."""
    out, inside = [], False
    for tag, attrs in elements:
        if tag == "div" and "data-feature" in attrs:
            inside = attrs["data-feature"] == feature
        elif inside and tag == "tr" and "data-missing" in attrs:
            out.append(attrs)
    return out


@pytest.mark.slow
@pytest.mark.e2e
def test_report_training_and_runtime_come_from_the_trainer(two_local_runs, second_report):
    _, elements = second_report
    epochs, _ = epoch_plan(two_local_runs.train_steps[1])
    for metric in ("loss", "binary_accuracy"):
        for data in ("train", "validation"):
            assert with_attr(elements, "data-metric", data_metric=metric, data_data=data)
    values = [a for _t, a in elements if "data-epoch" in a]
    assert max(int(a["data-epoch"]) for a in values) == epochs
    # The second run's Trainer: it trained a model of its own.
    model_run = latest_artifact(
        two_local_runs.output_dir / "pipeline_root" / "Trainer" / "model_run"
    )
    resolved = json.loads((model_run / "trainer_config.json").read_text())["resolved_runtime"]
    keys = {a["data-key"] for a in with_attr(elements, "data-key")}
    assert keys == set(resolved)
    assert {"devices", "strategy", "precision", "global_batch_size"} <= keys


def evaluation_uri(output_dir: Path, run_id: str) -> str:
    """Where the Evaluator of run `run_id` wrote, as ML Metadata records it."""
    store = metadata_store_of(output_dir)
    run = store.get_context_by_type_and_name("pipeline_run", run_id)
    (evaluation,) = [
        a
        for a in store.get_artifacts_by_context(run.id)
        if store.get_artifact_types_by_id([a.type_id])[0].name == "ModelEvaluation"
    ]
    return evaluation.uri


def report_metrics_table(elements) -> dict[tuple[str, str, str], float]:
    """{(slice, metric, "candidate" | "baseline" | "diff"): value} of the report's table."""
    values, slice_name = {}, None
    for tag, attrs in elements:
        if tag == "tr" and "data-slice" in attrs:
            slice_name = attrs["data-slice"]
        elif tag == "td" and "data-model" in attrs and attrs["data-value"]:
            values[slice_name, attrs["data-metric"], attrs["data-model"]] = float(
                attrs["data-value"]
            )
    return values


@pytest.mark.slow
@pytest.mark.e2e
def test_report_evaluation_equals_tfma_candidate_vs_baseline(two_local_runs, second_report):
    import tensorflow_model_analysis as tfma

    html, elements = second_report
    runs = two_local_runs
    summary = runs.second
    uri = evaluation_uri(runs.output_dir, summary.run_id)
    tfma_values = candidate_vs_baseline_by_tfma(uri)
    assert_models_differ(tfma_values)
    table = report_metrics_table(elements)
    assert table.keys() == tfma_values.keys()
    for key, value in tfma_values.items():
        assert table[key] == pytest.approx(value), key
    # The baseline is the model the first run pushed, scored on the same examples:
    # the first run's candidate, as TFMA read that run's evaluation.
    first = metrics_by_tfma(evaluation_uri(runs.output_dir, runs.first.run_id))
    assert {k for k in tfma_values if k[2] == "baseline"} == {(*k, "baseline") for k in first}
    for (slice_name, name), value in first.items():
        assert tfma_values[slice_name, name, "baseline"] == pytest.approx(value)
    assert summary.metrics["binary_accuracy"] == pytest.approx(
        tfma_values[OVERALL_SLICE, "binary_accuracy", "candidate"]
    )
    slices = {a["data-slice"] for a in with_attr(elements, "data-slice")}
    assert OVERALL_SLICE in slices and any(s.startswith("payment_type = ") for s in slices)
    # Each threshold's outcome is TFMA's validation of it (value, or change vs. baseline).
    validation = tfma.load_validation_result(uri)
    failed = {
        (f.metric_key.name, "change" if f.metric_key.is_diff else "value")
        for per_slice in validation.metric_validations_per_slice
        for f in per_slice.failures
    }
    thresholds = with_attr(elements, "data-kind")
    assert {(t["data-metric"], t["data-kind"]) for t in thresholds} == {
        ("binary_accuracy", "value"),
        ("binary_accuracy", "change"),
    }
    for t in thresholds:
        passed = (t["data-metric"], t["data-kind"]) not in failed
        assert t["data-passed"] == str(passed), t
    assert summary.blessed is bool(validation.validation_ok)
    (blessing,) = with_attr(elements, "data-blessed")
    assert blessing["data-blessed"] == str(summary.blessed)
    assert str(runs.first_version) in html  # the served baseline


@pytest.mark.slow
@pytest.mark.e2e
def test_first_report_has_no_baseline_and_names_the_pushed_model(two_local_runs):
    html = report_path_printed(two_local_runs.first_stdout).read_text()
    elements = parse(html)
    assert not with_attr(elements, "data-model", data_model="baseline")
    assert {t["data-kind"] for t in with_attr(elements, "data-kind")} == {"value"}
    (pushed,) = with_attr(elements, "data-path")
    assert pushed["data-path"] == str(two_local_runs.first_version)
    found = with_attr(elements, "data-signature")
    signatures = {e["data-signature"]: e["data-inputs"] for e in found}
    assert signatures["serving_default"] == "examples"
    assert "trip_miles" in signatures["serving_json"].split(",")


# --- in a real browser --------------------------------------------------------

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def installed_chromium() -> str:
    """Debian's chromium: .ci/run installs it; a test never changes the host."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail(
            "Chromium is not installed: .ci/run installs Debian's chromium before the suite"
        )
    pytest.skip("Chromium is not installed (apt-get install chromium; .ci/run does)")


@pytest.mark.slow
@pytest.mark.e2e
def test_report_opens_in_chromium_without_network_or_console_errors(two_local_runs, tmp_path):
    from playwright.sync_api import sync_playwright

    chromium = installed_chromium()
    report = report_path_printed(two_local_runs.second_stdout)
    requests, console_errors, page_errors = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        page.goto(report.as_uri(), wait_until="load")
        images = page.eval_on_selector_all(
            "img.chart", "imgs => imgs.map(i => [i.complete, i.naturalWidth])"
        )
        sections = page.eval_on_selector_all("section", "ss => ss.map(s => s.id)")
        screenshot = tmp_path / "report.png"
        page.screenshot(path=str(screenshot), full_page=True)
        browser.close()

    off_file = [u for u in requests if not u.startswith(("file:", "data:"))]
    assert off_file == [], f"the report requested the network: {off_file}"
    assert console_errors == [] and page_errors == []
    assert sections == list(render.SECTIONS)
    assert images and all(done and width > 0 for done, width in images), images
    assert screenshot.stat().st_size > 50_000


@pytest.mark.slow
@pytest.mark.e2e
def test_kubeflow_run_report_step_writes_the_report_from_its_input_artifacts(
    two_local_runs, tmp_path
):
    """The RunReport executor, on the artifacts of a real run, as a Kubeflow step runs it."""
    from kubeflow.steps.kfp_artifacts import HTML, Metrics
    from kubeflow.steps.run_report.component import RunReport
    from kubeflow.steps.run_report.executor import BASELINE_PREFIX, BLESSED_METRIC
    from pipeline import steps as dag

    input_dict = {
        key: [artifact]
        for key, artifact in run_report_inputs(
            two_local_runs.output_dir, two_local_runs.second.run_id
        ).items()
    }
    output, metrics = HTML(), Metrics()
    # KFP's layout: <run>/<task>/<output>; the report is the file at its URI.
    output.uri = str(tmp_path / "run-7" / "RunReport" / "report")
    metrics.uri = str(tmp_path / "run-7" / "RunReport" / "metrics")
    # The frozen file as the compile passes it: the values, their data's age
    # on the day the step runs, their spans, and whether the search was partial.
    read_at = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=9, hours=1)
    frozen = FrozenHyperparameters(
        model={"hidden_units": [32, 16], "learning_rate": 0.002},
        provenance={
            "partial": True,
            "trials": 3,
            "data": {"spans": [4, 5], "read_at": read_at.isoformat()},
        },
    )
    executor = RunReport.EXECUTOR_SPEC.executor_class()
    executor.Do(
        input_dict,
        {"report": [output], "metrics": [metrics]},
        {
            "pipeline_name": "taxi-big-tipper",
            "component_ids": json.dumps(dag.DAG_STEPS.ids),
            "hyperparameters": frozen_json(frozen),
        },
    )

    # The KFP UI's metrics: the overall ones, the baseline's, the blessing.
    second = two_local_runs.second
    assert metrics.get_string_custom_property("display_name") == "metrics"
    values = {
        name: metrics.get_float_custom_property(name)
        for name in metrics.mlmd_artifact.custom_properties
        if name != "display_name"
    }
    assert values[BLESSED_METRIC] == (1.0 if second.blessed else 0.0)
    # Candidate and baseline as TFMA reads the Evaluator's output; they differ, so a
    # baseline taken from the candidate, or the two swapped, shows.
    tfma_values = candidate_vs_baseline_by_tfma(
        evaluation_uri(two_local_runs.output_dir, second.run_id)
    )
    assert_models_differ(tfma_values)
    overall = {
        (name, model): value
        for (slice_name, name, model), value in tfma_values.items()
        if slice_name == OVERALL_SLICE and model != "diff"
    }
    expected = {
        (BASELINE_PREFIX if model == "baseline" else "") + name: value
        for (name, model), value in overall.items()
    }
    assert values.keys() - {BLESSED_METRIC} == expected.keys()
    for name, value in expected.items():
        assert values[name] == pytest.approx(value), name

    html = Path(output.uri).read_text()
    assert_self_contained(html)
    elements = parse(html)
    for section in render.SECTIONS:
        assert with_attr(elements, "id", id=section), section
    assert {a["data-step"] for a in with_attr(elements, "data-step")} == set(dag.DAG_STEPS.ids)
    local = parse((two_local_runs.output_dir / "reports" / render.LATEST).read_text())
    # Same artifacts, same numbers as the local report.
    for attribute in (
        "data-examples",
        "data-missing",
        "data-value",
        "data-blessed",
        "data-spans",
        "data-status",
    ):
        assert [a for _t, a in elements if attribute in a] == [
            a for _t, a in local if attribute in a
        ], attribute
    assert str(two_local_runs.first_version) in html  # the served baseline
    assert frozen_hyperparameter_rows(html) == {
        "hidden_units": "[32, 16]",
        "learning_rate": "0.002",
        "data age": "9 days",
        "data spans": "4, 5",
        "trials": "3 (partial: cut off by the deadline)",
    }


def test_the_report_shows_the_input_read_and_the_drift_check(two_local_runs):
    """Both runs read the whole data root (no span pattern); the second compares its data
    with the statistics kept with the first run's served model: the same data."""
    elements = parse((two_local_runs.output_dir / "reports" / render.LATEST).read_text())
    (spans,) = with_attr(elements, "data-spans")
    assert spans["data-spans"] == ""  # every file under the data root
    second = two_local_runs.second
    assert second.drift.baseline_version == two_local_runs.first_version.name
    statuses = {e["data-feature"]: e["data-status"] for e in with_attr(elements, "data-status")}
    assert statuses == {c.feature: "ok" for c in second.drift.comparisons}
    assert len(statuses) == 15 and all(c.value < 1e-9 for c in second.drift.comparisons)
