"""SavedModel export: signatures that take raw serialized tf.Examples.

`serving_default` parses raw features (no label), applies the Transform graph,
runs the model and returns float32 probabilities. `transform_features` applies
the Transform graph to labelled examples; the Evaluator uses it to compute the
label the same way Transform did.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf
import tensorflow_transform as tft

from trainer import features

SERVING_SIGNATURE = "serving_default"
TRANSFORM_SIGNATURE = "transform_features"
PROBABILITY_OUTPUT = "probabilities"
CONFIG_ASSET = "assets.extra/trainer_config.json"

_EXAMPLES_SPEC = tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")


class ServingModule(tf.Module):
    """Owns the model and the Transform layer so the SavedModel tracks both."""

    def __init__(self, model: keras.Model, tf_transform_output: tft.TFTransformOutput):
        super().__init__(name="serving")
        self.model = model
        self.transform_layer = tf_transform_output.transform_features_layer()
        raw_spec = tf_transform_output.raw_feature_spec()
        self._labelled_spec = raw_spec
        # The label's source column does not exist yet when a request arrives.
        self._serving_spec = {k: v for k, v in raw_spec.items() if k != features.LABEL_SOURCE_KEY}
        self._model_inputs = tuple(features.model_input_sizes())

    @tf.function(input_signature=[_EXAMPLES_SPEC], autograph=False)
    def serve(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        raw = tf.io.parse_example(examples, self._serving_spec)
        transformed = self.transform_layer(raw)
        model_inputs = {k: transformed[k] for k in self._model_inputs}
        probabilities = self.model(model_inputs, training=False)
        return {PROBABILITY_OUTPUT: tf.cast(probabilities, tf.float32)}

    @tf.function(input_signature=[_EXAMPLES_SPEC], autograph=False)
    def transform_features(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        raw = tf.io.parse_example(examples, self._labelled_spec)
        return self.transform_layer(raw)


def export_serving_model(
    model: keras.Model,
    tf_transform_output: tft.TFTransformOutput,
    export_dir: str,
    *,
    config: Mapping[str, Any] | None = None,
) -> None:
    """Writes the SavedModel (and the resolved training config beside it)."""
    module = ServingModule(model, tf_transform_output)
    signatures = {
        SERVING_SIGNATURE: module.serve.get_concrete_function(),
        TRANSFORM_SIGNATURE: module.transform_features.get_concrete_function(),
    }
    tf.saved_model.save(module, export_dir, signatures=signatures)
    if config is not None:
        # assets.extra travels with the model and is ignored by TF Serving.
        path = os.path.join(export_dir, CONFIG_ASSET)
        tf.io.gfile.makedirs(os.path.dirname(path))
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(json.dumps(config, indent=2, sort_keys=True))
