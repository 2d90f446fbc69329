"""TFX Trainer entry point: a thin `run_fn` over the trainer's pure pieces."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
from typing import TYPE_CHECKING

import keras
import tensorflow as tf
import tensorflow_transform as tft

from contract.dataset.names import LABEL_KEY
from contract.dataset.parse import spec_from_custom_config
from contract.dataset.spec import DatasetSpec
from trainer.config import ModelConfig, TrainerConfig
from trainer.custom_loop import fit_with_custom_loop
from trainer.data import distributed_dataset
from trainer.export import export_serving_model
from trainer.fork.model_file import build_model
from trainer.fork.search_space_file import hyperparameters_class
from trainer.model_support import compile_model, model_input_sizes
from trainer.runtime import Runtime, resolve_runtime
from trainer.transform_graph import TransformGraph

if TYPE_CHECKING:
    # Only run_fn's annotation: importing it runs tfx/components/__init__.py, every
    # component's spec, which a process that trains outside the Trainer never uses.
    from tfx.components.trainer.fn_args_utils import FnArgs

logger = logging.getLogger(__name__)

# The Trainer's `custom_config` says which examples it was wired to: Transform's
# materialized output ("transformed"), or ExampleGen's ("raw"), which the input
# pipeline runs through the Transform graph (pipeline/transform_output.py).
EXAMPLES_KEY = "trainer_examples"
EXAMPLE_KINDS = ("transformed", "raw")


def examples_kind(custom_config: dict | None) -> str:
    """The kind of examples a Trainer's `custom_config` names (TFX's default: transformed)."""
    kind = (custom_config or {}).get(EXAMPLES_KEY, "transformed")
    if kind not in EXAMPLE_KINDS:
        raise ValueError(
            f"custom_config[{EXAMPLES_KEY!r}] must be one of {list(EXAMPLE_KINDS)}, got {kind!r}"
        )
    return kind


def worker_task(tf_config: str | None) -> tuple[str | None, int, bool]:
    """(task type, task index, cluster has an explicit chief) from a TF_CONFIG value."""
    if not tf_config:
        return None, 0, False
    parsed = json.loads(tf_config)
    task = parsed.get("task", {})
    return task.get("type"), int(task.get("index", 0)), "chief" in parsed.get("cluster", {})


def is_chief(tf_config: str | None) -> bool:
    """True unless TF_CONFIG makes this process a non-chief worker."""
    task_type, index, has_chief = worker_task(tf_config)
    if task_type == "chief":
        return True
    # Without an explicit chief, worker 0 plays that role.
    return task_type in (None, "worker") and index == 0 and not has_chief


def epoch_plan(train_steps: int, *, min_steps: int = 50, max_epochs: int = 10) -> tuple[int, int]:
    """(epochs, steps per epoch) running exactly `train_steps` steps.

    TFX counts steps; several epochs of at least `min_steps` give TensorBoard
    and the logs a learning curve. The epoch count divides `train_steps`.
    """
    for epochs in range(min(max_epochs, train_steps // min_steps), 1, -1):
        if train_steps % epochs == 0:
            return epochs, train_steps // epochs
    return 1, train_steps


@dataclasses.dataclass(frozen=True)
class InputFiles:
    """What training reads: Transform's examples (or with `raw_examples` ExampleGen's, which
    each input pipeline runs through the graph in `transform_output`) and Transform's graph."""

    train: list[str]
    eval: list[str]
    transform_output: str
    raw_examples: bool = False


@dataclasses.dataclass(frozen=True)
class TrainingInputs:
    """What training reads: the Transform graph, both input pipelines, the model's input sizes."""

    transform_graph: TransformGraph
    train: tf.distribute.DistributedDataset
    eval: tf.distribute.DistributedDataset
    input_sizes: dict[str, int | None]


def training_inputs(
    config: TrainerConfig, runtime: Runtime, spec: DatasetSpec, files: InputFiles
) -> TrainingInputs:
    """The train and eval input pipelines, as the Trainer reads them; the tuner reads the
    same (trainer/tuning.py). Seeded first: tf.data's shuffle seeds derive from the global
    seed at the time a pipeline is built, so the same seed gives the same batches."""
    keras.utils.set_random_seed(config.seed)
    transform_output, raw_examples = files.transform_output, files.raw_examples
    train_files, eval_files = files.train, files.eval
    tf_transform_output = tft.TFTransformOutput(transform_output)
    feature_spec = tf_transform_output.transformed_feature_spec()
    transform_graph = TransformGraph(tf_transform_output)
    common = dict(
        feature_spec=transform_graph.raw_feature_spec if raw_examples else feature_spec,
        transform=transform_graph if raw_examples else None,
        label_key=LABEL_KEY,
        shuffle_buffer_size=config.runtime.shuffle_buffer_size,
        seed=config.seed,
    )
    return TrainingInputs(
        transform_graph=transform_graph,
        train=distributed_dataset(
            runtime.strategy,
            runtime.global_batch_size,
            file_patterns=train_files,
            training=True,
            cache=config.runtime.cache_dataset,
            deterministic=config.runtime.deterministic_input,
            **common,
        ),
        eval=distributed_dataset(
            runtime.strategy,
            runtime.global_batch_size,
            file_patterns=eval_files,
            training=False,
            **common,
        ),
        input_sizes=model_input_sizes(spec.model_input_sizes(), feature_spec),
    )


def compiled_model(
    model_config: ModelConfig,
    spec: DatasetSpec,
    runtime: Runtime,
    input_sizes: dict[str, int | None],
) -> keras.Model:
    """The model built and compiled in the strategy's scope: the Trainer's and each trial's."""
    with runtime.strategy.scope():
        model = build_model(model_config, spec.label, input_sizes, dtype_policy=runtime.policy)
        compile_model(
            model,
            model_config,
            spec.label,
            precision=runtime.plan.precision,
            jit_compile=runtime.plan.jit_compile,
        )
    return model


def train_and_export(
    *,
    config: TrainerConfig,
    spec: DatasetSpec,
    train_files: list[str],
    eval_files: list[str],
    transform_output: str,
    serving_model_dir: str,
    model_run_dir: str,
    train_steps: int,
    eval_steps: int,
    raw_examples: bool = False,
) -> dict[str, float]:
    """Trains on Transform's output and exports the serving model; returns final metrics.

    `train_files` and `eval_files` hold Transform's transformed examples, or
    with `raw_examples` ExampleGen's, which each input pipeline runs through
    the graph in `transform_output` batch by batch (trainer/data.py).
    """
    runtime = resolve_runtime(config.runtime)  # First: strategies configure TF at start-up.
    inputs = training_inputs(
        config,
        runtime,
        spec,
        InputFiles(train_files, eval_files, transform_output, raw_examples),
    )
    transform_graph, train_data, eval_data = inputs.transform_graph, inputs.train, inputs.eval

    resolved = dataclasses.asdict(config) | {"resolved_runtime": runtime.summary()}
    chief = is_chief(os.environ.get("TF_CONFIG"))
    if chief:  # Every replica of a multi-worker job gets the same model_run_dir.
        tf.io.gfile.makedirs(model_run_dir)
        with tf.io.gfile.GFile(os.path.join(model_run_dir, "trainer_config.json"), "w") as f:
            f.write(json.dumps(resolved, indent=2, sort_keys=True, default=str))

    model = compiled_model(config.model, spec, runtime, inputs.input_sizes)

    epochs, steps_per_epoch = epoch_plan(train_steps)
    if isinstance(runtime.strategy, tf.distribute.MultiWorkerMirroredStrategy):
        metrics = fit_with_custom_loop(
            model,
            label=spec.label,
            strategy=runtime.strategy,
            train_data=train_data,
            eval_data=eval_data,
            global_batch_size=runtime.global_batch_size,
            steps_per_epoch=steps_per_epoch,
            eval_steps=eval_steps,
            epochs=epochs,
            log_dir=model_run_dir,
            is_chief=chief,
        )
    else:
        callbacks = [
            keras.callbacks.TensorBoard(
                log_dir=model_run_dir,
                update_freq="epoch",
                profile_batch=config.runtime.profile_steps or 0,
            )
        ]
        history = model.fit(
            train_data,
            epochs=epochs,
            steps_per_epoch=steps_per_epoch,
            validation_data=eval_data,
            validation_steps=eval_steps,
            callbacks=callbacks,
            verbose=2,
        )
        metrics = {k: float(v[-1]) for k, v in history.history.items()}
    logger.info("trainer final metrics: %s", metrics)

    if chief:
        export_serving_model(model, transform_graph, serving_model_dir, spec, config=resolved)
    else:
        # Non-chief workers must still take part in the collective save, but
        # into scratch space of their own: only the chief's copy is the model.
        task_type, index, _ = worker_task(os.environ.get("TF_CONFIG"))
        with tempfile.TemporaryDirectory(prefix=f"export_{task_type or 'worker'}_{index}_") as d:
            export_serving_model(model, transform_graph, os.path.join(d, "model"), spec)
    return metrics


def run_fn(fn_args: FnArgs) -> None:
    """Called by the TFX Trainer. Reads `fn_args`, trains and exports."""
    train_and_export(
        config=TrainerConfig.from_custom_config(fn_args.custom_config, hyperparameters_class()),
        spec=spec_from_custom_config(fn_args.custom_config),
        train_files=fn_args.train_files,
        eval_files=fn_args.eval_files,
        transform_output=fn_args.transform_output,
        serving_model_dir=fn_args.serving_model_dir,
        model_run_dir=fn_args.model_run_dir,
        train_steps=fn_args.train_steps,
        eval_steps=fn_args.eval_steps,
        raw_examples=examples_kind(fn_args.custom_config) == "raw",
    )
