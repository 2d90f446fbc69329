"""A plain tf.distribute training loop, used where Keras 3's `fit` cannot go.

Keras 3 (up to at least 3.12) fails in `Model.fit` under
MultiWorkerMirroredStrategy: before the first step it asks the strategy to
MEAN-reduce a whole input batch, a nested structure that the collective
all-reduce does not accept (keras-team/keras#20329, #20585). The same model,
optimizer and datasets train fine in this loop, which is what TF's own
multi-worker custom-training tutorial does.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable

import keras
import tensorflow as tf

from contract.dataset.sections import GATE_METRICS, LabelSpec
from trainer.fork.model_file import loss_and_metrics

logger = logging.getLogger(__name__)


def per_example_loss(loss: keras.losses.Loss | Callable) -> Callable:
    """The training loss of trainer/model.py's `loss_and_metrics`, one value per example.

    The loop averages it over the global batch itself
    (`tf.nn.compute_average_loss`), so it needs the loss unreduced: Keras 3
    losses take `reduction=None`, and the loss is rebuilt from its config with
    that; a plain function of (labels, outputs) is per example already.
    """
    if not isinstance(loss, keras.losses.Loss):
        return loss
    config = {**loss.get_config(), "reduction": None}
    try:
        return type(loss).from_config(config)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"trainer/model.py loss_and_metrics: multi-worker training needs the loss "
            f"{type(loss).__name__} per example, rebuilt from its config with "
            f"reduction=None, and that failed ({err}): let its __init__ take `reduction` "
            "and pass it to keras.losses.Loss"
        ) from err


def per_example_score(metric: keras.metrics.Metric) -> tuple[Callable, Callable]:
    """The gate metric (`loss_and_metrics`' first) per example, and what turns the
    examples' mean into the metric: a mean metric's own function (accuracy, AUC
    aside), or the squared error whose mean's root is the RMSE."""
    if isinstance(metric, keras.metrics.RootMeanSquaredError):

        def squared_error(labels, outputs):
            labels = tf.cast(tf.reshape(labels, [-1]), outputs.dtype)
            return tf.square(tf.reshape(outputs, [-1]) - labels)

        return squared_error, lambda mean: mean**0.5
    if isinstance(metric, keras.metrics.MeanMetricWrapper):
        # Keras' own per-example function of the metric, as its update_state calls it.
        function, kwargs = metric._fn, metric._fn_kwargs
        return (lambda labels, outputs: function(labels, outputs, **kwargs)), (lambda mean: mean)
    raise ValueError(
        f"trainer/model.py loss_and_metrics: the gate metric {metric.name!r} "
        f"({type(metric).__name__}) has no per-example form for multi-worker training: "
        "make the first metric a mean of a per-example function (keras.metrics."
        "MeanMetricWrapper) or RootMeanSquaredError"
    )


def fit_with_custom_loop(
    model: keras.Model,
    *,
    label: LabelSpec,
    strategy: tf.distribute.Strategy,
    train_data: tf.distribute.DistributedDataset,
    eval_data: tf.distribute.DistributedDataset,
    global_batch_size: int,
    steps_per_epoch: int,
    eval_steps: int,
    epochs: int,
    log_dir: str,
    is_chief: bool,
) -> dict[str, float]:
    """Trains `model` (compiled, built under `strategy.scope()`); returns final-epoch metrics."""
    optimizer = model.optimizer
    scales_loss = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

    # The fork's loss and gate metric, as `fit` trains with them under every other strategy.
    loss, compiled_metrics = loss_and_metrics(label)
    loss_of_examples = per_example_loss(loss)
    score_of_examples, finish = per_example_score(compiled_metrics[0])
    metric = GATE_METRICS[label.task][0]

    def replica_loss(features, labels, training: bool):
        outputs = model(features, training=training)
        per_example = tf.reshape(loss_of_examples(labels, outputs), [-1])
        score = tf.cast(tf.reshape(score_of_examples(labels, outputs), [-1]), tf.float32)
        return per_example, tf.reduce_sum(score)

    def train_replica_step(features, labels):
        with tf.GradientTape() as tape:
            per_example, score_sum = replica_loss(features, labels, training=True)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
            scaled = optimizer.scale_loss(loss) if scales_loss else loss
        gradients = tape.gradient(scaled, model.trainable_variables)
        # Keras' optimizer all-reduces the gradients across replicas (and unscales them).
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return tf.reduce_sum(per_example), score_sum, tf.cast(tf.size(per_example), tf.float32)

    def eval_replica_step(features, labels):
        per_example, score_sum = replica_loss(features, labels, training=False)
        return tf.reduce_sum(per_example), score_sum, tf.cast(tf.size(per_example), tf.float32)

    def make_loop(replica_step):
        @tf.function
        def run(iterator, steps):
            totals = tf.zeros([3])
            for _ in tf.range(steps):
                per_replica = strategy.run(replica_step, args=next(iterator))
                totals += tf.stack(
                    [strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for v in per_replica]
                )
            return totals

        return run

    train_loop, eval_loop = make_loop(train_replica_step), make_loop(eval_replica_step)
    # Only the chief's summaries are kept; other workers write to scratch space.
    summary_dir = log_dir if is_chief else tempfile.mkdtemp(prefix="worker_tensorboard_")
    writer = tf.summary.create_file_writer(os.path.join(summary_dir, "train"))
    train_iterator, eval_iterator = iter(train_data), iter(eval_data)
    metrics: dict[str, float] = {}
    for epoch in range(epochs):
        loss_sum, score_sum, count = train_loop(
            train_iterator, tf.constant(steps_per_epoch)
        ).numpy()
        val_loss_sum, val_score_sum, val_count = eval_loop(
            eval_iterator, tf.constant(eval_steps)
        ).numpy()
        metrics = {
            "loss": float(loss_sum / count),
            metric: float(finish(score_sum / count)),
            "val_loss": float(val_loss_sum / val_count),
            f"val_{metric}": float(finish(val_score_sum / val_count)),
        }
        with writer.as_default(step=epoch):
            for name, value in metrics.items():
                tf.summary.scalar(f"epoch_{name}", value)
        logger.info("epoch %d/%d: %s", epoch + 1, epochs, metrics)
    writer.close()
    return metrics
