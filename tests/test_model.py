"""The Keras model builder: a head per task, shapes, dtypes, a training step, mixed precision."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from contract.dataset.names import LABEL_KEY
from contract.dataset.parse import parse_spec
from schemas import load_schema_dir
from trainer.config import ModelConfig
from trainer.custom_loop import per_example_loss, per_example_score
from trainer.model import build_model, loss_and_metrics
from trainer.model_support import compile_model, model_input_sizes, random_model_inputs

TAXI = load_schema_dir().spec
SMALL_FEATURES = {
    "size": {"kind": "numeric"},
    "color": {"kind": "categorical", "max_values": 5, "oov_buckets": 1},
    "level": {"kind": "id", "num_values": 4},
}
LABELS = {
    "binary": {"task": "binary", "column": "y", "classes": ["no", "yes"]},
    "multiclass": {"task": "multiclass", "column": "y", "classes": ["a", "b", "c", "d"]},
    "regression": {"task": "regression", "column": "y", "mean": 100.0, "std": 25.0},
}


def spec_for(task: str):
    naive = 30.0 if task == "regression" else 0.5
    return parse_spec(
        {
            "name": "small",
            "label": LABELS[task],
            "features": SMALL_FEATURES,
            "evaluation": {"naive_value": naive},
        }
    )


def taxi_model(config: ModelConfig | None = None, **kwargs) -> keras.Model:
    return build_model(config or ModelConfig(), TAXI.label, TAXI.model_input_sizes(), **kwargs)


def taxi_batch(batch_size: int = 8, seed: int = 0):
    return random_model_inputs(TAXI.model_input_sizes(), TAXI.label, batch_size, seed)


def test_binary_output_is_one_float32_probability_per_example():
    inputs, _ = taxi_batch(5)
    out = taxi_model()(inputs, training=False)
    assert out.shape == (5, 1)
    assert out.dtype == tf.float32
    assert np.all((out.numpy() >= 0) & (out.numpy() <= 1))


def test_multiclass_output_is_a_distribution_over_the_spec_classes():
    spec = spec_for("multiclass")
    model = build_model(ModelConfig(), spec.label, spec.model_input_sizes())
    inputs, _ = random_model_inputs(spec.model_input_sizes(), spec.label, 6)
    out = model(inputs).numpy()
    assert out.shape == (6, 4)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)


def test_regression_output_starts_on_the_label_scale():
    spec = spec_for("regression")
    model = build_model(ModelConfig(), spec.label, spec.model_input_sizes())
    inputs, _ = random_model_inputs(spec.model_input_sizes(), spec.label, 256)
    out = model(inputs).numpy()
    assert out.shape == (256, 1)
    # Standard units rescaled by the spec's mean and std: untrained outputs sit near the mean.
    assert abs(float(out.mean()) - 100.0) < 25.0


def test_model_takes_every_transformed_feature_by_name():
    model = taxi_model()
    assert sorted(t.name for t in model.inputs) == sorted(TAXI.model_input_sizes())


def test_extra_custom_features_become_dense_inputs():
    transformed = {name: None for name in TAXI.model_input_sizes()} | {
        LABEL_KEY: None,
        "speed": None,
    }
    sizes = model_input_sizes(TAXI.model_input_sizes(), transformed)
    assert sizes["speed"] is None and LABEL_KEY not in sizes
    assert sizes.items() >= TAXI.model_input_sizes().items()
    # A spec input the fork's adjust_features dropped (trainer/custom.py) is no input.
    dropped = next(iter(TAXI.model_input_sizes()))
    without = model_input_sizes(TAXI.model_input_sizes(), {**transformed, dropped: None})
    del transformed[dropped]
    assert dropped not in model_input_sizes(TAXI.model_input_sizes(), transformed)
    assert dropped in without


def test_extra_keys_in_the_feature_dict_are_ignored():
    model = taxi_model()
    inputs, _ = taxi_batch(3)
    with_label = {**inputs, LABEL_KEY: np.zeros(3, "int64")}
    np.testing.assert_allclose(model(with_label), model(inputs), rtol=1e-6)


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_one_training_step_per_task_changes_the_weights_and_stays_finite(task):
    keras.utils.set_random_seed(1)
    spec = spec_for(task)
    config = ModelConfig(hidden_units=(16,))
    model = build_model(config, spec.label, spec.model_input_sizes())
    compile_model(model, config, spec.label, precision="float32", jit_compile=False)
    inputs, labels = random_model_inputs(spec.model_input_sizes(), spec.label, 16)
    before = [w.numpy().copy() for w in model.trainable_weights]
    logs = model.train_on_batch(inputs, labels, return_dict=True)
    after = [w.numpy() for w in model.trainable_weights]
    assert np.isfinite(logs["loss"])
    assert spec.evaluation.metric in logs
    assert any(not np.array_equal(b, a) for b, a in zip(before, after, strict=True))


@pytest.mark.parametrize(
    ("task", "labels", "outputs", "scores"),
    [
        ("binary", [1, 0, 1], [[0.9], [0.2], [0.3]], [1.0, 1.0, 0.0]),
        ("multiclass", [2, 0, 1], [[0.1, 0.2, 0.7], [0.5, 0.4, 0.1], [0.6, 0.3, 0.1]], [1, 1, 0]),
        ("regression", [1.0, 2.0, 4.0], [[1.5], [2.0], [1.0]], [0.25, 0.0, 9.0]),
    ],
)
def test_custom_loop_loss_and_score_are_the_forks_per_example(task, labels, outputs, scores):
    """The multi-worker loop's loss and gate metric come from `loss_and_metrics`: per
    example, they average to what Keras' own reduced loss and metric say."""
    spec = spec_for(task)
    loss, metrics = loss_and_metrics(spec.label)
    labels, outputs = tf.constant(labels), tf.constant(outputs, tf.float32)
    per_example = per_example_loss(loss)(labels, outputs)
    assert per_example.shape == (3,)
    np.testing.assert_allclose(np.mean(per_example), loss(labels, outputs), rtol=1e-6)
    score, finish = per_example_score(metrics[0])
    values = np.reshape(score(labels, outputs), [-1])
    np.testing.assert_allclose(values, scores, rtol=1e-6)
    metrics[0].update_state(labels, outputs)
    np.testing.assert_allclose(finish(np.mean(values)), metrics[0].result(), rtol=1e-6)


def test_a_forks_loss_is_what_the_custom_loop_optimises():
    """Label smoothing, say: the loop's per-example loss is the smoothed one."""
    smoothed = keras.losses.BinaryCrossentropy(label_smoothing=0.4)
    labels, outputs = tf.constant([1, 0]), tf.constant([[0.99], [0.01]])
    per_example = per_example_loss(smoothed)(labels, outputs)
    plain = per_example_loss(keras.losses.BinaryCrossentropy())(labels, outputs)
    assert float(np.mean(per_example)) > 5 * float(np.mean(plain))
    np.testing.assert_allclose(np.mean(per_example), smoothed(labels, outputs), rtol=1e-6)


def test_a_gate_metric_without_a_per_example_form_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"the gate metric 'auc' \(AUC\) has no per-example"):
        per_example_score(keras.metrics.AUC(name="auc"))


def test_mixed_bfloat16_keeps_float32_variables_and_output():
    model = taxi_model(ModelConfig(hidden_units=(16,)), dtype_policy="mixed_bfloat16")
    hidden = model.get_layer("hidden_0")
    assert hidden.compute_dtype == "bfloat16"
    assert hidden.variable_dtype == "float32"
    assert all(w.dtype == "float32" for w in model.weights)
    inputs, _ = taxi_batch(4)
    assert model(inputs).dtype == tf.float32


def test_mixed_float16_compiles_with_loss_scaling():
    config = ModelConfig(hidden_units=(8,))
    model = taxi_model(config, dtype_policy="mixed_float16")
    compile_model(model, config, TAXI.label, precision="mixed_float16", jit_compile=False)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)


@pytest.mark.parametrize(
    "bad", [{"hidden_units": (0,)}, {"embedding_dim": 0}, {"learning_rate": 0}]
)
def test_bad_model_config_is_rejected(bad):
    with pytest.raises(ValueError):
        ModelConfig(**bad)
