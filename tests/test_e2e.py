"""The whole DAG on a slice of the real data, twice; the pushed model scores raw CSV rows."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import big_tipper_labels, load_schema, read_taxi_rows
from tests.raw_examples import serialize_rows
from trainer.export import SERVING_SIGNATURE
from trainer.model_support import PROBABILITIES_OUTPUT

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def test_first_run_pushes_a_model_that_scores_raw_rows(two_local_runs, taxi_spec):
    runs = two_local_runs
    assert runs.exit_codes == (0, 0)
    first = runs.first
    assert first.blessed is True and first.baseline_path is None
    assert first.metrics["binary_accuracy"] >= 0.8
    assert first.pushed_destination == str(runs.first_version)
    assert "Blessing: BLESSED" in runs.first_stdout
    assert f"Pushed model: {runs.first_version}" in runs.first_stdout
    # Which signatures it has, and how many named inputs the JSON one takes.
    features = len(taxi_spec.features)
    assert (
        f"  signatures: serving_default(examples), serving_json({features} named inputs), "
        "transform_features(examples)" in runs.first_stdout
    )

    # The pushed model scores raw CSV rows (no label column) through its signature.
    schema = load_schema()
    _, rows = read_taxi_rows(limit=400)
    loaded = tf.saved_model.load(str(runs.first_version))
    serve = loaded.signatures[SERVING_SIGNATURE]
    assert serve.structured_outputs[PROBABILITIES_OUTPUT].dtype == tf.float32
    serialized = serialize_rows(rows, schema, drop=taxi_spec.serving_excluded_columns())
    probabilities = serve(examples=tf.constant(serialized))[PROBABILITIES_OUTPUT].numpy()
    assert probabilities.shape == (len(rows), 1)
    assert np.all((probabilities >= 0) & (probabilities <= 1))
    accuracy = np.mean((probabilities[:, 0] > 0.5) == big_tipper_labels(rows))
    assert accuracy >= 0.8


def test_second_run_is_evaluated_against_the_served_model_and_leaves_it_untouched(
    two_local_runs, taxi_spec
):
    runs = two_local_runs
    second = runs.second
    assert second.run_id != runs.first.run_id
    assert second.baseline_path is not None
    assert "binary_accuracy_diff" in second.metrics
    # The fixture's pair: the second run trained another model, which scores below the
    # served one by more than the change threshold allows, and above the value threshold.
    states = {s.step_id: s.state for s in second.steps}
    assert states["Trainer"] == "complete" and states["Transform"] == "cached"
    assert second.metrics["binary_accuracy_diff"] < -taxi_spec.evaluation.max_drop
    assert second.blessed is False and second.pushed_destination is None
    (failed,) = [line for line in runs.second_stdout.splitlines() if "  failed: " in line]
    assert "breaks the change vs. baseline threshold" in failed
    assert sorted((runs.output_dir / "serving_model").iterdir()) == [runs.first_version]
    assert runs.served_files_after_second == runs.served_files_before_second
