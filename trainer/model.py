"""Your model (yours): the Keras 3 network, its loss and metrics, its optimizer.

The template reads `build_model`, `loss_and_metrics` and `optimizer` from this file
(trainer/fork/model_file.py) and does the rest: the inputs, the compile, the export.
The model's settings (`config`) are trainer/search_space.py's `Hyperparameters`.

The template's model: embeddings for categories, a small MLP, a float32 head per task.

binary: one sigmoid probability; multiclass: a softmax over `label.classes`;
regression: one value, predicted in standard units and rescaled to the
label's by the last layer, so the optimizer sees the same scale whatever the
label's units.
"""

from __future__ import annotations

import keras

from contract.dataset.sections import GATE_METRICS, LabelSpec
from trainer.config import ModelConfig


def build_model(
    config: ModelConfig,
    label: LabelSpec,
    input_sizes: dict[str, int | None],
    *,
    dtype_policy: keras.DTypePolicy | str = "float32",
) -> keras.Model:
    """Builds the (uncompiled) model over Transform's outputs.

    Args:
      config: layer sizes and regularization.
      label: the task; it sets the head.
      input_sizes: transformed feature name -> category count, or None for a
        dense float (`DatasetSpec.model_input_sizes()`, plus extra features).
      dtype_policy: Keras policy for the hidden layers. Under a mixed policy
        variables stay float32 and compute runs in float16/bfloat16; the output
        layer always computes in float32 so predictions (and the loss) keep
        full precision.
    """
    policy = keras.DTypePolicy(dtype_policy) if isinstance(dtype_policy, str) else dtype_policy
    inputs: list[keras.KerasTensor] = []
    encoded: list[keras.KerasTensor] = []
    dense: list[keras.KerasTensor] = []
    for name, size in sorted(input_sizes.items()):
        if size is None:
            value = keras.Input(shape=(), name=name, dtype="float32")
            dense.append(keras.layers.Reshape((1,), name=f"{name}_column")(value))
        else:
            value = keras.Input(shape=(), name=name, dtype="int64")
            encoded.append(
                keras.layers.Embedding(
                    size,
                    min(config.embedding_dim, size),
                    name=f"{name}_embedding",
                    # Embeddings stay float32 under every policy: a lookup gains
                    # nothing from 16 bits, and the gradient's scatter-add in 16
                    # bits is far slower on a GPU (docs/benchmarks.md).
                    dtype="float32",
                )(value)
            )
        inputs.append(value)
    if dense:
        encoded.append(keras.layers.Concatenate(name="dense_features", dtype=policy)(dense))
    x = (
        keras.layers.Concatenate(name="all_features", dtype=policy)(encoded)
        if len(encoded) > 1
        else encoded[0]
    )
    for i, units in enumerate(config.hidden_units):
        x = keras.layers.Dense(units, activation="relu", name=f"hidden_{i}", dtype=policy)(x)
        if config.dropout:
            x = keras.layers.Dropout(config.dropout, name=f"dropout_{i}", dtype=policy)(x)
    if label.task == "binary":
        output = keras.layers.Dense(1, activation="sigmoid", name="probability", dtype="float32")(x)
    elif label.task == "multiclass":
        output = keras.layers.Dense(
            label.num_classes, activation="softmax", name="probabilities", dtype="float32"
        )(x)
    else:
        standard = keras.layers.Dense(1, name="standard_prediction", dtype="float32")(x)
        output = keras.layers.Rescaling(
            scale=label.std, offset=label.mean, name="prediction", dtype="float32"
        )(standard)
    # A list of inputs (not a dict): Keras 3 then matches a dict of features to
    # the inputs by name at call time, whatever extra keys the dict carries.
    return keras.Model(inputs=inputs, outputs=output, name=f"{label.task}_model")


def loss_and_metrics(label: LabelSpec) -> tuple[keras.losses.Loss, list[keras.metrics.Metric]]:
    """The training loss and metrics of a task; the first metric is the one the Evaluator gates."""
    gate_metric = GATE_METRICS[label.task][0]
    if label.task == "binary":
        return keras.losses.BinaryCrossentropy(), [
            keras.metrics.BinaryAccuracy(name=gate_metric),
            keras.metrics.AUC(name="auc"),
        ]
    if label.task == "multiclass":
        return keras.losses.SparseCategoricalCrossentropy(), [
            keras.metrics.SparseCategoricalAccuracy(name=gate_metric)
        ]
    return keras.losses.MeanSquaredError(), [
        keras.metrics.RootMeanSquaredError(name=gate_metric),
        keras.metrics.MeanAbsoluteError(name="mean_absolute_error"),
    ]


def optimizer(config: ModelConfig) -> keras.optimizers.Optimizer:
    """The optimizer the Trainer compiles with (under mixed float16 the template wraps it in
    loss scaling)."""
    return keras.optimizers.Adam(learning_rate=config.learning_rate)
