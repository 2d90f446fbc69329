"""README's "Bring your own data", exactly: draft, then run, nothing edited in between.

One small generated dataset per task kind (with missing numeric and
categorical values and a row id to ignore); each must end blessed and pushed,
and the pushed model must score raw rows without the label. The multiclass
one is written as R's write.csv writes it (tests/csv_dialects.py).
"""

from __future__ import annotations

import csv
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tfx.components.evaluator import executor as stock_evaluator

from components.evaluator.executor import ServedBaselineExecutor
from schemas import load_schema_dir, read_schema
from tests.conftest import REPO_ROOT
from tests.csv_dialects import r_write_csv, rewrite
from tests.harness import assert_same_evaluation, evaluate, latest_artifact, read_evaluation
from tests.raw_examples import serialize_rows
from tests.synthetic import TASK_LABELS, write_dataset
from trainer.export import SERVING_SIGNATURE
from trainer.model_support import output_name

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

RUN_TIMEOUT_S = 600


def run(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_draft_then_run_trains_blesses_and_pushes(tmp_path, task):
    data_root = write_dataset(tmp_path / f"{task}-data", task)
    if task == "multiclass":
        # As the penguins' own package exports them: R's write.csv, its header
        # quoted and a missing number written NA (TFX's header reader kept the quotes).
        rewrite(data_root / "data.csv", r_write_csv)
    schema_dir, output_dir = tmp_path / "schema", tmp_path / "out"
    label = TASK_LABELS[task]

    # Step 1 and step 2 of the README, as a user types them.
    drafted = run(
        "-m", "schemas.draft", "--data-root", str(data_root), "--label", label,
        "--output-dir", str(schema_dir),
    )  # fmt: skip
    assert f"{task} on label '{label}'" in drafted.stdout
    ran = run(
        "local_runner.py", "--data-root", str(data_root), "--schema-dir", str(schema_dir),
        "--output-dir", str(output_dir),
    )  # fmt: skip
    assert "Blessing: BLESSED" in ran.stdout, ran.stdout
    (version,) = sorted((output_dir / "serving_model").iterdir())
    assert f"Pushed model: {version}" in ran.stdout

    # The batched metrics are TFMA's on this task: the run's Evaluator, ours and TFX's, with
    # the trained model as its own baseline (so diff keys and the change threshold are there).
    root = output_dir / "pipeline_root"
    model = latest_artifact(root / "Trainer" / "model")
    spec_file = schema_dir / "dataset.yaml"
    ours, blessing = evaluate(ServedBaselineExecutor, root, model, tmp_path / "ours", spec_file)
    tfx_s, _ = evaluate(stock_evaluator.Executor, root, model, tmp_path / "tfx", spec_file)
    assert_same_evaluation(read_evaluation(ours), read_evaluation(tfx_s))
    assert blessing.get_int_custom_property("blessed") == 1

    # The pushed model scores raw rows, label left out, and beats the naive model.
    spec = load_schema_dir(schema_dir).spec
    with (data_root / "data.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    serialized = serialize_rows(
        rows, read_schema(schema_dir / "schema.pbtxt"), drop=spec.serving_excluded_columns()
    )
    serve = tf.saved_model.load(str(version)).signatures[SERVING_SIGNATURE]
    outputs = serve(examples=tf.constant(serialized))[output_name(spec.label)]
    assert outputs.dtype == tf.float32
    predictions = outputs.numpy()
    truth = [row[label] for row in rows]
    if task == "regression":
        assert predictions.shape == (len(rows), 1)
        rmse = float(np.sqrt(np.mean((predictions[:, 0] - np.array(truth, float)) ** 2)))
        assert rmse < spec.evaluation.threshold
    else:
        classes = list(spec.label.classes)
        if task == "binary":
            assert predictions.shape == (len(rows), 1)
            predicted = (predictions[:, 0] > 0.5).astype(int)
        else:
            assert predictions.shape == (len(rows), len(classes))
            np.testing.assert_allclose(predictions.sum(axis=1), 1.0, rtol=1e-4)
            predicted = predictions.argmax(axis=1)
        accuracy = np.mean([classes[p] == t for p, t in zip(predicted, truth, strict=True)])
        assert accuracy > spec.evaluation.threshold
