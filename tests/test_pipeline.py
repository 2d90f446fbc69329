"""The DAG's shape, and every module path handed to TFX as a string."""

from __future__ import annotations

import dataclasses
import importlib
import json

import pytest
import tensorflow_model_analysis as tfma

from contract.dataset.parse import spec_from_custom_config
from contract.dataset.sections import DriftSpec, FeatureDrift, InputSpec
from contract.dataset.spec import DatasetSpec
from kubeflow import pipeline_steps as kubeflow_steps
from pipeline import steps as dag
from pipeline.pipeline import build_eval_config
from pipeline.pipeline_config import PipelineConfig
from tests.harness import EXPECTED_EDGES, RUN_REPORT_EDGES, build
from trainer.config import TrainerConfig
from trainer.run import EXAMPLES_KEY


def edges(pipeline) -> set[tuple[str, str]]:
    return {(up.id, node.id) for node in pipeline.components for up in node.upstream_nodes}


def test_steps_and_edges(tmp_path):
    pipeline = build(tmp_path)
    ids = [c.id for c in pipeline.components]
    assert sorted(ids) == sorted(
        [
            dag.EXAMPLE_GEN,
            dag.STATISTICS_GEN,
            dag.SCHEMA_IMPORTER,
            dag.EXAMPLE_VALIDATOR,
            dag.DATA_GATE,
            dag.DRIFT_GATE,
            dag.TRANSFORM,
            dag.TRAINER,
            dag.BASELINE,
            dag.EVALUATOR,
            dag.PUSHER,
        ]
    )
    assert edges(pipeline) == EXPECTED_EDGES
    # TFX hands runners the components in an order where every edge points forward.
    assert all(ids.index(up) < ids.index(down) for up, down in EXPECTED_EDGES)


def test_without_materialization_the_trainer_reads_examplegen_s_examples(tmp_path):
    pipeline = build(tmp_path, materialize_transform=False)
    # Transform still hands over its graph; the examples come from ExampleGen.
    assert edges(pipeline) == EXPECTED_EDGES | {(dag.EXAMPLE_GEN, dag.TRAINER)}
    by_id = {c.id: c for c in pipeline.components}
    assert "transformed_examples" not in by_id[dag.TRANSFORM].outputs
    assert json.loads(by_id[dag.TRAINER].exec_properties["custom_config"])[EXAMPLES_KEY] == "raw"
    default = {c.id: c for c in build(tmp_path).components}
    trainer_config = json.loads(default[dag.TRAINER].exec_properties["custom_config"])
    assert trainer_config[EXAMPLES_KEY] == "transformed"


def test_kubeflow_steps_add_the_input_snapshot_and_the_run_report(tmp_path):
    pipeline = build(tmp_path, runner_steps=kubeflow_steps.KubeflowSteps())
    assert edges(pipeline) == EXPECTED_EDGES | RUN_REPORT_EDGES | {
        (kubeflow_steps.INPUT_SNAPSHOT, dag.EXAMPLE_GEN)
    }
    by_id = {c.id: c for c in pipeline.components}
    # The snapshot's value, not its artifact, reaches ExampleGen: a parameter in its cache key.
    snapshot = by_id[dag.EXAMPLE_GEN].exec_properties["input_snapshot"]
    from tfx.types import channel_utils

    channel = channel_utils.unwrap_simple_channel_placeholder(snapshot)
    assert channel.producer_component_id == kubeflow_steps.INPUT_SNAPSHOT
    assert not by_id[dag.EXAMPLE_GEN].inputs
    # The report lists every node before it, the snapshot first.
    listed = json.loads(by_id[kubeflow_steps.RUN_REPORT].exec_properties["component_ids"])
    assert set(listed) == {c.id for c in pipeline.components} - {kubeflow_steps.RUN_REPORT}
    assert listed[0] == kubeflow_steps.INPUT_SNAPSHOT


def test_kubeflow_steps_train_on_a_tfjob_with_the_stock_trainers_arguments(tmp_path):
    from kubeflow.tfjob.component import TFJobTrainer
    from kubeflow.tfjob.spec import TFJobSpec

    tfjob = TFJobSpec(
        image="registry.example/pipeline:1", command=("python",), workers=2, working_dir="/p"
    )
    on_tfjob = {
        c.id: c
        for c in build(tmp_path, runner_steps=kubeflow_steps.KubeflowSteps(tfjob)).components
    }
    in_pod = {c.id: c for c in build(tmp_path).components}
    trainer = on_tfjob[dag.TRAINER]
    assert isinstance(trainer, TFJobTrainer)
    assert not isinstance(in_pod[dag.TRAINER], TFJobTrainer)
    config = json.loads(trainer.exec_properties["custom_config"])
    stock = json.loads(in_pod[dag.TRAINER].exec_properties["custom_config"])
    # The job's spec is added; everything the stock Trainer gets is kept.
    assert config.items() >= stock.items()
    assert set(config) - set(stock) == set(tfjob.to_custom_config())
    assert set(trainer.inputs) == set(in_pod[dag.TRAINER].inputs)


def test_the_local_dag_has_no_kubeflow_step(tmp_path):
    ids = {c.id for c in build(tmp_path).components}
    assert ids == set(dag.DAG_STEPS.ids)
    assert not ids & set(kubeflow_steps.KUBEFLOW_ONLY_STEPS.ids)


def test_the_dataset_specs_input_and_drift_reach_their_steps(tmp_path, taxi_spec):
    spec = dataclasses.replace(
        taxi_spec,
        input=InputSpec(pattern="{YYYY}-{MM}-{DD}/*.csv", spans=3),
        drift=DriftSpec(features={"fare": FeatureDrift("jensen_shannon", 0.2, "warn")}),
    )
    by_id = {c.id: c for c in build(tmp_path, dataset=spec).components}
    example_gen = by_id[dag.EXAMPLE_GEN].exec_properties
    assert json.loads(example_gen["input_config"])["splits"][0]["pattern"] == (
        "{YYYY}-{MM}-{DD}/*.csv"
    )
    assert json.loads(example_gen["input_window"]) == {
        "pattern": "{YYYY}-{MM}-{DD}/*.csv",
        "spans": 3,
        "ignore": sorted(taxi_spec.ignore),  # a Parquet column no feature holds is skipped
    }
    assert json.loads(by_id[dag.DRIFT_GATE].exec_properties["thresholds"]) == {
        "fare": {"measure": "jensen_shannon", "threshold": 0.2, "mode": "warn"}
    }
    # Neither is Transform's or the Trainer's business: their cache keys stay as they were.
    plain = {c.id: c for c in build(tmp_path, dataset=taxi_spec).components}
    for node in (dag.TRANSFORM, dag.TRAINER):
        assert (
            by_id[node].exec_properties["custom_config"]
            == (plain[node].exec_properties["custom_config"])
        )


def test_pusher_is_gated_on_the_blessing(tmp_path):
    pipeline = build(tmp_path)
    pusher = next(c for c in pipeline.components if c.id == dag.PUSHER)
    evaluator = next(c for c in pipeline.components if c.id == dag.EVALUATOR)
    assert pusher.inputs["model_blessing"] is evaluator.outputs["blessing"]


def _resolve(path: str):
    module_name, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attr)


def test_every_module_path_given_to_tfx_resolves(tmp_path):
    pipeline = build(tmp_path)
    by_id = {c.id: c for c in pipeline.components}
    paths = {
        "preprocessing_fn": by_id[dag.TRANSFORM].exec_properties["preprocessing_fn"],
        "run_fn": by_id[dag.TRAINER].exec_properties["run_fn"],
    }
    from trainer.preprocessing import preprocessing_fn
    from trainer.run import run_fn

    assert _resolve(paths["preprocessing_fn"]) is preprocessing_fn
    assert _resolve(paths["run_fn"]) is run_fn
    # No module_file: nothing gets packaged into a wheel under the pipeline root.
    assert by_id[dag.TRANSFORM].exec_properties.get("module_file") is None
    assert by_id[dag.TRAINER].exec_properties.get("module_file") is None


def test_a_stale_module_path_fails_to_resolve():
    with pytest.raises(AttributeError):
        _resolve("trainer.run.no_such_fn")


def test_trainer_receives_the_typed_config(tmp_path):
    config = PipelineConfig().with_runtime(precision="mixed_bfloat16")
    trainer = next(c for c in build(tmp_path, config).components if c.id == dag.TRAINER)
    custom = json.loads(trainer.exec_properties["custom_config"])
    assert TrainerConfig.from_custom_config(custom) == config.trainer


def test_transform_and_trainer_receive_the_dataset_spec(tmp_path, taxi_spec):
    by_id = {c.id: c for c in build(tmp_path).components}
    for component_id in (dag.TRANSFORM, dag.TRAINER):
        custom = json.loads(by_id[component_id].exec_properties["custom_config"])
        # The model's part of the spec; input and drift are not theirs to read.
        assert spec_from_custom_config(custom).to_dict() == taxi_spec.to_dict()


def test_thresholds_gate_the_overall_slice_only(taxi_spec):
    evaluation = dataclasses.replace(taxi_spec.evaluation, margin=0.2, max_drop=0.02)
    eval_config = build_eval_config(dataclasses.replace(taxi_spec, evaluation=evaluation))
    (spec,) = eval_config.metrics_specs
    accuracy = next(m for m in spec.metrics if m.class_name == "BinaryAccuracy")
    assert not accuracy.HasField("threshold")
    (per_slice,) = accuracy.per_slice_thresholds
    assert list(per_slice.slicing_specs) == [tfma.SlicingSpec()]
    # 1 - (1 - 0.2) * (1 - 0.775): the naive model's error cut by the margin.
    assert per_slice.threshold.value_threshold.lower_bound.value == pytest.approx(0.82)
    assert per_slice.threshold.change_threshold.absolute.value == pytest.approx(-0.02)
    assert per_slice.threshold.change_threshold.direction == tfma.MetricDirection.HIGHER_IS_BETTER
    (model_spec,) = eval_config.model_specs
    assert list(model_spec.preprocessing_function_names) == ["transform_features"]
    assert model_spec.prediction_key == "probabilities"
    assert [s.feature_keys for s in eval_config.slicing_specs] == [[], ["payment_type"]]


def _gate(eval_config):
    for spec in eval_config.metrics_specs:
        for metric in spec.metrics:
            if metric.per_slice_thresholds:
                return metric, metric.per_slice_thresholds[0].threshold
    raise AssertionError("no gated metric")


def test_regression_is_gated_on_rmse_from_below(tmp_path):
    spec = regression_spec()
    eval_config = build_eval_config(spec)
    metric, threshold = _gate(eval_config)
    assert json.loads(metric.config)["name"] == "root_mean_squared_error"
    # RMSE at most 0.9 x the label's std dev (the mean predictor's RMSE).
    assert threshold.value_threshold.upper_bound.value == pytest.approx(0.9 * 4.0)
    assert not threshold.value_threshold.HasField("lower_bound")
    assert threshold.change_threshold.direction == tfma.MetricDirection.LOWER_IS_BETTER
    assert threshold.change_threshold.absolute.value == pytest.approx(0.04)
    assert eval_config.model_specs[0].prediction_key == "prediction"
    names = {m.class_name for s in eval_config.metrics_specs for m in s.metrics}
    assert {"RootMeanSquaredError", "MeanAbsoluteError"} <= names


def test_multiclass_reports_accuracy_and_per_class_metrics():
    spec = regression_spec(
        label={"task": "multiclass", "column": "y", "classes": ["a", "b", "c"]},
        evaluation={"naive_value": 0.4},
    )
    eval_config = build_eval_config(spec)
    metric, threshold = _gate(eval_config)
    assert metric.class_name == "SparseCategoricalAccuracy"
    assert json.loads(metric.config)["name"] == "accuracy"
    assert threshold.value_threshold.lower_bound.value == pytest.approx(1 - 0.9 * 0.6)
    per_class = next(s for s in eval_config.metrics_specs if s.binarize.class_ids.values)
    assert list(per_class.binarize.class_ids.values) == [0, 1, 2]
    assert {m.class_name for m in per_class.metrics} == {"Precision", "Recall"}


def regression_spec(**changes) -> DatasetSpec:
    from contract.dataset.parse import parse_spec

    values = {
        "name": "houses",
        "label": {"task": "regression", "column": "y", "mean": 10.0, "std": 4.0},
        "features": {"x": {"kind": "numeric"}},
        "evaluation": {"naive_value": 4.0, "max_drop": 0.04},
    }
    values.update(changes)
    return parse_spec(values)


def test_per_step_beam_args_follow_the_pipeline_wide_ones(tmp_path):
    pipeline = build(
        tmp_path,
        beam_pipeline_args=["--direct_num_workers=2"],
        beam_pipeline_args_by_step={dag.TRANSFORM: ["--direct_num_workers=8"]},
    )
    args = {
        c.id: c.executor_spec.beam_pipeline_args
        for c in pipeline.components
        if c.id in dag.DAG_STEPS.beam_ids
    }
    # Beam reads the last of a repeated flag: the step's own value wins.
    assert args[dag.TRANSFORM] == ["--direct_num_workers=2", "--direct_num_workers=8"]
    assert args[dag.EVALUATOR] == ["--direct_num_workers=2"]


def test_per_step_beam_args_for_a_step_without_beam_is_an_error(tmp_path):
    with pytest.raises(ValueError, match=r"\['Trainer'\] run no Beam"):
        build(tmp_path, beam_pipeline_args_by_step={dag.TRAINER: ["--runner=DataflowRunner"]})


# --- the step registry (pipeline/steps.py, kubeflow/pipeline_steps.py) ---------


def test_each_step_declares_the_outputs_its_component_has(tmp_path):
    from kubeflow.pipeline_steps import create_run_status_step
    from kubeflow.settings.serving import parse_serving

    serving = parse_serving({"inference_service": "taxi"}, "gs://bucket/serving")
    pipeline = build(tmp_path, runner_steps=kubeflow_steps.KubeflowSteps(serving=serving))
    built = [*pipeline.components, create_run_status_step(pipeline)]
    assert sorted(c.id for c in built) == sorted(kubeflow_steps.KUBEFLOW_STEPS.ids)
    for component in built:
        declared = kubeflow_steps.KUBEFLOW_STEPS[component.id].outputs
        assert set(component.outputs) == set(declared), component.id
    # Without materialization Transform declares one output fewer, none of another step's.
    unmaterialized = {c.id: c for c in build(tmp_path, materialize_transform=False).components}
    assert set(unmaterialized[dag.TRANSFORM].outputs) < set(dag.DAG_STEPS[dag.TRANSFORM].outputs)


def test_beam_steps_and_only_they_are_tfx_beam_components(tmp_path):
    from tfx.dsl.components.base.base_beam_component import BaseBeamComponent

    beam = {c.id for c in build(tmp_path).components if isinstance(c, BaseBeamComponent)}
    assert beam == set(dag.DAG_STEPS.beam_ids)


def test_every_report_field_is_filled_by_one_step_output_and_read_by_a_report():
    import dataclasses as dc

    from components.report.contents import ArtifactUris, RunReport
    from components.report.outputs import RunOutputs
    from kubeflow.steps.run_report.component import RunReport as RunReportStep

    report_fields = {f.name for f in dc.fields(ArtifactUris)} | {
        f.name for f in dc.fields(RunOutputs) if f.name != "uris"
    }
    outputs = kubeflow_steps.KUBEFLOW_STEPS.report_outputs
    # The DAG fills what the readers read; Deploy adds its outcome on Kubeflow.
    assert set(dag.DAG_STEPS.report_outputs) == report_fields
    assert set(outputs) - report_fields == {"deployment"}
    assert "deployment" in {f.name for f in dc.fields(RunReport)}
    # The RunReport step's inputs are named after the output keys that fill them.
    inputs = set(RunReportStep.SPEC_CLASS.INPUTS)
    assert inputs == {key for _step, key in outputs.values()}


def test_a_step_registry_refuses_a_step_named_twice_and_an_undeclared_report_output():
    from pipeline.steps import Retry, Step, Steps

    with pytest.raises(ValueError, match=r"each step id names one step; \['A'\] name more"):
        Steps((Step("A", ("x",)), Step("A", ("y",))))
    with pytest.raises(ValueError, match=r"each report field names one step; \['f'\]"):
        Steps((Step("A", ("x",), report={"f": "x"}), Step("B", ("y",), report={"f": "y"})))
    with pytest.raises(ValueError, match=r"A: reports \['z'\], which are not among its outputs"):
        Step("A", ("x",), report={"f": "z"})
    with pytest.raises(ValueError, match="a reason goes with 'never'"):
        Retry("never")
    with pytest.raises(ValueError, match="a reason goes with 'never'"):
        Retry("by_default", "because")
    steps = Steps((Step("A", ("x",), report={"f": "x"}), Step("B", ("y",), cached=False)))
    assert steps.report_outputs == {"f": ("A", "x")}
    assert steps.uncached_ids == ("B",)
    with pytest.raises(KeyError):
        steps["C"]


def test_kubeflow_roles_come_from_the_registry():
    steps = kubeflow_steps.KUBEFLOW_STEPS
    assert kubeflow_steps.RETRY_ROLES.retried_by_default == {*dag.DAG_STEPS.beam_ids, dag.TRAINER}
    assert set(kubeflow_steps.RETRY_ROLES.never_retried) == {
        dag.DATA_GATE,
        dag.DRIFT_GATE,
        kubeflow_steps.DEPLOY,
    }
    assert set(steps.uncached_ids) == {
        kubeflow_steps.INPUT_SNAPSHOT,
        kubeflow_steps.DEPLOY,
        dag.DRIFT_GATE,
        dag.BASELINE,
    }
