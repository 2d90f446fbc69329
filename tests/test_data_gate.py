"""The data gate's messages and decisions, on hand-built anomaly protos."""

import pytest
from tensorflow_metadata.proto.v0 import anomalies_pb2

from components.gates.data_validation.executor import (
    DataValidationError,
    check_data,
    describe_anomalies,
)


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


def test_one_problem_whose_share_differs_by_split_is_said_once_with_its_count():
    """Issue 71: TFDV words a bad string value with each split's own share, so the CSV
    run said "2 problem(s)" and the same problem twice."""
    unexpected = "Unexpected string values"
    anomalies = {
        "train": _anomalies(company=(unexpected, "Examples contain values missing: X (~4%).")),
        "eval": _anomalies(company=(unexpected, "Examples contain values missing: X (~11%).")),
    }
    with pytest.raises(DataValidationError) as err:
        check_data(anomalies, {"train": 10, "eval": 5})
    message = str(err.value)
    assert "(1 problem(s))" in message
    assert message.count(unexpected) == 1 and "(split eval, train)" in message
    with pytest.raises(DataValidationError) as err:
        check_data(anomalies, {"train": 10, "eval": 5}, scoring=True)
    assert "(1 problem(s))" in str(err.value) and str(err.value).count(unexpected) == 1


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

    from components.gates.data_validation.executor import nan_counts

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


def _gate_inputs(root) -> dict:
    """The gates' input files (benchmarks.step_startup.gate_files) written under `root`."""
    from benchmarks.step_startup import gate_files

    for relative, content in gate_files().items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return {name: str(root / "run-1" / "upstream" / name) for name in ("statistics", "schema")}


@pytest.mark.slow  # imports TFX's component package (TFMA) for its readers
def test_the_ported_readers_read_what_tfx_s_read(tmp_path):
    """components/gates/data_validation/executor.py and components/artifact_views.py against
    TFX 1.16's `stats_artifact_utils.load_statistics`, `artifact_utils.get_split_uri`
    and `io_utils.SchemaReader`, on TFX's own artifacts."""
    from tfx.components.statistics_gen import stats_artifact_utils
    from tfx.types import artifact_utils, standard_artifacts
    from tfx.utils import io_utils

    from components import artifact_views
    from components.gates.data_validation import executor as data_checks

    uris = _gate_inputs(tmp_path)
    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri, statistics.split_names = uris["statistics"], '["train", "eval"]'
    schema = standard_artifacts.Schema()
    schema.uri = uris["schema"]
    for split in ("train", "eval"):
        assert artifact_views.split_uri(statistics, split) == artifact_utils.get_split_uri(
            [statistics], split
        )
        ours = data_checks.load_statistics(statistics, split)
        assert ours == stats_artifact_utils.load_statistics(statistics, split).proto()
    assert data_checks.read_schema(schema) == io_utils.SchemaReader().read(
        io_utils.get_only_uri_in_dir(schema.uri)
    )
    # The same errors: a split the artifact lacks, and a schema directory of two files.
    with pytest.raises(ValueError) as tfx_error:
        artifact_utils.get_split_uri([statistics], "test")
    with pytest.raises(ValueError, match="Split does not exist") as our_error:
        artifact_views.split_uri(statistics, "test")
    assert str(our_error.value) == str(tfx_error.value)
    (tmp_path / "run-1" / "upstream" / "schema" / "other.pbtxt").write_text("")
    with pytest.raises(RuntimeError, match="Only one file per dir is supported"):
        io_utils.get_only_uri_in_dir(schema.uri)
    with pytest.raises(RuntimeError, match="Only one file per dir is supported"):
        data_checks.read_schema(schema)


def test_a_missing_statistics_file_is_named(tmp_path):
    from components.gates.data_validation import executor as data_checks
    from kubeflow.light_step import StepArtifact

    uris = _gate_inputs(tmp_path)
    statistics = StepArtifact(uri=uris["statistics"], metadata={"split_names": '["test"]'})
    with pytest.raises(FileNotFoundError, match=r"Split-test/FeatureStats.pb does not exist"):
        data_checks.load_statistics(statistics, "test")
