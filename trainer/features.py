"""Feature definitions for the Chicago taxi "big tipper" task.

Everything that names a column lives here, so swapping the dataset means editing
this file and `schemas/schema.pbtxt`, not hunting through the model code.
"""

from __future__ import annotations

from dataclasses import dataclass

# Raw columns that feed the label. `tips` is in the raw data but never reaches
# the model: at serving time it does not exist yet.
LABEL_SOURCE_KEY = "tips"
FARE_KEY = "fare"
# A trip is a "big tip" when the tip exceeds this fraction of the fare.
BIG_TIP_FRACTION = 0.2

# Transformed (model-side) label name; the Evaluator reads it too.
LABEL_KEY = "big_tipper"


@dataclass(frozen=True)
class CategoricalFeature:
    """An integer category with a known closed range [0, num_values)."""

    name: str
    num_values: int


# Numeric columns: z-scored after filling missing values.
DENSE_FLOAT_KEYS: tuple[str, ...] = ("trip_miles", "fare", "trip_seconds")

# Coordinates: bucketized into quantiles, then embedded.
BUCKET_KEYS: tuple[str, ...] = (
    "pickup_latitude",
    "pickup_longitude",
    "dropoff_latitude",
    "dropoff_longitude",
)
BUCKET_COUNT = 10

# String columns whose value set is learned from the data. Each vocabulary is
# an analyzer, i.e. extra Beam stages in Transform: keep this list to columns
# that need one (see README, "Why Transform is fast").
VOCAB_KEYS: tuple[str, ...] = ("payment_type", "company")
VOCAB_SIZE = 1000
OOV_BUCKETS = 10

# Open-ended integer ids (230 census tracts in the sample, thousands in the
# city): hashed into buckets, which needs no pass over the data.
HASH_KEYS: tuple[str, ...] = ("dropoff_census_tract",)
HASH_BUCKETS = 1024

# Integer categories with a closed range (the schema's int_domain); missing
# values become 0. The model embeds them directly, with no vocabulary pass.
CATEGORICAL_FEATURES: tuple[CategoricalFeature, ...] = (
    CategoricalFeature("trip_start_hour", 24),
    CategoricalFeature("trip_start_day", 8),  # 1..7
    CategoricalFeature("trip_start_month", 13),  # 1..12
    CategoricalFeature("pickup_community_area", 78),  # 1..77
    CategoricalFeature("dropoff_community_area", 78),  # 1..77
)

# Raw columns present in the data that the model deliberately ignores:
# pickup_census_tract is missing in all but one row, and the raw timestamp is
# already represented by hour/day/month.
UNUSED_KEYS: tuple[str, ...] = ("pickup_census_tract", "trip_start_timestamp")


def transformed_name(key: str) -> str:
    """Name of the Transform output computed from raw column `key`."""
    return f"{key}_xf"


def raw_feature_keys() -> tuple[str, ...]:
    """Every raw column the preprocessing reads, label sources included."""
    keys = (
        *DENSE_FLOAT_KEYS,
        *BUCKET_KEYS,
        *VOCAB_KEYS,
        *HASH_KEYS,
        *(f.name for f in CATEGORICAL_FEATURES),
        LABEL_SOURCE_KEY,
    )
    return tuple(dict.fromkeys(keys))


def model_input_sizes() -> dict[str, int | None]:
    """Transformed model inputs and their category counts (None for dense floats).

    The model builder and the preprocessing both derive from this, so a feature
    added in one place cannot silently be missing from the other.
    """
    sizes: dict[str, int | None] = {transformed_name(k): None for k in DENSE_FLOAT_KEYS}
    sizes.update({transformed_name(k): BUCKET_COUNT for k in BUCKET_KEYS})
    sizes.update({transformed_name(k): VOCAB_SIZE + OOV_BUCKETS for k in VOCAB_KEYS})
    sizes.update({transformed_name(k): HASH_BUCKETS for k in HASH_KEYS})
    sizes.update({transformed_name(f.name): f.num_values for f in CATEGORICAL_FEATURES})
    return sizes


def random_model_inputs(num_examples: int, seed: int = 0):
    """Random (inputs, labels) shaped like Transform's output, for smoke tests and benchmarks.

    Values are in range for every input (ids below their category counts), so
    the model runs on them; they carry no signal.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    inputs = {}
    for name, size in model_input_sizes().items():
        if size is None:
            inputs[name] = rng.normal(size=num_examples).astype("float32")
        else:
            inputs[name] = rng.integers(0, size, size=num_examples).astype("int64")
    labels = rng.integers(0, 2, size=(num_examples, 1)).astype("float32")
    return inputs, labels
