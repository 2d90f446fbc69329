"""SavedModel export: the serving signatures and what travels with the model.

`serving_default` parses raw serialized tf.Examples (no label), applies the
Transform graph, runs the model and returns float32 `probabilities` (one per
class; binary: one, of the positive class) or, for regression, `prediction`.
`serving_json` returns the same from one named tensor per feature, what a REST
client of TF Serving or KServe sends (its contract: trainer/json_signature.py).
`transform_features` applies the Transform graph to labelled examples; the
Evaluator uses it to compute the label the same way Transform did.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from contract.dataset.spec import SPEC_ASSET, DatasetSpec
from trainer.json_signature import CONTRACT_ASSET, JSON_SIGNATURE, JsonInput, json_inputs
from trainer.model_support import output_name
from trainer.transform_graph import TransformGraph

SERVING_SIGNATURE = "serving_default"
TRANSFORM_SIGNATURE = "transform_features"
CONFIG_ASSET = "assets.extra/trainer_config.json"

_EXAMPLES_SPEC = tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")
_JSON_DTYPES = {tf.float32: "float", tf.int64: "int", tf.string: "string"}
_TF_DTYPES = {v: k for k, v in _JSON_DTYPES.items()}


class ServingModule(tf.Module):
    """Owns the model's variables and the Transform graph so the SavedModel tracks both."""

    def __init__(
        self,
        model: keras.Model,
        transform_graph: TransformGraph,
        spec: DatasetSpec,
    ):
        super().__init__(name="serving")
        # The model's variables are tracked, not the model: saving a tracked Keras
        # model also traces and saves its default signature, which nothing calls.
        self.model_variables = list(model.variables)
        self._call_model = model.__call__
        self.transform_graph = transform_graph
        raw_spec = transform_graph.raw_feature_spec
        self._labelled_spec = raw_spec
        # The label's source columns do not exist yet when a request arrives.
        excluded = set(spec.serving_excluded_columns())
        self._serving_spec = {k: v for k, v in raw_spec.items() if k not in excluded}
        self._model_inputs = tuple(t.name for t in model.inputs)
        self._output_name = output_name(spec.label)
        # serving_default and serving_json both call this one function, so the
        # SavedModel holds the Transform graph and the model once, not once per
        # signature: a smaller model, saved and loaded sooner.
        self.predict_raw = tf.function(
            self._predict,
            input_signature=[
                {k: _parsed_spec(k, feature) for k, feature in self._serving_spec.items()}
            ],
            autograph=False,
        )
        self.json_inputs = json_inputs(
            spec, {k: _JSON_DTYPES.get(v.dtype, str(v.dtype)) for k, v in raw_spec.items()}
        )
        json_spec = {
            i.name: tf.TensorSpec(shape=[None], dtype=_TF_DTYPES[i.dtype], name=i.name)
            for i in self.json_inputs
        }
        self.serve_json = tf.function(
            self._serve_json, input_signature=[json_spec], autograph=False
        )

    def _predict(self, raw: Mapping[str, tf.Tensor | tf.SparseTensor]) -> dict[str, tf.Tensor]:
        transformed = self.transform_graph(raw)
        model_inputs = {k: transformed[k] for k in self._model_inputs}
        outputs = self._call_model(model_inputs, training=False)
        return {self._output_name: tf.cast(outputs, tf.float32)}

    @tf.function(input_signature=[_EXAMPLES_SPEC], autograph=False)
    def serve(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        return self.predict_raw(tf.io.parse_example(examples, self._serving_spec))

    def _serve_json(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        by_column = {i.column: i for i in self.json_inputs}
        batch = tf.shape(features[self.json_inputs[0].name], out_type=tf.int64)[0]
        raw = {
            column: (
                _as_parsed(features[by_column[column].name], by_column[column], feature)
                if column in by_column
                else _absent(batch, feature)
            )
            for column, feature in self._serving_spec.items()
        }
        return self.predict_raw(raw)

    @tf.function(input_signature=[_EXAMPLES_SPEC], autograph=False)
    def transform_features(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        raw = tf.io.parse_example(examples, self._labelled_spec)
        return self.transform_graph(raw)


def _parsed_spec(column: str, feature: tf.io.VarLenFeature | tf.io.FixedLenFeature) -> tf.TypeSpec:
    """What `tf.io.parse_example` gives for `feature` in a batch."""
    if isinstance(feature, tf.io.VarLenFeature):
        return tf.SparseTensorSpec([None, None], feature.dtype)
    if isinstance(feature, tf.io.FixedLenFeature):
        return tf.TensorSpec([None, *feature.shape], feature.dtype)
    raise ValueError(
        f"{column}: a {type(feature).__name__} in Transform's raw feature spec; "
        "the serving signatures take fixed-length and variable-length features"
    )


def _present(values: tf.Tensor, json_input: JsonInput) -> tf.Tensor:
    """Which rows hold a value rather than the input's missing marker."""
    if json_input.dtype == "float":
        return tf.logical_not(tf.math.is_nan(values))
    if json_input.dtype == "string":
        return tf.not_equal(values, "")
    # An int has no marker: 0 is a value (which the graph treats as it treats missing).
    return tf.ones_like(values, tf.bool)


def _as_parsed(
    values: tf.Tensor, json_input: JsonInput, feature: tf.io.VarLenFeature | tf.io.FixedLenFeature
) -> tf.Tensor | tf.SparseTensor:
    """A [batch] input as `tf.io.parse_example` gives `feature` for the same rows."""
    present = _present(values, json_input)
    if isinstance(feature, tf.io.VarLenFeature):
        rows = tf.where(present)
        return tf.SparseTensor(
            tf.concat([rows, tf.zeros_like(rows)], axis=1),
            tf.boolean_mask(values, present),
            tf.stack([tf.shape(values, out_type=tf.int64)[0], 1]),
        )
    if feature.default_value is None:
        check = tf.debugging.assert_equal(
            tf.reduce_all(present),
            True,
            message=f"{json_input.name}: a value is required in every row (the schema says so)",
        )
        with tf.control_dependencies([check]):
            values = tf.identity(values)
    else:
        default = tf.reshape(tf.constant(feature.default_value, values.dtype), [-1])[0]
        values = tf.where(present, values, default)
    return tf.reshape(values, [-1, *feature.shape])


def _absent(
    batch: tf.Tensor, feature: tf.io.VarLenFeature | tf.io.FixedLenFeature
) -> tf.Tensor | tf.SparseTensor:
    """A column no request carries (one the spec ignores), absent in every row."""
    if isinstance(feature, tf.io.VarLenFeature):
        return tf.SparseTensor(
            tf.zeros([0, 2], tf.int64), tf.zeros([0], feature.dtype), tf.stack([batch, 1])
        )
    default = tf.constant(feature.default_value, feature.dtype)
    return tf.broadcast_to(default, tf.concat([[batch], tf.shape(default, out_type=tf.int64)], 0))


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
    # The functions themselves, not concrete functions traced here: TensorFlow
    # traces again inside the save (its variable policy is part of the key), so
    # tracing first would trace every signature twice.
    signatures = {
        SERVING_SIGNATURE: module.serve,
        JSON_SIGNATURE: module.serve_json,
        TRANSFORM_SIGNATURE: module.transform_features,
    }
    tf.saved_model.save(module, export_dir, signatures=signatures)
    # assets.extra travels with the model and is ignored by TF Serving.
    assets: dict[str, Any] = {
        SPEC_ASSET: spec.to_dict(),
        CONTRACT_ASSET: [i.to_dict() for i in module.json_inputs],
    }
    if config is not None:
        assets[CONFIG_ASSET] = config
    for relative, values in assets.items():
        path = os.path.join(export_dir, relative)
        tf.io.gfile.makedirs(os.path.dirname(path))
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(json.dumps(values, indent=2, sort_keys=True, default=str))
