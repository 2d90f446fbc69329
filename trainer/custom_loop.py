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

import keras
import tensorflow as tf

from trainer.dataset import GATE_METRICS, LabelSpec

logger = logging.getLogger(__name__)


def per_example_loss_and_score(
    label: LabelSpec, labels: tf.Tensor, outputs: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """(loss, score) per example for a hand-written training loop.

    The score's mean is the gate metric: accuracy for classification; for
    regression it is the squared error, whose mean's square root is the RMSE.
    """
    if label.task == "binary":
        labels = tf.cast(tf.reshape(labels, [-1, 1]), outputs.dtype)
        loss = keras.losses.binary_crossentropy(labels, outputs)
        correct = tf.equal(tf.cast(outputs > 0.5, labels.dtype), labels)
        return loss, tf.cast(tf.reshape(correct, [-1]), tf.float32)
    if label.task == "multiclass":
        labels = tf.cast(tf.reshape(labels, [-1]), tf.int64)
        loss = keras.losses.sparse_categorical_crossentropy(labels, outputs)
        correct = tf.equal(tf.argmax(outputs, axis=-1), labels)
        return loss, tf.cast(correct, tf.float32)
    labels = tf.cast(tf.reshape(labels, [-1]), outputs.dtype)
    squared_error = tf.square(tf.reshape(outputs, [-1]) - labels)
    return squared_error, squared_error


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

    metric = GATE_METRICS[label.task][0]
    # Regression's score is the squared error: its mean's square root is the RMSE.
    finish = (lambda mean: mean**0.5) if label.task == "regression" else (lambda mean: mean)

    def replica_loss(features, labels, training: bool):
        outputs = model(features, training=training)
        per_example, score = per_example_loss_and_score(label, labels, outputs)
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
