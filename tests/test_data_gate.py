"""The data gate's messages and decisions, on hand-built anomaly protos."""

import pytest
from tensorflow_metadata.proto.v0 import anomalies_pb2

from components.data_checks import DataValidationError, check_data, describe_anomalies


def _anomalies(**by_feature: tuple[str, str]) -> anomalies_pb2.Anomalies:
    anomalies = anomalies_pb2.Anomalies()
    for feature, (short, description) in by_feature.items():
        info = anomalies.anomaly_info[feature]
        reason = info.reason.add()
        reason.short_description = short
        reason.description = description
    return anomalies


def test_clean_data_passes():
    clean = {"train": anomalies_pb2.Anomalies(), "eval": anomalies_pb2.Anomalies()}
    assert describe_anomalies(clean, None) == []
    check_data(clean, {"train": 10, "eval": 5})
    with pytest.raises(DataValidationError, match="eval"):  # the same, with an empty split
        check_data(clean, {"train": 10, "eval": 0})


def test_anomalies_name_feature_reason_and_splits():
    dropped = ("Column dropped", "The feature was present in fewer examples than expected.")
    lines = describe_anomalies(
        {"train": _anomalies(fare=dropped), "eval": _anomalies(fare=dropped)}
    )
    assert lines == [
        "feature 'fare': Column dropped: The feature was present in fewer examples than "
        "expected. (split eval, train)"
    ]


def test_gate_raises_with_every_problem():
    anomalies = {
        "train": _anomalies(tips=("Out-of-range values", "Unexpectedly low value: -1.")),
        "eval": anomalies_pb2.Anomalies(),
    }
    with pytest.raises(DataValidationError) as err:
        check_data(anomalies, {"train": 10, "eval": 0})
    message = str(err.value)
    assert "feature 'tips': Out-of-range values" in message
    assert "split 'eval' has no examples" in message
    assert "2 problem(s)" in message


def test_dataset_level_anomaly_is_reported():
    anomalies = anomalies_pb2.Anomalies()
    anomalies.dataset_anomaly_info.reason.add(description="Low number of examples")
    with pytest.raises(DataValidationError, match="whole dataset: Low number of examples"):
        check_data({"train": anomalies}, {"train": 3})


def test_nan_in_a_float_feature_is_counted_from_the_statistics():
    """TFDV's anomaly says a float feature has NaN; the gate says how many."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import statistics_pb2

    from components.data_checks import nan_counts

    statistics = text_format.Parse(
        """
        datasets {
          num_examples: 400
          features {
            path { step: "trip_miles" }
            num_stats {
              common_stats { num_non_missing: 400 }
              histograms { num_nan: 40 type: STANDARD }
              histograms { num_nan: 40 type: QUANTILES }
            }
          }
          features {
            path { step: "fare" }
            num_stats { common_stats { num_non_missing: 400 } histograms { type: STANDARD } }
          }
        }
        """,
        statistics_pb2.DatasetFeatureStatisticsList(),
    )
    assert nan_counts(statistics) == {"trip_miles": (40, 400)}
    anomalies = _anomalies(trip_miles=("Invalid values", "Float feature has NaN values."))
    anomalies.anomaly_info["trip_miles"].reason[
        0
    ].type = anomalies_pb2.AnomalyInfo.FLOAT_TYPE_HAS_NAN
    with pytest.raises(DataValidationError) as err:
        check_data({"train": anomalies}, {"train": 400}, {"train": nan_counts(statistics)})
    assert (
        "feature 'trip_miles': Invalid values: Float feature has NaN values. (40 NaN of 400 "
        "values) (split train)"
    ) in str(err.value)
