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

from trainer.dataset import DatasetSpec
from trainer.model import output_name
from trainer.transform_graph import TransformGraph

SERVING_SIGNATURE = "serving_default"
TRANSFORM_SIGNATURE = "transform_features"
CONFIG_ASSET = "assets.extra/trainer_config.json"
# The dataset spec travels with the model: class names in probability order.
SPEC_ASSET = "assets.extra/dataset_spec.json"

_EXAMPLES_SPEC = tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")


class ServingModule(tf.Module):
    """Owns the model and the Transform graph so the SavedModel tracks both."""

    def __init__(
        self,
        model: keras.Model,
        transform_graph: TransformGraph,
        spec: DatasetSpec,
    ):
        super().__init__(name="serving")
        self.model = model
        self.transform_graph = transform_graph
        raw_spec = transform_graph.raw_feature_spec
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
    transform_graph: TransformGraph,
    export_dir: str,
    spec: DatasetSpec,
    *,
    config: Mapping[str, Any] | None = None,
) -> None:
    """Writes the SavedModel, and beside it the dataset spec and the resolved training config."""
    module = ServingModule(model, transform_graph, spec)
    signatures = {
        SERVING_SIGNATURE: module.serve.get_concrete_function(),
        TRANSFORM_SIGNATURE: module.transform_features.get_concrete_function(),
    }
    tf.saved_model.save(module, export_dir, signatures=signatures)
    # assets.extra travels with the model and is ignored by TF Serving.
    assets: dict[str, Any] = {SPEC_ASSET: spec.to_dict()}
    if config is not None:
        assets[CONFIG_ASSET] = config
    for relative, values in assets.items():
        path = os.path.join(export_dir, relative)
        tf.io.gfile.makedirs(os.path.dirname(path))
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(json.dumps(values, indent=2, sort_keys=True, default=str))
