"""The Keras model builder: shapes, dtypes, one real training step, mixed precision."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from trainer import features
from trainer.config import ModelConfig
from trainer.model import build_model, compile_model


def tiny_batch(batch_size: int = 8, seed: int = 0):
    return features.random_model_inputs(batch_size, seed)


def test_output_is_one_float32_probability_per_example():
    model = build_model(ModelConfig())
    inputs, _ = tiny_batch(5)
    out = model(inputs, training=False)
    assert out.shape == (5, 1)
    assert out.dtype == tf.float32
    assert np.all((out.numpy() >= 0) & (out.numpy() <= 1))


def test_model_takes_every_transformed_feature_by_name():
    model = build_model(ModelConfig())
    assert sorted(t.name for t in model.inputs) == sorted(features.model_input_sizes())


def test_extra_keys_in_the_feature_dict_are_ignored():
    model = build_model(ModelConfig())
    inputs, _ = tiny_batch(3)
    with_label = {**inputs, features.LABEL_KEY: np.zeros(3, "int64")}
    np.testing.assert_allclose(model(with_label), model(inputs), rtol=1e-6)


def test_one_training_step_changes_the_weights_and_lowers_nothing_to_nan():
    keras.utils.set_random_seed(1)
    config = ModelConfig(hidden_units=(16,))
    model = build_model(config)
    compile_model(model, config, precision="float32", jit_compile=False)
    inputs, labels = tiny_batch(16)
    before = [w.numpy().copy() for w in model.trainable_weights]
    logs = model.train_on_batch(inputs, labels, return_dict=True)
    after = [w.numpy() for w in model.trainable_weights]
    assert np.isfinite(logs["loss"])
    assert any(not np.array_equal(b, a) for b, a in zip(before, after, strict=True))


def test_mixed_bfloat16_keeps_float32_variables_and_output():
    model = build_model(ModelConfig(hidden_units=(16,)), dtype_policy="mixed_bfloat16")
    hidden = model.get_layer("hidden_0")
    assert hidden.compute_dtype == "bfloat16"
    assert hidden.variable_dtype == "float32"
    assert all(w.dtype == "float32" for w in model.weights)
    inputs, _ = tiny_batch(4)
    assert model(inputs).dtype == tf.float32


def test_mixed_float16_compiles_with_loss_scaling():
    config = ModelConfig(hidden_units=(8,))
    model = build_model(config, dtype_policy="mixed_float16")
    compile_model(model, config, precision="mixed_float16", jit_compile=False)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)


@pytest.mark.parametrize(
    "bad", [{"hidden_units": (0,)}, {"embedding_dim": 0}, {"learning_rate": 0}]
)
def test_bad_model_config_is_rejected(bad):
    with pytest.raises(ValueError):
        ModelConfig(**bad)
