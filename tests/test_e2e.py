"""The whole DAG on a slice of the real data, twice; the pushed model scores raw CSV rows."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tfx.orchestration import metadata as tfx_metadata

import local_runner
from pipeline.run_summary import summarize_latest_run
from tests.conftest import big_tipper_labels, load_schema, read_taxi_rows
from trainer import features
from trainer.export import PROBABILITY_OUTPUT, SERVING_SIGNATURE
from trainer.raw_examples import serialize_rows

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def _snapshot(directory):
    return {
        p.relative_to(directory): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.is_file()
    }


def test_local_run_pushes_a_model_that_scores_raw_rows_then_reruns_against_it(
    tmp_path, taxi_slice, capsys
):
    output_dir = tmp_path / "out"
    args = ["--data-root", str(taxi_slice), "--output-dir", str(output_dir)]
    args += ["--train-steps", "60", "--eval-steps", "5"]
    metadata = tfx_metadata.sqlite_metadata_connection_config(str(output_dir / "metadata.sqlite"))

    assert local_runner.main(args) == 0
    first = summarize_latest_run(metadata, "taxi-big-tipper")
    assert first.blessed is True and not first.has_baseline
    assert first.metrics["binary_accuracy"] >= 0.8
    (version,) = sorted((output_dir / "serving_model").iterdir())
    assert first.pushed_destination == str(version)
    printed = capsys.readouterr().out
    assert "Blessing: BLESSED" in printed and f"Pushed model: {version}" in printed

    # The pushed model scores raw CSV rows (no label column) through its signature.
    schema = load_schema()
    _, rows = read_taxi_rows(limit=400)
    loaded = tf.saved_model.load(str(version))
    serve = loaded.signatures[SERVING_SIGNATURE]
    assert serve.structured_outputs[PROBABILITY_OUTPUT].dtype == tf.float32
    serialized = serialize_rows(rows, schema, drop=[features.LABEL_SOURCE_KEY])
    probabilities = serve(examples=tf.constant(serialized))[PROBABILITY_OUTPUT].numpy()
    assert probabilities.shape == (len(rows), 1)
    assert np.all((probabilities >= 0) & (probabilities <= 1))
    accuracy = np.mean((probabilities[:, 0] > 0.5) == big_tipper_labels(rows))
    assert accuracy >= 0.8

    # Second run: evaluated against the first run's blessed model; the model
    # being served is never rewritten.
    served_before = _snapshot(version)
    assert local_runner.main(args) == 0
    second = summarize_latest_run(metadata, "taxi-big-tipper")
    assert second.run_id != first.run_id
    assert second.has_baseline
    assert "binary_accuracy_diff" in second.metrics
    assert _snapshot(version) == served_before
