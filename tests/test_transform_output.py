"""Transform's output materialized or not, chosen by the size of the data."""

from __future__ import annotations

import contextlib
import io

import pytest
import tensorflow as tf

from pipeline import transform_output
from pipeline.transform_output import MATERIALIZE_MAX_BYTES, materialize_transform
from tests.conftest import load_schema, read_taxi_rows
from tests.raw_examples import serialize_rows
from trainer.export import SERVING_SIGNATURE


def test_small_data_is_materialized_and_large_data_is_not():
    assert materialize_transform(0)
    assert materialize_transform(MATERIALIZE_MAX_BYTES)
    assert not materialize_transform(MATERIALIZE_MAX_BYTES + 1)


@pytest.mark.slow
@pytest.mark.e2e
def test_a_run_above_the_threshold_trains_through_the_graph_and_serves(
    taxi_slice, taxi_spec, tmp_path, monkeypatch
):
    """As a user's run on data above the threshold: Transform writes no
    examples, the Trainer reads ExampleGen's, and the pushed model serves."""
    from tfx.orchestration import metadata as tfx_metadata

    import local_runner
    from pipeline.local.run_summary import summarize_latest_run

    monkeypatch.setattr(transform_output, "MATERIALIZE_MAX_BYTES", 0)
    output_dir = tmp_path / "out"
    args = ["--data-root", str(taxi_slice), "--output-dir", str(output_dir), "--no-report"]
    args += ["--train-steps", "60", "--eval-steps", "5"]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert local_runner.main(args) == 0
    assert "Transform applied in the Trainer" in stdout.getvalue()

    transform_dir = output_dir / "pipeline_root" / "Transform"
    assert (transform_dir / "transform_graph").is_dir()
    assert not (transform_dir / "transformed_examples").exists()
    metadata = tfx_metadata.sqlite_metadata_connection_config(str(output_dir / "metadata.sqlite"))
    summary = summarize_latest_run(metadata, "taxi-big-tipper")
    assert summary.blessed
    assert summary.metrics["binary_accuracy"] >= 0.8
    (version,) = (output_dir / "serving_model").iterdir()
    serve = tf.saved_model.load(str(version)).signatures[SERVING_SIGNATURE]
    _, rows = read_taxi_rows(limit=3)
    requests = serialize_rows(rows, load_schema(), drop=taxi_spec.serving_excluded_columns())
    assert serve(examples=tf.constant(requests))["probabilities"].shape == (3, 1)
