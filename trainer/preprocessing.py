"""tf.Transform preprocessing: the one place raw columns become model inputs.

The same graph runs in the Transform component (full pass over the data) and,
through the exported serving signature, on every raw example at inference time.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft

from trainer import features


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


def big_tipper_label(tips: tf.Tensor, fare: tf.Tensor) -> tf.Tensor:
    """1 when the tip exceeds BIG_TIP_FRACTION of the fare, else 0 (int64)."""
    fare = tf.cast(fare, tf.float32)
    tips = tf.cast(tips, tf.float32)
    is_big = tf.greater(tips, fare * features.BIG_TIP_FRACTION)
    # A NaN fare cannot define a big tip.
    return tf.where(tf.math.is_nan(fare), tf.zeros_like(fare, tf.int64), tf.cast(is_big, tf.int64))


def preprocessing_fn(inputs: dict[str, tf.Tensor | tf.SparseTensor]) -> dict[str, tf.Tensor]:
    """tf.Transform callback: raw features in, model features and label out."""
    outputs: dict[str, tf.Tensor] = {}
    for key in features.DENSE_FLOAT_KEYS:
        value = tf.cast(fill_in_missing(inputs[key]), tf.float32)
        outputs[features.transformed_name(key)] = tft.scale_to_z_score(value)

    for key in features.BUCKET_KEYS:
        outputs[features.transformed_name(key)] = tft.bucketize(
            fill_in_missing(inputs[key]), features.BUCKET_COUNT
        )

    for key in features.VOCAB_KEYS:
        # The approximate vocabulary is a combiner, so tf.Transform packs it
        # with the z-score and quantile analyzers into one Beam combine; an
        # exact vocabulary adds a chain of stages of its own (167 fused stages
        # for the DAG's Transform with five exact vocabularies, 95 now). It is
        # exact while a column has fewer distinct values than its capacity.
        outputs[features.transformed_name(key)] = (
            tft.experimental.compute_and_apply_approximate_vocabulary(
                fill_in_missing(inputs[key]),
                top_k=features.VOCAB_SIZE,
                num_oov_buckets=features.OOV_BUCKETS,
                vocab_filename=key,
            )
        )

    for key in features.HASH_KEYS:
        # Ids are categories, not magnitudes; hashing needs no analysis pass.
        value = tf.strings.as_string(fill_in_missing(inputs[key]))
        outputs[features.transformed_name(key)] = tf.strings.to_hash_bucket_fast(
            value, features.HASH_BUCKETS
        )

    for feature in features.CATEGORICAL_FEATURES:
        value = tf.cast(fill_in_missing(inputs[feature.name]), tf.int64)
        # Out-of-range ids are clipped instead of crashing the embedding lookup.
        outputs[features.transformed_name(feature.name)] = tf.clip_by_value(
            value, 0, feature.num_values - 1
        )

    outputs[features.LABEL_KEY] = big_tipper_label(
        fill_in_missing(inputs[features.LABEL_SOURCE_KEY]),
        fill_in_missing(inputs[features.FARE_KEY]),
    )
    return outputs
