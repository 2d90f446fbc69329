"""Scheduled runs on a data root that grows a span at a time, as a user runs them locally.

Run 1 trains on span 1. Span 2 arrives: run 2 reads span 2 (ExampleGen not
from cache) and checks its drift against span 1's statistics, kept with the
served model. Span 3 arrives with trip_miles shifted: run 3 stops before the
Trainer, naming the feature, and the serving directory is untouched. The same
span 3 with the spec's drift in warn mode trains and reports the drift.
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import tensorflow as tf

from components.serving.serving_dir import TRAINING_STATISTICS_FILE
from pipeline import steps as dag
from tests.conftest import snapshot_files
from tests.harness import parse, with_attr
from tests.span_data import (
    SHIFTED_FEATURE,
    SPAN_ROWS,
    shifted,
    span_rows,
    span_schema_dir,
    write_span,
)

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str
    summary: object  # components.report.contents.RunReport (pipeline/local/run_summary.py)
    served: list[Path]  # serving_model/ versions after the run
    served_files: dict  # every served file -> its digest, after the run


@pytest.fixture(scope="module")
def span_runs(tmp_path_factory):
    from tfx.orchestration import metadata as tfx_metadata

    import local_runner
    from pipeline.local.run_summary import summarize_latest_run

    tmp = tmp_path_factory.mktemp("spans")
    data_root, output_dir = tmp / "data", tmp / "out"
    failing = span_schema_dir(tmp / "schema", mode="fail")
    warning = span_schema_dir(tmp / "schema-warn", mode="warn")
    metadata = tfx_metadata.sqlite_metadata_connection_config(str(output_dir / "metadata.sqlite"))

    def run(schema_dir: Path) -> Run:
        out, err = io.StringIO(), io.StringIO()
        args = ["--data-root", str(data_root), "--schema-dir", str(schema_dir)]
        args += ["--output-dir", str(output_dir), "--train-steps", "30", "--eval-steps", "5"]
        # One process (which spans are read, the drift gate and the serving directory are
        # the same in either mode): the runner's second process would import TensorFlow
        # and TFX once more per run (tests/test_local_loop.py's first run has two).
        args += ["--sequential"]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = local_runner.main(args)
        sys.stdout.write(out.getvalue() + err.getvalue())
        served = sorted((output_dir / "serving_model").glob("[0-9]*"))
        return Run(
            exit_code=code,
            stdout=out.getvalue(),
            stderr=err.getvalue(),
            summary=summarize_latest_run(metadata, "taxi-big-tipper"),
            served=served,
            served_files={p: snapshot_files(p) for p in served},
        )

    write_span(data_root, 1, span_rows(1))
    runs = {"first": run(failing)}
    write_span(data_root, 2, span_rows(2))
    runs["second"] = run(failing)
    write_span(data_root, 3, shifted(span_rows(3)))
    runs["drifted"] = run(failing)
    runs["drifted_warn"] = run(warning)
    runs["output_dir"] = output_dir
    return runs


def states(run: Run) -> dict[str, str]:
    return {s.step_id: s.state for s in run.summary.steps}


def examples_read(output_dir: Path) -> int:
    """Records in the newest ExampleGen output: the rows the last run that ran it read."""
    newest = max((output_dir / "pipeline_root" / dag.EXAMPLE_GEN / "examples").iterdir(),
                 key=lambda p: int(p.name))  # fmt: skip
    return sum(
        sum(1 for _ in tf.data.TFRecordDataset(str(f), compression_type="GZIP"))
        for f in newest.glob("Split-*/*.gz")
    )


def test_first_run_trains_on_span_1_and_keeps_its_statistics_with_the_model(span_runs):
    first = span_runs["first"]
    assert first.exit_code == 0, first.stderr
    assert first.summary.input.spans == (1,)
    assert "span 1" in first.stdout
    assert "Drift: nothing served under" in first.stdout and "no previous statistics" in (
        first.stdout
    )
    (version,) = first.served
    assert (version / TRAINING_STATISTICS_FILE).is_file()
    assert first.summary.pushed_destination == str(version)


def test_a_new_span_is_read_and_checked_against_the_served_models_data(span_runs):
    first, second = span_runs["first"], span_runs["second"]
    assert second.exit_code == 0, second.stderr
    assert states(second)[dag.EXAMPLE_GEN] == "complete"  # not "cached": the data changed
    assert second.summary.input.spans == (2,)
    assert examples_read(span_runs["output_dir"]) == SPAN_ROWS
    drift = second.summary.drift
    assert drift.baseline_version == first.served[0].name
    assert {c.feature for c in drift.comparisons} == {
        "trip_miles",
        "fare",
        "payment_type",
        "company",
    }
    assert all(c.status == "ok" for c in drift.comparisons), drift.comparisons
    assert len(second.served) == 2  # blessed (the test spec's gate) and pushed


def test_a_drifted_span_stops_the_run_before_training_and_leaves_serving_alone(span_runs):
    second, drifted = span_runs["second"], span_runs["drifted"]
    assert drifted.exit_code == 1
    error = drifted.stderr.strip().splitlines()[-1]
    assert "DataDriftError" in error and f"feature '{SHIFTED_FEATURE}': jensen_shannon" in error
    assert "> threshold 0.25" in error
    assert "fare" not in error  # only what drifted is named
    ran = states(drifted)
    assert ran[dag.DRIFT_GATE] == "failed" and dag.TRAINER not in ran and dag.PUSHER not in ran
    assert drifted.served_files == second.served_files
    assert drifted.summary.input.spans == (3,)


def test_warn_mode_trains_on_the_drifted_span_and_reports_the_drift(span_runs):
    warned = span_runs["drifted_warn"]
    assert warned.exit_code == 0, warned.stderr
    ran = states(warned)
    # Same data and spec as the refused run: ExampleGen comes from cache, the gate runs again.
    assert ran[dag.EXAMPLE_GEN] == "cached" and ran[dag.DRIFT_GATE] == "complete"
    assert ran[dag.TRAINER] == "complete"
    (comparison,) = warned.summary.drift.warnings
    assert comparison.feature == SHIFTED_FEATURE and comparison.value > comparison.threshold
    assert f"drift (warn): feature '{SHIFTED_FEATURE}'" in warned.stdout
    html = (span_runs["output_dir"] / "reports" / "latest.html").read_text()
    rows = {r["data-feature"]: r["data-status"] for r in with_attr(parse(html), "data-status")}
    assert rows == {
        "trip_miles": "drift (warn)",
        "fare": "ok",
        "payment_type": "ok",
        "company": "ok",
    }
    assert with_attr(parse(html), "data-spans")[0]["data-spans"] == "3"
