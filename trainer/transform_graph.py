"""Transform's graph, applied to raw features: in the Trainer's input and in serving."""

from __future__ import annotations

from collections.abc import Mapping

import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform.saved import saved_transform_io_v2


class TransformGraph(tf.Module):
    """The Transform graph as a plain trackable, applied to raw feature tensors.

    `TFTransformOutput.transform_features_layer()` wraps the same loader in a
    legacy `tf_keras.Model`, and saving one of those runs tf_keras' SavedModel
    serialization: it autograph-converts and traces the layer's call functions,
    which took most of the export time and left Keras 2
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
        # What raw examples are parsed with before the graph applies.
        self.raw_feature_spec = tf_transform_output.raw_feature_spec()

    def __call__(self, raw_features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return self._loader.apply_transform_model(raw_features)
