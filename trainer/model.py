"""The Keras 3 model: embeddings for categories, a small MLP, a float32 sigmoid head."""

from __future__ import annotations

import keras

from trainer import features
from trainer.config import ModelConfig


def build_model(
    config: ModelConfig,
    *,
    dtype_policy: keras.DTypePolicy | str = "float32",
    input_sizes: dict[str, int | None] | None = None,
) -> keras.Model:
    """Builds the (uncompiled) classifier over Transform's outputs.

    Args:
      config: layer sizes and regularization.
      dtype_policy: Keras policy for the hidden layers. Under a mixed policy
        variables stay float32 and compute runs in float16/bfloat16; the output
        layer always computes in float32 so probabilities (and the loss) keep
        full precision.
      input_sizes: transformed feature name -> category count, or None for a
        dense float. Defaults to `features.model_input_sizes()`.
    """
    input_sizes = input_sizes or features.model_input_sizes()
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
                    # nothing from 16 bits, and the gradient's scatter-add in
                    # 16 bits was 10x slower on an H100 (benchmarks/).
                    dtype="float32",
                )(value)
            )
        inputs.append(value)
    if dense:
        encoded.append(keras.layers.Concatenate(name="dense_features", dtype=policy)(dense))
    x = keras.layers.Concatenate(name="all_features", dtype=policy)(encoded)
    for i, units in enumerate(config.hidden_units):
        x = keras.layers.Dense(units, activation="relu", name=f"hidden_{i}", dtype=policy)(x)
        if config.dropout:
            x = keras.layers.Dropout(config.dropout, name=f"dropout_{i}", dtype=policy)(x)
    probability = keras.layers.Dense(1, activation="sigmoid", name="probability", dtype="float32")(
        x
    )
    # A list of inputs (not a dict): Keras 3 then matches a dict of features to
    # the inputs by name at call time, whatever extra keys the dict carries.
    return keras.Model(inputs=inputs, outputs=probability, name="big_tipper_classifier")


def compile_model(
    model: keras.Model, config: ModelConfig, *, precision: str, jit_compile: bool
) -> None:
    """Adam + binary cross-entropy; float16 training gets dynamic loss scaling."""
    optimizer: keras.optimizers.Optimizer = keras.optimizers.Adam(
        learning_rate=config.learning_rate
    )
    if precision == "mixed_float16":
        # float16 gradients underflow without it; bfloat16 has float32's range and needs none.
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.BinaryCrossentropy(),
        metrics=[
            keras.metrics.BinaryAccuracy(name="binary_accuracy"),
            keras.metrics.AUC(name="auc"),
        ],
        jit_compile=jit_compile,
    )
