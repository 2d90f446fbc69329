"""The TFX DAG, built by one pure factory shared by every runner.

ExampleGen (the latest span, or a window of spans) -> StatisticsGen ->
(schema from schemas/) -> ExampleValidator -> DataValidationGate, and
StatisticsGen -> DataDriftGate (against the data behind the served model)
-> Trainer -> Evaluator (absolute and change thresholds vs. the model
currently served, i.e. the latest blessed and pushed one) -> Pusher (only if
blessed; it keeps the training data's statistics and the evaluation's record
with the model, so the next run's Evaluator need not score it again). Transform
runs beside the validation branch (ExampleGen -> Transform -> Trainer): the
gates hold back the Trainer, the first step whose output can reach serving.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import tensorflow_model_analysis as tfma
from ml_metadata.proto import metadata_store_pb2
from tfx.components import ExampleValidator, StatisticsGen
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.dsl.components.base.base_component import BaseComponent
from tfx.orchestration.data_types import RuntimeParameter
from tfx.orchestration.pipeline import Pipeline
from tfx.proto import pusher_pb2, trainer_pb2

from components.evaluator.component import Evaluator
from components.example_gen.component import ExampleGen
from components.example_gen.executor import PARQUET_EXAMPLES_KEY
from components.gates.data_validation.component import DataValidationGate
from components.gates.drift.component import DataDriftGate
from components.serving.baseline.component import LatestServedModel
from components.serving.push.component import Pusher
from components.transform.component import Transform
from contract.dataset.names import LABEL_KEY
from contract.dataset.spec import DatasetSpec
from contract.dataset.task_metrics import TASK_METRICS
from pipeline import fingerprint
from pipeline.runner_steps import DagSteps, RunnerSteps
from pipeline.steps import (
    BASELINE,
    DAG_STEPS,
    DATA_GATE,
    DRIFT_GATE,
    EVALUATOR,
    EXAMPLE_GEN,
    EXAMPLE_VALIDATOR,
    PUSHER,
    SCHEMA_IMPORTER,
    STATISTICS_GEN,
    TRAINER,
    TRANSFORM,
)
from trainer.config import TrainerConfig
from trainer.export import SERVING_SIGNATURE, TRANSFORM_SIGNATURE
from trainer.fork.config_file import extra_steps
from trainer.model_support import output_name
from trainer.preprocessing import FORCE_TF_COMPAT_V1, preprocessing_fn
from trainer.run import EXAMPLES_KEY as TRAINER_EXAMPLES_KEY
from trainer.run import run_fn


def function_path(fn: Callable) -> str:
    """`module.function` for a function TFX must import by name at run time."""
    return f"{fn.__module__}.{fn.__qualname__}"


def code_fingerprint_config(fn: Callable) -> dict[str, str]:
    """`custom_config` entry that ties a step's cache key to the code `fn` runs."""
    return {fingerprint.CUSTOM_CONFIG_KEY: fingerprint.code_fingerprint(fn)}


def gate_threshold(dataset: DatasetSpec) -> tfma.MetricThreshold:
    """The spec's gate: an absolute bound from the data, and no regression vs. the baseline."""
    evaluation = dataset.evaluation
    if evaluation.higher_is_better:
        bound = {"lower_bound": {"value": evaluation.threshold}}
        direction = tfma.MetricDirection.HIGHER_IS_BETTER
        allowed_change = -evaluation.max_drop
    else:
        bound = {"upper_bound": {"value": evaluation.threshold}}
        direction = tfma.MetricDirection.LOWER_IS_BETTER
        allowed_change = evaluation.max_drop
    return tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(**bound),
        change_threshold=tfma.GenericChangeThreshold(
            direction=direction, absolute={"value": allowed_change}
        ),
    )


def task_metrics(dataset: DatasetSpec) -> tuple[list[tfma.MetricConfig], list[tfma.MetricsSpec]]:
    """(metrics of the whole model, extra metric specs) for the spec's task.

    binary: accuracy (TFMA's own). multiclass: accuracy (Keras'
    SparseCategoricalAccuracy, computed by TFMA) plus precision and recall per
    class and a confusion matrix. regression: RMSE and MAE. The gate metric is
    first; it alone carries the threshold. The Evaluator computes all of these
    on whole batches (components/evaluator/batched_metrics.py, `KINDS`).

    Binary has no AUC here: the batched metrics do not compute it, so adding
    `tfma.MetricConfig(class_name="AUC")` runs TFMA's per-example evaluator
    instead (its AUC updates a 10,000-bucket histogram in Python for every
    example and slice), for a number nothing gates on. The Trainer's
    validation computes AUC on the same eval split every epoch (the report's
    Training section).
    """
    threshold = [
        # Gate on the whole eval set only; slices are reported, not gated.
        tfma.PerSliceMetricThreshold(
            slicing_specs=[tfma.SlicingSpec()], threshold=gate_threshold(dataset)
        )
    ]

    table = TASK_METRICS[dataset.task]

    # The gate metric's class carries the threshold; a Keras metric computed by TFMA is
    # named after the spec's metric, TFMA's own keeps its name.
    named = {"config": json.dumps({"name": dataset.evaluation.metric})} if table.keras_gate else {}
    gate = tfma.MetricConfig(class_name=table.gate_class, per_slice_thresholds=threshold, **named)
    metrics = [gate, *(tfma.MetricConfig(class_name=c) for c in table.also)]
    if not table.per_class:
        return metrics, []
    per_class = tfma.MetricsSpec(
        metrics=[tfma.MetricConfig(class_name=c) for c in table.per_class],
        binarize=tfma.BinarizationOptions(
            class_ids={"values": list(range(dataset.label.num_classes))}
        ),
    )
    return metrics, [per_class]


def build_eval_config(dataset: DatasetSpec) -> tfma.EvalConfig:
    """TFMA config: the task's metrics, slices, and the spec's gate on the whole eval set."""
    metrics, extra_specs = task_metrics(dataset)
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name=SERVING_SIGNATURE,
                prediction_key=output_name(dataset.label),
                label_key=LABEL_KEY,
                # The label is computed by Transform; replay that on raw examples.
                preprocessing_function_names=[TRANSFORM_SIGNATURE],
                model_type=tfma.TF_GENERIC,
            )
        ],
        slicing_specs=[tfma.SlicingSpec()]
        + [tfma.SlicingSpec(feature_keys=[key]) for key in dataset.slices],
        metrics_specs=[
            tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name="ExampleCount"), *metrics]),
            *extra_specs,
        ],
    )


def fork_steps(dag: DagSteps) -> list[BaseComponent]:
    """The fork's own steps (pipeline/config.py `extra_steps`), each with an id of its own."""
    added = list(extra_steps(dag))
    seen = set(dag.ids)
    for step in added:
        if not isinstance(step, BaseComponent):
            raise ValueError(f"pipeline/config.py extra_steps: {step!r} is not a TFX component")
        if step.id in seen:
            raise ValueError(
                f"pipeline/config.py extra_steps: step id {step.id!r} is taken; give it "
                "another with .with_id(...)"
            )
        seen.add(step.id)
    return added


def create_pipeline(
    *,
    dataset: DatasetSpec,
    pipeline_root: str,
    data_root: str | RuntimeParameter,
    schema_path: str,
    serving_model_dir: str,
    train_steps: int | RuntimeParameter,
    eval_steps: int,
    trainer_config: TrainerConfig,
    enable_cache: bool,
    beam_pipeline_args: Sequence[str] = (),
    metadata_connection_config: metadata_store_pb2.ConnectionConfig | None = None,
    beam_pipeline_args_by_step: Mapping[str, Sequence[str]] | None = None,
    materialize_transform: bool = True,
    runner_steps: RunnerSteps | None = None,
    rolled_out_record: str | None = None,
) -> Pipeline:
    """Builds the DAG. Pure: reads no data and no environment; it only hashes the
    project's own source for the cache key (see pipeline/fingerprint.py).

    `dataset` (the dataset spec) names the pipeline, and sets the label, the
    features' encodings, the model's head, metrics, slices and thresholds. It
    reaches Transform and Trainer through their `custom_config`, so it is part
    of their cache keys and compiled into a Kubeflow spec.

    `data_root` and `train_steps` may be RuntimeParameters (Kubeflow), set per
    run. TFX cannot put a parameter inside the TrainArgs proto, so a
    `train_steps` parameter must be a str parameter holding TrainArgs JSON,
    `{"num_steps": N}` (see kubeflow/run_parameters.py).

    `beam_pipeline_args_by_step` adds Beam arguments to single Beam steps
    (`DAG_STEPS.beam_ids`, pipeline/steps.py), after the pipeline-wide `beam_pipeline_args`:
    one step on Dataflow, say, while the others run in their own pod.

    `materialize_transform=False`: Transform writes its graph but no
    transformed copy of the data, and the Trainer reads ExampleGen's examples
    through that graph (pipeline/transform_output.py says when that pays).

    `runner_steps` is the runner's hook (pipeline/runner_steps.py): steps
    before ExampleGen, the Trainer component, and steps after the DAG. None
    adds nothing, as the local runner wants; the Kubeflow compile passes
    `kubeflow.pipeline_steps.KubeflowSteps`.

    `rolled_out_record`: where a serving layer records the version that takes
    traffic (the KServe rollout's `rolled_out.json`, on Kubeflow with `serving:`).
    The baseline, the drift gate and the Pusher's "already served" take the served
    model from it (components/serving/served_version.py); None: the newest
    complete version under `serving_model_dir` is served, TF Serving's rule.
    """
    runner_steps = runner_steps or RunnerSteps()
    per_step_beam_args = DAG_STEPS.beam_args_by_step(beam_pipeline_args_by_step)
    first = runner_steps.before_example_gen(data_root=data_root, dataset=dataset)
    steps = list(first.steps)
    example_gen = ExampleGen(
        input_base=data_root,
        input_pattern=dataset.input.pattern,
        spans=dataset.input.spans,
        input_format=dataset.input.format,
        ignore=dataset.ignore,
        input_snapshot=first.input_snapshot,
    ).with_id(EXAMPLE_GEN)

    # StatisticsGen and Transform read the Parquet copy, which spares them the
    # inflate and decode of every tf.Example; the Trainer, the Evaluator and the
    # split keep the tf.Examples (docs/scale.md, "Statistics and analysis read Parquet").
    statistics_gen = StatisticsGen(examples=example_gen.outputs[PARQUET_EXAMPLES_KEY]).with_id(
        STATISTICS_GEN
    )

    schema_importer = ImportSchemaGen(schema_file=schema_path).with_id(SCHEMA_IMPORTER)

    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"],
        schema=schema_importer.outputs["schema"],
    ).with_id(EXAMPLE_VALIDATOR)

    data_gate = DataValidationGate(
        anomalies=example_validator.outputs["anomalies"],
        statistics=statistics_gen.outputs["statistics"],
    ).with_id(DATA_GATE)

    drift_gate = DataDriftGate(
        statistics=statistics_gen.outputs["statistics"],
        schema=schema_importer.outputs["schema"],
        serving_model_dir=serving_model_dir,
        thresholds=json.dumps(dataset.drift.to_dict(), sort_keys=True),
        rolled_out_record=rolled_out_record or "",
    ).with_id(DRIFT_GATE)

    # Its transformed_examples stay tf.Examples (components/transform/executor.py).
    transform = Transform(
        examples=example_gen.outputs[PARQUET_EXAMPLES_KEY],
        schema=schema_importer.outputs["schema"],
        preprocessing_fn=function_path(preprocessing_fn),
        # The module path holds no trace of the code; this fingerprint makes
        # TFX's cache key change when preprocessing (or what it imports) does.
        custom_config=dataset.to_custom_config() | code_fingerprint_config(preprocessing_fn),
        # Pre/post-transform statistics double Transform's Beam work; StatisticsGen
        # and the gate already cover the raw data.
        disable_statistics=True,
        # The analyzer cache is only read back when a later run passes it in as
        # `analyzer_cache` (incremental analysis over rolling spans); nothing
        # here does, and writing it cost a fifth of Transform's time.
        disable_analyzer_cache=True,
        # Without materialization Transform only analyzes, and the Trainer runs
        # the graph over the raw examples it reads (pipeline/transform_output.py).
        materialize=materialize_transform,
        force_tf_compat_v1=FORCE_TF_COMPAT_V1,
    ).with_id(TRANSFORM)

    trainer = runner_steps.trainer(
        run_fn=function_path(run_fn),
        examples=(
            transform.outputs["transformed_examples"]
            if materialize_transform
            else example_gen.outputs["examples"]
        ),
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_importer.outputs["schema"],
        train_args=(
            train_steps
            if isinstance(train_steps, RuntimeParameter)
            else trainer_pb2.TrainArgs(num_steps=train_steps)
        ),
        eval_args=trainer_pb2.EvalArgs(num_steps=eval_steps),
        custom_config=trainer_config.to_custom_config()
        | dataset.to_custom_config()
        | code_fingerprint_config(run_fn)
        | {TRAINER_EXAMPLES_KEY: "transformed" if materialize_transform else "raw"},
    ).with_id(TRAINER)
    # The Trainer consumes nothing from the gate; this edge is what makes bad data
    # stop before training. Transform does not wait for it: its output is never
    # served, and it runs beside statistics and validation (on Kubeflow in its
    # own pod, locally in the runner's second process), which takes StatisticsGen
    # off the critical path.
    trainer.add_upstream_node(data_gate)
    trainer.add_upstream_node(drift_gate)

    # The model being served is the baseline (every served model was blessed
    # when pushed). Unlike TFX's Resolver, this runs on open-source Kubeflow.
    baseline = LatestServedModel(
        candidate_model=trainer.outputs["model"],
        serving_model_dir=serving_model_dir,
        rolled_out_record=rolled_out_record or "",
    ).with_id(BASELINE)

    evaluator = Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=baseline.outputs["baseline_model"],
        eval_config=build_eval_config(dataset),
    ).with_id(EVALUATOR)

    pusher = Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        # Written into the served version: the next runs' drift gate compares with them.
        training_statistics=statistics_gen.outputs["statistics"],
        # Its record, written with them: the next runs' Evaluator reuses the baseline's metrics.
        evaluation=evaluator.outputs["evaluation"],
        push_destination=pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=serving_model_dir)
        ),
        rolled_out_record=rolled_out_record,
    ).with_id(PUSHER)

    steps += [
        example_gen,
        statistics_gen,
        schema_importer,
        example_validator,
        data_gate,
        drift_gate,
        transform,
        trainer,
        baseline,
        evaluator,
        pusher,
    ]
    for step in steps:
        if step.id in per_step_beam_args:
            step.with_beam_pipeline_args(list(per_step_beam_args[step.id]))
    steps += fork_steps(DagSteps(pipeline_name=dataset.name, built=tuple(steps)))
    steps += runner_steps.after(DagSteps(pipeline_name=dataset.name, built=tuple(steps)))
    return Pipeline(
        pipeline_name=dataset.name,
        pipeline_root=pipeline_root,
        components=steps,
        enable_cache=enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=list(beam_pipeline_args),
    )
