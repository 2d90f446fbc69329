"""The Evaluator's pruned extracts: TFMA's metrics, slices and validation, unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.extractors import unbatch_extractor
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer
from tfx.components.evaluator import executor as stock_evaluator
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import path_utils, proto_utils

from components.evaluation_extractors import (
    PRUNE_STAGE_NAME,
    custom_extractors,
    prune,
    slice_columns,
)
from components.evaluator import ServedBaselineExecutor
from pipeline.pipeline import build_eval_config
from trainer.dataset import load_spec

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


def _latest(directory: Path) -> Path:
    return max(directory.iterdir(), key=lambda p: int(p.name))


def _artifact(cls, uri: Path, splits: list[str] | None = None):
    artifact = cls()
    artifact.uri = str(uri)
    if splits:
        artifact.split_names = artifact_utils.encode_split_names(splits)
    return artifact


def _evaluate(executor_class, run_root: Path, baseline: Path, out: Path):
    """One Evaluator execution on a finished run's artifacts; (metrics, validation) as read back."""
    examples = _artifact(
        standard_artifacts.Examples,
        _latest(run_root / "CsvExampleGen" / "examples"),
        ["train", "eval"],
    )
    model = _artifact(standard_artifacts.Model, _latest(run_root / "Trainer" / "model"))
    baseline_model = _artifact(standard_artifacts.Model, baseline)
    baseline_model.set_int_custom_property("has_model", 1)
    evaluation = _artifact(standard_artifacts.ModelEvaluation, out / "evaluation")
    blessing = _artifact(standard_artifacts.ModelBlessing, out / "blessing")
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=["--direct_running_mode=in_memory"], tmp_dir=str(out / ".tmp")
    )
    executor_class(context).Do(
        {"examples": [examples], "model": [model], "baseline_model": [baseline_model]},
        {"evaluation": [evaluation], "blessing": [blessing]},
        {
            "eval_config": proto_utils.proto_to_json(build_eval_config(load_spec(SPEC))),
            "example_splits": json.dumps(["eval"]),
            "fairness_indicator_thresholds": "null",
        },
    )
    metrics = {
        str(m.slice_key): {
            (kv.key.name, kv.key.is_diff, kv.key.model_name): kv.value.double_value.value
            for kv in m.metric_keys_and_values
        }
        for m in tfma_writer.load_and_deserialize_metrics(str(out / "evaluation"))
    }
    validation = tfma.load_validation_result(str(out / "evaluation"))
    return metrics, validation, blessing


def test_the_evaluator_with_pruned_extracts_computes_what_tfx_s_computes(two_local_runs, tmp_path):
    """The second run's candidate against the served model, slices, change threshold and all."""
    root = two_local_runs.output_dir / "pipeline_root"
    baseline = _latest(root / "LatestServedModel" / "baseline_model")
    ours = _evaluate(ServedBaselineExecutor, root, baseline, tmp_path / "ours")
    stock = _evaluate(stock_evaluator.Executor, root, baseline, tmp_path / "stock")
    assert ours[0] == stock[0]
    assert len(ours[0]) > 2  # the overall slice and payment types
    assert any(is_diff for values in ours[0].values() for (_, is_diff, _) in values)
    assert ours[1] == stock[1]
    assert ours[2].get_int_custom_property("blessed") == stock[2].get_int_custom_property("blessed")


def test_our_evaluator_prunes_unless_given_a_module_of_its_own(monkeypatch):
    seen = {}

    def record(self, input_dict, output_dict, exec_properties):
        seen.update(exec_properties)

    monkeypatch.setattr(stock_evaluator.Executor, "Do", record)
    ServedBaselineExecutor().Do({}, {}, {})
    assert seen["module_path"] == "components.evaluation_extractors"
    seen.clear()
    ServedBaselineExecutor().Do({}, {}, {"module_file": "/src/my_extractors.py"})
    assert "module_path" not in seen


def test_the_prune_runs_just_before_tfma_unbatches(two_local_runs):
    config = build_eval_config(load_spec(SPEC))
    # Without a baseline model TFMA refuses change thresholds; the stages do not depend on them.
    del config.metrics_specs[:]
    config.metrics_specs.add(metrics=[tfma.MetricConfig(class_name="ExampleCount")])
    model_dir = path_utils.serving_model_path(
        str(_latest(two_local_runs.output_dir / "pipeline_root" / "Trainer" / "model"))
    )
    shared = tfma.default_eval_shared_model(eval_saved_model_path=model_dir, eval_config=config)
    stages = [e.stage_name for e in custom_extractors(shared, config, None)]
    at = stages.index(PRUNE_STAGE_NAME)
    assert stages[at + 1] == unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME
    assert stages[:at] + stages[at + 1 :] == [
        e.stage_name for e in tfma.default_extractors(eval_shared_model=shared, eval_config=config)
    ]
