"""Custom feature code: the one place a fork adds TensorFlow of its own.

Everything else the trainer does follows the dataset spec (`dataset.yaml`).
Three hooks, all running inside the Transform graph (so serving applies them
to raw requests exactly as training did); the template reads them through
trainer/fork/custom_file.py:

* **Derived labels.** A spec whose label is computed rather than read names a
  function here: `label: {derive: big_tipper, columns: [tips, fare], ...}`.
  It receives those raw columns as dense rank-1 tensors (missing values are 0
  or "") and returns the label: a class index (int64, into `label.classes`)
  or, for regression, a float.
* **Extra features.** `extra_features` returns model inputs computed from any
  raw columns: dense float32 tensors of shape [batch], fed to the model
  beside the spec's features. It returns none by default. Columns it reads must
  still be listed in the spec (as a feature, or under `ignore:`).
* **Your own preprocessing of a spec feature.** `adjust_features` receives the
  template's model inputs for the spec's features (`fare_xf`: the z-score of
  `fare`) and the raw inputs; it returns them with any replaced or dropped.
  A replacement keeps its kind's type: a float32 for numeric, an int64 below
  the spec's category count for the others (the model's embedding sizes come
  from the spec).

Editing this file re-runs Transform and everything after it (the code
fingerprint in the cache key covers it).
"""

from __future__ import annotations

from collections.abc import Mapping

import tensorflow as tf

# The embedded taxi task: a trip is a "big tip" when the tip exceeds this
# fraction of the fare.
BIG_TIP_FRACTION = 0.2


def big_tipper(columns: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """1 when `tips` exceeds BIG_TIP_FRACTION of `fare`, else 0 (int64)."""
    fare = tf.cast(columns["fare"], tf.float32)
    tips = tf.cast(columns["tips"], tf.float32)
    is_big = tf.greater(tips, fare * BIG_TIP_FRACTION)
    # A NaN fare cannot define a big tip.
    return tf.where(tf.math.is_nan(fare), tf.zeros_like(fare, tf.int64), tf.cast(is_big, tf.int64))


def extra_features(
    inputs: Mapping[str, tf.Tensor | tf.SparseTensor],
) -> dict[str, tf.Tensor]:
    """Model inputs beyond the spec's: name -> float32 tensor of shape [batch].

    `inputs` are Transform's raw inputs (use `trainer.preprocessing.fill_in_missing`
    to densify one). Names must not end in `_xf`. For example:

        miles = fill_in_missing(inputs["trip_miles"])
        seconds = fill_in_missing(inputs["trip_seconds"])
        return {"speed": tft.scale_to_z_score(miles / (tf.cast(seconds, tf.float32) + 1.0))}
    """
    del inputs  # None by default.
    return {}


def adjust_features(
    features: dict[str, tf.Tensor], inputs: Mapping[str, tf.Tensor | tf.SparseTensor]
) -> dict[str, tf.Tensor]:
    """The spec's model inputs (name_xf -> tensor) as the model gets them. For example, a
    log-scaled fare instead of its z-score:

        fare = tf.cast(fill_in_missing(inputs["fare"]), tf.float32)
        features["fare_xf"] = tft.scale_to_z_score(tf.math.log1p(tf.maximum(fare, 0.0)))
        return features
    """
    del inputs  # The template's preprocessing, unchanged, by default.
    return features
