"""SavedModel export: signatures that take raw serialized tf.Examples.

`serving_default` parses raw features (no label), applies the Transform graph,
runs the model and returns float32 `probabilities` (one per class; binary:
one, of the positive class) or, for regression, `prediction`. `transform_features` applies
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
from tensorflow_transform.saved import saved_transform_io_v2

from trainer.dataset import DatasetSpec
from trainer.model import output_name

SERVING_SIGNATURE = "serving_default"
TRANSFORM_SIGNATURE = "transform_features"
CONFIG_ASSET = "assets.extra/trainer_config.json"
# The dataset spec travels with the model: class names in probability order.
SPEC_ASSET = "assets.extra/dataset_spec.json"

_EXAMPLES_SPEC = tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")


class TransformGraph(tf.Module):
    """The Transform graph as a plain trackable, applied to raw feature tensors.

    `TFTransformOutput.transform_features_layer()` wraps the same loader in a
    legacy `tf_keras.Model`, and saving one of those runs tf_keras' SavedModel
    serialization: it autograph-converts and traces the layer's call functions,
    which took most of the export time (about 6 s of 7 here) and left Keras 2
    metadata in a Keras 3 model. The loader is what that layer calls; tracking
    its attributes, as the layer does, keeps the graph's tables and assets in
    the SavedModel.
    """

    def __init__(self, tf_transform_output: tft.TFTransformOutput):
        super().__init__(name="transform_graph")
        loader = saved_transform_io_v2.SavedModelLoader(
            tf_transform_output.transform_savedmodel_dir
        )
        self._loader = loader
        self._tracked = loader.__dict__

    def __call__(self, raw_features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return self._loader.apply_transform_model(raw_features)


class ServingModule(tf.Module):
    """Owns the model and the Transform graph so the SavedModel tracks both."""

    def __init__(
        self,
        model: keras.Model,
        tf_transform_output: tft.TFTransformOutput,
        spec: DatasetSpec,
    ):
        super().__init__(name="serving")
        self.model = model
        self.transform_graph = TransformGraph(tf_transform_output)
        raw_spec = tf_transform_output.raw_feature_spec()
        self._labelled_spec = raw_spec
        # The label's source columns do not exist yet when a request arrives.
        excluded = set(spec.serving_excluded_columns())
        self._serving_spec = {k: v for k, v in raw_spec.items() if k not in excluded}
        self._model_inputs = tuple(t.name for t in model.inputs)
        self._output_name = output_name(spec.label)

    @tf.function(input_signature=[_EXAMPLES_SPEC], autograph=False)
    def serve(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        raw = tf.io.parse_example(examples, self._serving_spec)
        transformed = self.transform_graph(raw)
        model_inputs = {k: transformed[k] for k in self._model_inputs}
        outputs = self.model(model_inputs, training=False)
        return {self._output_name: tf.cast(outputs, tf.float32)}

    @tf.function(input_signature=[_EXAMPLES_SPEC], autograph=False)
    def transform_features(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        raw = tf.io.parse_example(examples, self._labelled_spec)
        return self.transform_graph(raw)


def export_serving_model(
    model: keras.Model,
    tf_transform_output: tft.TFTransformOutput,
    export_dir: str,
    spec: DatasetSpec,
    *,
    config: Mapping[str, Any] | None = None,
) -> None:
    """Writes the SavedModel, and beside it the dataset spec and the resolved training config."""
    module = ServingModule(model, tf_transform_output, spec)
    signatures = {
        SERVING_SIGNATURE: module.serve.get_concrete_function(),
        TRANSFORM_SIGNATURE: module.transform_features.get_concrete_function(),
    }
    tf.saved_model.save(module, export_dir, signatures=signatures)
    # assets.extra travels with the model and is ignored by TF Serving.
    assets = {SPEC_ASSET: spec.to_dict()}
    if config is not None:
        assets[CONFIG_ASSET] = config
    for relative, values in assets.items():
        path = os.path.join(export_dir, relative)
        tf.io.gfile.makedirs(os.path.dirname(path))
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(json.dumps(values, indent=2, sort_keys=True, default=str))
