"""tf.Transform preprocessing: the one place raw columns become model inputs.

The same graph runs in the Transform component (full pass over the data) and,
through the exported serving signature, on every raw example at inference time.
What it computes follows the dataset spec (`contract/dataset/spec.py`), which TFX
hands over in the Transform's `custom_config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft

from contract.dataset.error import DatasetSpecError
from contract.dataset.names import LABEL_KEY, transformed_name
from contract.dataset.parse import spec_from_custom_config
from contract.dataset.sections import LabelSpec
from contract.dataset.spec import DatasetSpec
from trainer.fork import custom_file

# tf.Transform traces `preprocessing_fn` as one TF1-style graph instead of as
# tf.functions, which made the Transform step markedly faster on the taxi sample
# (docs/where-the-time-goes.md): TF2 tracing re-traces the function for every
# analysis phase and again to export. Everything here is plain TensorFlow ops,
# which behave the same in both modes, and the exported graph serves the same
# from a TF2 SavedModel (trainer/export.py). Set this to False if custom code
# needs TF2-only constructs (tf.function, Keras layers, tf.py_function).
FORCE_TF_COMPAT_V1 = True


def fill_in_missing(x: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    """Densifies a rank-2 feature of at most one value per row into rank 1.

    Missing values become 0 (numbers) or '' (strings). CSV cells that are empty
    reach Transform as absent values of a VarLen feature, i.e. a SparseTensor.
    """
    if not isinstance(x, tf.sparse.SparseTensor):
        return tf.squeeze(x, axis=1) if x.shape.rank == 2 else x
    default_value = "" if x.dtype == tf.string else 0
    dense = tf.sparse.to_dense(
        tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]), default_value
    )
    return tf.squeeze(dense, axis=1)


def _as_rank2_sparse(x: tf.Tensor | tf.SparseTensor) -> tf.SparseTensor:
    """[batch, <=1] values as a SparseTensor of dense shape [batch, 1]."""
    if isinstance(x, tf.sparse.SparseTensor):
        return tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1])
    if x.shape.rank == 1:
        x = tf.expand_dims(x, 1)
    return tf.sparse.from_dense(x) if x.dtype == tf.string else _dense_to_sparse_all(x)


def _dense_to_sparse_all(x: tf.Tensor) -> tf.SparseTensor:
    # tf.sparse.from_dense drops zeros, which are real values here.
    indices = tf.where(tf.ones_like(x, tf.bool))
    return tf.SparseTensor(indices, tf.reshape(x, [-1]), tf.shape(x, out_type=tf.int64))


def parse_numbers(
    x: tf.Tensor | tf.SparseTensor, missing_markers: tuple[str, ...]
) -> tf.SparseTensor:
    """Numbers written as strings ("NA" for missing) as a float32 SparseTensor [batch, 1].

    An empty cell or a marker is missing; every other value must parse as a number.
    """
    values = fill_in_missing(x)
    missing = tf.equal(values, "")
    for marker in missing_markers:
        missing = tf.logical_or(missing, tf.equal(values, marker))
    present = tf.where(tf.logical_not(missing))  # [n, 1] row indices
    numbers = tf.strings.to_number(tf.gather_nd(values, present), tf.float32)
    indices = tf.concat([present, tf.zeros_like(present)], axis=1)
    return tf.SparseTensor(indices, numbers, tf.stack([tf.shape(values, out_type=tf.int64)[0], 1]))


def _numbers(x: tf.Tensor | tf.SparseTensor, missing_markers: tuple[str, ...]):
    return parse_numbers(x, missing_markers) if x.dtype == tf.string else x


def scale_with_mean_for_missing(x: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    """z-score over the present values; a missing value becomes the mean, i.e. 0."""
    scaled = tft.scale_to_z_score(tf.cast(_as_rank2_sparse(x), tf.float32))
    return tf.squeeze(tf.sparse.to_dense(scaled, 0.0), axis=1)


def bucketize_with_missing_bucket(x: tf.Tensor | tf.SparseTensor, buckets: int) -> tf.Tensor:
    """Quantile buckets 0..buckets-1 over the present values; a missing value gets `buckets`."""
    bucketized = tft.bucketize(_as_rank2_sparse(x), buckets)
    return tf.squeeze(tf.sparse.to_dense(bucketized, buckets), axis=1)


def as_strings(x: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    """A categorical column densified as strings (ints as their decimal text; missing: "")."""
    value = fill_in_missing(x)
    return value if value.dtype == tf.string else tf.strings.as_string(value)


def class_index(values: tf.Tensor, classes: tuple[str, ...]) -> tf.Tensor:
    """Index of each value in `classes` (int64); -1 for a value that is not a class.

    The schema's label domain stops unknown string labels before Transform;
    comparing with every class keeps this free of lookup tables and dtypes.
    """
    if values.dtype == tf.string:
        keys = tf.constant(list(classes), tf.string)
    elif values.dtype.is_integer:
        keys = tf.constant([int(c) for c in classes], values.dtype)
    else:
        keys = tf.constant([float(c) for c in classes], values.dtype)
    matches = tf.equal(tf.expand_dims(values, 1), tf.expand_dims(keys, 0))
    index = tf.argmax(tf.cast(matches, tf.int32), axis=1)
    return tf.where(tf.reduce_any(matches, axis=1), index, tf.constant(-1, tf.int64))


def label_tensor(label: LabelSpec, inputs: Mapping[str, tf.Tensor | tf.SparseTensor]) -> tf.Tensor:
    """The label as the model trains on it: class index (int64) or value (float32)."""
    if label.derive:
        derive_label = custom_file.derived_label(label.derive)
        # A derived classification label is already a class index.
        value = derive_label({c: fill_in_missing(inputs[c]) for c in label.columns})
    else:
        value = fill_in_missing(inputs[label.source_columns[0]])
    if label.task == "regression":
        return tf.cast(value, tf.float32)
    return tf.cast(value, tf.int64) if label.derive else class_index(value, label.classes)


def preprocessing_fn(
    inputs: dict[str, tf.Tensor | tf.SparseTensor], custom_config: Mapping[str, Any]
) -> dict[str, tf.Tensor]:
    """tf.Transform callback: raw features in, model features and label out.

    TFX binds `custom_config` (the Transform's, holding the dataset spec)
    because this function's signature asks for it.
    """
    spec = spec_from_custom_config(custom_config)
    return transform_features(spec, inputs)


def transform_features(
    spec: DatasetSpec, inputs: Mapping[str, tf.Tensor | tf.SparseTensor]
) -> dict[str, tf.Tensor]:
    """The preprocessing for `spec`; `preprocessing_fn` without TFX's calling convention."""
    outputs: dict[str, tf.Tensor] = {}
    for name, feature in spec.features.items():
        key = transformed_name(name)
        raw = inputs[name]
        if feature.kind == "numeric":
            outputs[key] = scale_with_mean_for_missing(_numbers(raw, feature.missing_markers))
        elif feature.kind == "bucketized":
            outputs[key] = bucketize_with_missing_bucket(
                _numbers(raw, feature.missing_markers), feature.setting("buckets")
            )
        elif feature.kind == "categorical":
            # The approximate vocabulary is a combiner, so tf.Transform packs
            # it with the z-score and quantile analyzers into one Beam combine;
            # an exact vocabulary adds a chain of stages of its own (167 fused
            # stages for the taxi DAG's Transform with five exact vocabularies,
            # 95 now). It is exact while a column has fewer distinct values
            # than its capacity.
            outputs[key] = tft.experimental.compute_and_apply_approximate_vocabulary(
                as_strings(raw),
                top_k=feature.setting("max_values"),
                num_oov_buckets=feature.setting("oov_buckets"),
                vocab_filename=key.removesuffix("_xf"),
            )
        elif feature.kind == "hashed":
            # Ids are categories, not magnitudes; hashing needs no analysis pass.
            outputs[key] = tf.strings.to_hash_bucket_fast(
                as_strings(raw), feature.setting("buckets")
            )
        else:  # id
            value = tf.cast(fill_in_missing(raw), tf.int64)
            # Out-of-range ids are clipped instead of crashing the embedding lookup.
            outputs[key] = tf.clip_by_value(value, 0, feature.setting("num_values") - 1)

    # The fork's own preprocessing of the spec's features (trainer/custom.py).
    outputs = custom_file.adjust_features(outputs, inputs)
    for name, value in custom_file.extra_features(inputs).items():
        if name.endswith("_xf") or name in outputs:
            raise DatasetSpecError(
                f"trainer/custom.py extra_features: {name!r} clashes with the spec's "
                "features (names ending in _xf are theirs)"
            )
        outputs[name] = tf.cast(value, tf.float32)

    outputs[LABEL_KEY] = label_tensor(spec.label, inputs)
    return outputs
