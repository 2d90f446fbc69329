"""The Keras 3 model: embeddings for categories, a small MLP, a float32 head per task.

binary: one sigmoid probability; multiclass: a softmax over `label.classes`;
regression: one value, predicted in standard units and rescaled to the
label's by the last layer, so the optimizer sees the same scale whatever the
label's units.
"""

from __future__ import annotations

import keras

from trainer.config import ModelConfig
from trainer.dataset_spec import GATE_METRICS, LABEL_KEY, LabelSpec

# The serving signature's output: class probabilities, or the regression value.
PROBABILITIES_OUTPUT = "probabilities"
PREDICTION_OUTPUT = "prediction"


def output_name(label: LabelSpec) -> str:
    return PREDICTION_OUTPUT if label.task == "regression" else PROBABILITIES_OUTPUT


def model_input_sizes(
    spec_input_sizes: dict[str, int | None], transformed_feature_spec: dict
) -> dict[str, int | None]:
    """The spec's model inputs plus the extra dense features of `trainer/custom.py`.

    Extra features are the Transform outputs the spec does not describe
    (besides the label); they are dense floats by contract.
    """
    sizes = dict(spec_input_sizes)
    for name in sorted(transformed_feature_spec):
        if name != LABEL_KEY and name not in sizes:
            sizes[name] = None
    return sizes


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


def compile_model(
    model: keras.Model,
    config: ModelConfig,
    label: LabelSpec,
    *,
    precision: str,
    jit_compile: bool,
) -> None:
    """Adam + the task's loss; float16 training gets dynamic loss scaling."""
    optimizer: keras.optimizers.Optimizer = keras.optimizers.Adam(
        learning_rate=config.learning_rate
    )
    if precision == "mixed_float16":
        # float16 gradients underflow without it; bfloat16 has float32's range and needs none.
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    loss, metrics = loss_and_metrics(label)
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=jit_compile)


def random_model_inputs(
    input_sizes: dict[str, int | None], label: LabelSpec, num_examples: int, seed: int = 0
):
    """Random (inputs, labels) shaped like Transform's output, for smoke tests and benchmarks.

    Values are in range for every input (ids below their category counts) and
    labels are valid for the task, so the model trains on them; they carry no
    signal.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    inputs = {}
    for name, size in input_sizes.items():
        if size is None:
            inputs[name] = rng.normal(size=num_examples).astype("float32")
        else:
            inputs[name] = rng.integers(0, size, size=num_examples).astype("int64")
    if label.task == "regression":
        mean, std = label.mean or 0.0, label.std or 1.0
        labels = rng.normal(mean, std, size=num_examples).astype("float32")
    else:
        labels = rng.integers(0, label.num_classes, size=num_examples).astype("int64")
    return inputs, labels
