"""TFX Trainer entry point: a thin `run_fn` over the trainer's pure pieces."""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import keras
import tensorflow as tf
import tensorflow_transform as tft
from tfx.components.trainer.fn_args_utils import FnArgs

from trainer import features
from trainer.config import TrainerConfig
from trainer.custom_loop import fit_with_custom_loop
from trainer.data import distributed_dataset
from trainer.export import export_serving_model
from trainer.model import build_model, compile_model
from trainer.runtime import resolve_runtime

logger = logging.getLogger(__name__)


def is_chief(tf_config: str | None) -> bool:
    """True unless TF_CONFIG makes this process a non-chief worker."""
    if not tf_config:
        return True
    task = json.loads(tf_config).get("task", {})
    cluster = json.loads(tf_config).get("cluster", {})
    task_type, task_id = task.get("type"), task.get("index", 0)
    if task_type == "chief":
        return True
    # Without an explicit chief, worker 0 plays that role.
    return task_type in (None, "worker") and task_id == 0 and "chief" not in cluster


def train_and_export(
    *,
    config: TrainerConfig,
    train_files: list[str],
    eval_files: list[str],
    transform_output: str,
    serving_model_dir: str,
    model_run_dir: str,
    train_steps: int,
    eval_steps: int,
) -> dict[str, float]:
    """Trains on Transform output and exports the serving model; returns final metrics."""
    runtime = resolve_runtime(config.runtime)  # First: strategies configure TF at start-up.
    keras.utils.set_random_seed(config.seed)
    tf_transform_output = tft.TFTransformOutput(transform_output)
    feature_spec = tf_transform_output.transformed_feature_spec()

    resolved = dataclasses.asdict(config) | {"resolved_runtime": runtime.summary()}
    tf.io.gfile.makedirs(model_run_dir)
    with tf.io.gfile.GFile(os.path.join(model_run_dir, "trainer_config.json"), "w") as f:
        f.write(json.dumps(resolved, indent=2, sort_keys=True, default=str))

    common = dict(
        feature_spec=feature_spec,
        label_key=features.LABEL_KEY,
        shuffle_buffer_size=config.runtime.shuffle_buffer_size,
        seed=config.seed,
    )
    train_data = distributed_dataset(
        runtime.strategy,
        runtime.global_batch_size,
        file_patterns=train_files,
        training=True,
        cache=config.runtime.cache_dataset,
        deterministic=config.runtime.deterministic_input,
        **common,
    )
    eval_data = distributed_dataset(
        runtime.strategy,
        runtime.global_batch_size,
        file_patterns=eval_files,
        training=False,
        **common,
    )

    with runtime.strategy.scope():
        model = build_model(config.model, dtype_policy=runtime.policy)
        compile_model(
            model,
            config.model,
            precision=runtime.plan.precision,
            jit_compile=runtime.plan.jit_compile,
        )

    # Several short epochs give TensorBoard a curve; TFX counts steps.
    epochs = max(1, min(10, train_steps // 50))
    chief = is_chief(os.environ.get("TF_CONFIG"))
    if isinstance(runtime.strategy, tf.distribute.MultiWorkerMirroredStrategy):
        metrics = fit_with_custom_loop(
            model,
            strategy=runtime.strategy,
            train_data=train_data,
            eval_data=eval_data,
            global_batch_size=runtime.global_batch_size,
            train_steps=train_steps,
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
            steps_per_epoch=max(1, train_steps // epochs),
            validation_data=eval_data,
            validation_steps=eval_steps,
            callbacks=callbacks,
            verbose=2,
        )
        metrics = {k: float(v[-1]) for k, v in history.history.items()}
    logger.info("trainer final metrics: %s", metrics)

    if chief:
        export_serving_model(model, tf_transform_output, serving_model_dir, config=resolved)
    else:
        # Non-chief workers must still take part in the collective save, but
        # into a scratch directory: only the chief's copy is the model.
        task = json.loads(os.environ["TF_CONFIG"]).get("task", {})
        scratch = os.path.join(
            model_run_dir, f"worker_export_{task.get('type', 'worker')}_{task.get('index', 0)}"
        )
        export_serving_model(model, tf_transform_output, scratch)
        tf.io.gfile.rmtree(scratch)
    return metrics


def run_fn(fn_args: FnArgs) -> None:
    """Called by the TFX Trainer. Reads `fn_args`, trains and exports."""
    train_and_export(
        config=TrainerConfig.from_custom_config(fn_args.custom_config),
        train_files=fn_args.train_files,
        eval_files=fn_args.eval_files,
        transform_output=fn_args.transform_output,
        serving_model_dir=fn_args.serving_model_dir,
        model_run_dir=fn_args.model_run_dir,
        train_steps=fn_args.train_steps,
        eval_steps=fn_args.eval_steps,
    )
