"""preprocessing_fn through real tf.Transform on a handful of rows, checked by hand."""

from __future__ import annotations

import math

import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from contract.dataset.names import LABEL_KEY, transformed_name
from tests.conftest import analyze_and_transform, golden_path, load_schema, update_goldens
from tests.raw_examples import serialize_rows
from trainer.custom import big_tipper
from trainer.preprocessing import class_index, fill_in_missing
from trainer.transform_graph import TransformGraph

pytestmark = pytest.mark.slow


def _row(fare, tips, payment, company, hour, lat, area, tract="", miles="1.0") -> dict[str, str]:
    """A CSV row as strings; "" is an empty cell."""
    return {
        "fare": fare,
        "tips": tips,
        "trip_miles": miles,
        "trip_seconds": "60",
        "payment_type": payment,
        "company": company,
        "trip_start_hour": hour,
        "trip_start_day": "3",
        "trip_start_month": "6",
        "pickup_latitude": lat,
        "pickup_longitude": "-87.6",
        "dropoff_latitude": "41.9",
        "dropoff_longitude": "-87.6",
        "pickup_community_area": area,
        "dropoff_community_area": "",
        "dropoff_census_tract": tract,
        "pickup_census_tract": "",
        "trip_start_timestamp": "1400000000",
    }


ROWS = [
    _row("10", "3", "Cash", "Flash Cab", "0", "41.80", "8", "17031081500", miles="1.0"),
    _row("20", "1", "Credit Card", "", "5", "41.85", "8", "17031320100", miles="2.0"),
    _row("30", "10", "Cash", "Flash Cab", "23", "41.90", "32", "17031081500", miles="3.0"),
    _row("40", "0", "Cash", "Yellow", "30", "", "8", miles=""),
]


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    """ROWS analyzed by real tf.Transform, then transformed by the written graph."""
    tf_transform_output, outputs = analyze_and_transform(
        ROWS, load_schema(), tmp_path_factory.mktemp("tft")
    )
    rows = [
        {key: value[i].numpy().item() for key, value in outputs.items()} for i in range(len(ROWS))
    ]
    return rows, tf_transform_output.transformed_metadata, tf_transform_output


def test_dense_floats_are_z_scored(transformed):
    rows, _, _ = transformed
    # fare = 10, 20, 30, 40: mean 25, population std sqrt(125).
    std = math.sqrt(125.0)
    expected = [(v - 25.0) / std for v in (10.0, 20.0, 30.0, 40.0)]
    got = [r[transformed_name("fare")] for r in rows]
    assert got == pytest.approx(expected, rel=1e-5)


def test_a_missing_number_becomes_the_mean(transformed):
    rows, _, _ = transformed
    # trip_miles = 1, 2, 3 and one empty cell: mean 2 and std over the present values only.
    std = math.sqrt(2.0 / 3.0)
    got = [r[transformed_name("trip_miles")] for r in rows]
    assert got == pytest.approx([-1.0 / std, 0.0, 1.0 / std, 0.0], rel=1e-5)


def test_label_is_tip_above_twenty_percent_of_fare(transformed):
    rows, _, _ = transformed
    # 3 > 2, 1 <= 4, 10 > 6, 0 <= 8
    assert [r[LABEL_KEY] for r in rows] == [1, 0, 1, 0]


def test_vocabularies_are_ordered_by_frequency(transformed, taxi_spec):
    rows, _, tf_transform_output = transformed
    assert tf_transform_output.vocabulary_by_name("payment_type") == [b"Cash", b"Credit Card"]
    assert [r[transformed_name("payment_type")] for r in rows] == [0, 1, 0, 0]
    # A missing company becomes '', which tf.Transform keeps out of vocabularies:
    # it lands in an out-of-vocabulary bucket, after the 2 known entries.
    assert tf_transform_output.vocabulary_by_name("company") == [b"Flash Cab", b"Yellow"]
    company = [r[transformed_name("company")] for r in rows]
    assert company[0] == company[2] == 0 and company[3] == 1
    assert 2 <= company[1] < 2 + taxi_spec.features["company"].oov_buckets


def test_community_areas_are_closed_range_ids_with_missing_as_zero(transformed):
    rows, _, _ = transformed
    assert [r[transformed_name("pickup_community_area")] for r in rows] == [8, 8, 32, 8]
    assert [r[transformed_name("dropoff_community_area")] for r in rows] == [0, 0, 0, 0]


def test_census_tracts_are_hashed_consistently_into_range(transformed, taxi_spec):
    rows, _, _ = transformed
    tracts = [r[transformed_name("dropoff_census_tract")] for r in rows]
    assert all(0 <= t < taxi_spec.features["dropoff_census_tract"].buckets for t in tracts)
    assert tracts[0] == tracts[2]  # same tract, same bucket
    assert len(set(tracts)) == 3  # two tracts and "missing", here without collision


def test_unseen_value_maps_to_an_oov_bucket(transformed, taxi_spec):
    _, _, tf_transform_output = transformed
    row = {"fare": "15.0", "payment_type": "Bitcoin", "company": "New Co", "trip_start_hour": "1"}
    serialized = serialize_rows([row], load_schema())
    raw = tf.io.parse_example(serialized, tf_transform_output.raw_feature_spec())
    out = TransformGraph(tf_transform_output)(raw)
    payment = int(out[transformed_name("payment_type")][0])
    # Two known payment types, so OOV ids are 2 .. 2 + oov_buckets - 1.
    assert 2 <= payment < 2 + taxi_spec.features["payment_type"].oov_buckets


def test_bucketize_is_monotonic_and_missing_gets_its_own_bucket(transformed, taxi_spec):
    rows, _, _ = transformed
    buckets = [r[transformed_name("pickup_latitude")] for r in rows]
    count = taxi_spec.features["pickup_latitude"].buckets
    # 41.80 < 41.85 < 41.90: bucket ids follow the same order; the missing
    # latitude gets the extra bucket after the quantile buckets.
    assert buckets[0] < buckets[1] < buckets[2] < count, buckets
    assert buckets[3] == count


def test_calendar_ids_are_clipped_to_their_range(transformed):
    rows, _, _ = transformed
    assert [r[transformed_name("trip_start_hour")] for r in rows] == [0, 5, 23, 23]


def test_transformed_schema_matches_golden(transformed):
    _, transformed_metadata, _ = transformed
    actual = transformed_metadata.schema
    path = golden_path("transformed_schema.pbtxt")
    if update_goldens():
        path.write_text(text_format.MessageToString(actual))
    expected = text_format.Parse(path.read_text(), schema_pb2.Schema())
    assert actual == expected, text_format.MessageToString(actual)


def test_fill_in_missing_and_label_helpers_on_plain_tensors():
    sparse = tf.SparseTensor(indices=[[0, 0], [2, 0]], values=[1.5, 2.5], dense_shape=[3, 1])
    assert fill_in_missing(sparse).numpy().tolist() == [1.5, 0.0, 2.5]
    label = big_tipper(
        {"tips": tf.constant([1.0, 5.0, 1.0]), "fare": tf.constant([10.0, 10.0, float("nan")])}
    )
    assert label.dtype == tf.int64
    assert label.numpy().tolist() == [0, 1, 0]


@pytest.mark.parametrize(
    ("values", "classes"),
    [
        (tf.constant(["b", "c", "a", "zz", ""]), ("a", "b", "c")),
        (tf.constant([2, 3, 1, 9, 0], tf.int64), ("1", "2", "3")),
        (tf.constant([0.5, 1.5, -1.0, 7.0, 0.0]), ("-1.0", "0.5", "1.5")),
    ],
)
def test_class_index_follows_the_spec_order_and_marks_unknown_labels(values, classes):
    # Unknown values (the schema's label domain stops them first) are -1, never class 0.
    assert class_index(values, classes).numpy().tolist() == [1, 2, 0, -1, -1]


def test_raw_rows_with_a_fraction_in_an_int_column_are_refused_not_truncated():
    """The test helper encodes as ExampleGen does: 1.7 in an int column is no 1."""
    with pytest.raises(ValueError, match=r"column 'trip_seconds': '1\.7' is not int"):
        serialize_rows([{"trip_seconds": "1.7"}], load_schema())
    (example,) = serialize_rows([{"trip_seconds": "17"}], load_schema())
    parsed = tf.train.Example.FromString(example)
    assert list(parsed.features.feature["trip_seconds"].int64_list.value) == [17]
