"""The Evaluator's pruned extracts: TFMA's metrics, slices and validation, unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.extractors import unbatch_extractor
from tfx.components.evaluator import executor as stock_evaluator
from tfx.utils import path_utils

from components.evaluator import reader as evaluation_reader
from components.evaluator.executor import ServedBaselineExecutor
from components.evaluator.extractors import (
    PRUNE_STAGE_NAME,
    custom_extractors,
    prune,
    slice_columns,
)
from contract.dataset.parse import load_spec
from pipeline.pipeline import build_eval_config
from tests.harness import (
    assert_same_evaluation,
    evaluate,
    latest_artifact,
    read_evaluation,
    without_evaluation_record,
)

SPEC = Path(__file__).resolve().parents[1] / "schemas" / "chicago_taxi" / "dataset.yaml"


def test_a_batch_keeps_labels_predictions_weights_and_the_slice_columns_only():
    batch = {
        "input": np.array([b"raw", b"raw"]),
        "features": {"payment_type": np.array([b"Cash", b"Card"]), "fare": np.array([1.0, 2.0])},
        "transformed_features": {"fare_xf": np.array([0.1, 0.2])},
        "labels": np.array([0, 1]),
        "predictions": np.array([0.2, 0.9]),
        "example_weights": np.array([1.0, 1.0]),
    }
    pruned = prune(batch, frozenset({"payment_type"}))
    assert sorted(pruned) == [
        "example_weights",
        "features",
        "labels",
        "predictions",
        "transformed_features",
    ]
    assert list(pruned["features"]) == ["payment_type"]
    assert pruned["transformed_features"] == {}


def test_slice_columns_come_from_every_slicing_and_cross_slicing_spec():
    config = tfma.EvalConfig(
        slicing_specs=[tfma.SlicingSpec(), tfma.SlicingSpec(feature_keys=["a"])],
        cross_slicing_specs=[
            tfma.CrossSlicingSpec(
                baseline_spec=tfma.SlicingSpec(feature_values={"b": "x"}),
                slicing_specs=[tfma.SlicingSpec(feature_keys=["c", "d"])],
            )
        ],
    )
    assert slice_columns(config) == {"a", "b", "c", "d"}


def test_sql_slices_are_refused_by_name():
    config = tfma.EvalConfig(slicing_specs=[tfma.SlicingSpec(slice_keys_sql="SELECT 1")])
    with pytest.raises(ValueError, match="slice_keys_sql"):
        slice_columns(config)


def test_the_evaluator_with_pruned_extracts_computes_what_tfx_s_computes(
    two_local_runs, tmp_path, monkeypatch
):
    """The second run's candidate against the served model, slices, change threshold and all
    (both models scored: tests/test_baseline_reuse.py compares reusing the baseline's
    metrics with this), ours reading only the columns TFMA looks up, TFX's every column."""
    root = two_local_runs.output_dir / "pipeline_root"
    baseline = without_evaluation_record(
        latest_artifact(root / "LatestServedModel" / "baseline_model"), tmp_path / "baseline"
    )
    read_only = []
    columns_only = evaluation_reader.columns_only_in_tfx
    monkeypatch.setattr(
        evaluation_reader,
        "columns_only_in_tfx",
        lambda columns: read_only.append(columns) or columns_only(columns),
    )
    ours, our_blessing = evaluate(ServedBaselineExecutor, root, baseline, tmp_path / "ours", SPEC)
    # The slice column, the label and prediction keys, the signatures' one input.
    assert read_only == [{"payment_type", "label_xf", "probabilities", "examples"}]
    stock, blessing = evaluate(stock_evaluator.Executor, root, baseline, tmp_path / "stock", SPEC)
    ours_read, stock_read = read_evaluation(ours), read_evaluation(stock)
    assert ours_read[0] == stock_read[0]  # binary: counts and accuracy, equal
    assert_same_evaluation(ours_read, stock_read)
    assert len(ours_read[0]) > 2  # the overall slice and payment types
    assert any("is_diff: true" in key for values in ours_read[0].values() for key in values)
    assert our_blessing.get_int_custom_property("blessed") == blessing.get_int_custom_property(
        "blessed"
    )
    assert sorted(p.name for p in Path(our_blessing.uri).iterdir()) == sorted(
        p.name for p in Path(blessing.uri).iterdir()
    )


def test_our_evaluator_prunes_unless_given_a_module_of_its_own(monkeypatch):
    seen = {}

    def record(self, input_dict, output_dict, exec_properties):
        seen.update(exec_properties)

    monkeypatch.setattr(stock_evaluator.Executor, "Do", record)
    ServedBaselineExecutor().Do({}, {}, {})
    assert seen["module_path"] == "components.evaluator.extractors"
    seen.clear()
    ServedBaselineExecutor().Do({}, {}, {"module_file": "/src/my_extractors.py"})
    assert "module_path" not in seen


def test_the_prune_runs_just_before_tfma_unbatches(two_local_runs):
    config = build_eval_config(load_spec(SPEC))
    # Without a baseline model TFMA refuses change thresholds; the stages do not depend on them.
    del config.metrics_specs[:]
    config.metrics_specs.add(metrics=[tfma.MetricConfig(class_name="ExampleCount")])
    model_dir = path_utils.serving_model_path(
        str(latest_artifact(two_local_runs.output_dir / "pipeline_root" / "Trainer" / "model"))
    )
    shared = tfma.default_eval_shared_model(eval_saved_model_path=model_dir, eval_config=config)
    stages = [e.stage_name for e in custom_extractors(shared, config, None)]
    at = stages.index(PRUNE_STAGE_NAME)
    assert stages[at + 1] == unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME
    assert stages[:at] + stages[at + 1 :] == [
        e.stage_name for e in tfma.default_extractors(eval_shared_model=shared, eval_config=config)
    ]
