"""The drift gate on real statistics: what it compares with, what stops a run, what only warns."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import tensorflow_data_validation as tfdv
from tfx.types import standard_artifacts

from components.gates.drift.executor import (
    DataDriftError,
    check_against_served,
    check_drift,
    compare,
)
from components.gates.drift.result import DriftResult, FeatureComparison
from components.serving.push.component import NoDuplicatePushExecutor
from components.serving.push.executor import served_duplicate
from components.serving.rollout_record import record_rolled_out, rolled_out_record
from components.serving.serving_dir import (
    PUSH_RECORD_FILE,
    TRAINING_STATISTICS_FILE,
)
from contract.dataset.sections import DriftSpec, FeatureDrift
from tests.conftest import load_schema
from tests.span_data import SHIFTED_FEATURE, shifted, span_rows

DRIFT = DriftSpec(
    features={
        "trip_miles": FeatureDrift("jensen_shannon", 0.25, "fail"),
        "fare": FeatureDrift("jensen_shannon", 0.25, "fail"),
        "payment_type": FeatureDrift("l_infinity", 0.2, "warn"),
    }
)


def statistics(rows: list[dict[str, str]]):
    """TFDV statistics of taxi rows, typed as ExampleGen types them."""
    frame = pd.DataFrame(rows).replace("", None)
    for column in ("trip_miles", "fare"):
        frame[column] = frame[column].astype(float)
    return tfdv.generate_statistics_from_dataframe(frame[["trip_miles", "fare", "payment_type"]])


@pytest.fixture(scope="module")
def span_statistics():
    return {
        "one": statistics(span_rows(1)),
        "two": statistics(span_rows(2)),
        "shifted": statistics(shifted(span_rows(2))),
        "cash_only": statistics([{**r, "payment_type": "Cash"} for r in span_rows(2)]),
    }


def test_two_samples_of_one_distribution_are_within_the_thresholds(span_statistics):
    comparisons = compare(span_statistics["two"], span_statistics["one"], load_schema(), DRIFT)
    assert [(c.feature, c.measure) for c in comparisons] == [
        ("fare", "jensen_shannon"),
        ("payment_type", "l_infinity"),
        ("trip_miles", "jensen_shannon"),
    ]
    assert all(c.status == "ok" and 0 < c.value < c.threshold for c in comparisons), comparisons
    check_drift(DriftResult(baseline_version="1", comparisons=comparisons))


def test_a_shifted_feature_fails_the_check_naming_measure_value_and_threshold(span_statistics):
    comparisons = compare(span_statistics["shifted"], span_statistics["one"], load_schema(), DRIFT)
    by_feature = {c.feature: c for c in comparisons}
    assert by_feature[SHIFTED_FEATURE].status == "drift"
    assert by_feature["fare"].status == "ok"
    with pytest.raises(DataDriftError) as raised:
        check_drift(DriftResult(baseline_version="17", comparisons=comparisons))
    message = str(raised.value)
    value = by_feature[SHIFTED_FEATURE].value
    assert "served model 17" in message and "(1 feature(s))" in message
    assert f"feature 'trip_miles': jensen_shannon {value:.4g} > threshold 0.25" in message
    assert "fare" not in message


def test_a_feature_in_warn_mode_is_reported_and_does_not_stop_the_run(span_statistics):
    comparisons = compare(
        span_statistics["cash_only"], span_statistics["one"], load_schema(), DRIFT
    )
    result = DriftResult(baseline_version="1", comparisons=comparisons)
    (warned,) = result.warnings
    assert warned.feature == "payment_type" and warned.status == "drift (warn)"
    assert not result.failures
    check_drift(result)
    assert DriftResult.from_json(result.to_json()) == result


def test_a_feature_the_statistics_lack_is_not_measured_and_not_failed(span_statistics):
    spec = DriftSpec(features={"company": FeatureDrift("l_infinity", 0.1, "fail")})
    (comparison,) = compare(span_statistics["two"], span_statistics["one"], load_schema(), spec)
    assert comparison.value is None and comparison.status == "not measured"
    check_drift(DriftResult(comparisons=(comparison,)))


def test_the_baseline_is_the_newest_served_version_and_its_statistics(tmp_path, span_statistics):
    serving = tmp_path / "serving"
    current = span_statistics["two"]
    result = check_against_served(current, load_schema(), DRIFT, str(serving))
    assert result.baseline_version is None and "no previous statistics" in result.note
    (serving / "100").mkdir(parents=True)
    (serving / "100" / "saved_model.pb").write_bytes(b"model")
    result = check_against_served(current, load_schema(), DRIFT, str(serving))
    assert result.baseline_version == "100" and "carries no training statistics" in result.note
    stats_file = serving / "100" / TRAINING_STATISTICS_FILE
    stats_file.parent.mkdir(parents=True)
    stats_file.write_bytes(span_statistics["one"].SerializeToString())
    result = check_against_served(current, load_schema(), DRIFT, str(serving))
    assert result.baseline_version == "100" and result.baseline_statistics == str(stats_file)
    assert len(result.comparisons) == 3
    # With the KServe rollout's record, the version it names: 100, not a newer 200 whose
    # rollout never happened.
    (serving / "200").mkdir()
    (serving / "200" / "saved_model.pb").write_bytes(b"model")
    record = rolled_out_record(str(tmp_path / "kserve"))
    record_rolled_out(record, "100", str(tmp_path / "kserve" / "100"), "models/taxi")
    assert check_against_served(current, load_schema(), DRIFT, str(serving)).baseline_version == (
        "200"
    )
    result = check_against_served(current, load_schema(), DRIFT, str(serving), record)
    assert result.baseline_version == "100" and result.baseline_statistics == str(stats_file)
    # Without thresholds nothing is read or compared.
    empty = check_against_served(current, load_schema(), DriftSpec(features={}), str(serving))
    assert empty.comparisons == () and "not checked" in empty.note


def test_a_comparison_describes_itself_for_the_error_and_the_report():
    drifted = FeatureComparison("fare", "jensen_shannon", 0.25, "fail", 0.61234)
    assert drifted.describe() == "feature 'fare': jensen_shannon 0.6123 > threshold 0.25"
    assert FeatureComparison("fare", "jensen_shannon", 0.25, "fail", 0.25).status == "ok"


# --- the Pusher keeps the statistics with the model ------------------------------


def push(serving: Path, model_dir: Path, statistics_dir: Path, pushed_uri: str | None = None):
    from tfx.proto import pusher_pb2
    from tfx.utils import proto_utils

    model = standard_artifacts.Model()
    model.uri = str(model_dir)
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", 1)
    stats = standard_artifacts.ExampleStatistics()
    stats.uri = str(statistics_dir)
    stats.split_names = '["train", "eval"]'
    pushed = standard_artifacts.PushedModel()
    pushed.uri = pushed_uri or str(serving.parent / f"pushed-{len(list(serving.parent.iterdir()))}")
    destination = pusher_pb2.PushDestination(
        filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=str(serving))
    )
    NoDuplicatePushExecutor().Do(
        {"model": [model], "model_blessing": [blessing], "training_statistics": [stats]},
        {"pushed_model": [pushed]},
        {"push_destination": proto_utils.proto_to_json(destination)},
    )
    return pushed


def model_and_statistics(tmp_path: Path, span_statistics) -> tuple[Path, Path]:
    model_dir = tmp_path / "model"
    (model_dir / "Format-Serving" / "variables").mkdir(parents=True)
    (model_dir / "Format-Serving" / "saved_model.pb").write_bytes(b"graph")
    (model_dir / "Format-Serving" / "variables" / "variables.index").write_bytes(b"weights")
    statistics_dir = tmp_path / "statistics"
    (statistics_dir / "Split-train").mkdir(parents=True)
    (statistics_dir / "Split-train" / "FeatureStats.pb").write_bytes(
        span_statistics["one"].SerializeToString()
    )
    return model_dir, statistics_dir


def test_a_push_writes_the_training_statistics_into_the_version_and_is_not_repeated(
    tmp_path, span_statistics
):
    model_dir, statistics_dir = model_and_statistics(tmp_path, span_statistics)
    serving = tmp_path / "serving"
    first = push(serving, model_dir, statistics_dir)
    assert first.get_int_custom_property("pushed") == 1
    version = Path(first.get_string_custom_property("pushed_destination"))
    assert (version / TRAINING_STATISTICS_FILE).read_bytes() == (
        span_statistics["one"].SerializeToString()
    )
    assert (version / "saved_model.pb").read_bytes() == b"graph"
    # The statistics are not part of the model: the same candidate is already served.
    assert served_duplicate(os.fspath(model_dir / "Format-Serving"), str(serving)) == str(version)
    second = push(serving, model_dir, statistics_dir)
    assert second.get_int_custom_property("pushed") == 0
    assert second.get_string_custom_property("already_served") == str(version)
    assert [p.name for p in serving.iterdir()] == [version.name]


def test_a_pusher_run_again_on_its_own_output_records_its_earlier_push(tmp_path, span_statistics):
    """A retried Pusher (same output URI: its pod died after the copy) does not copy again,
    and records the push its earlier attempt made; another execution sees "already served"."""
    model_dir, statistics_dir = model_and_statistics(tmp_path, span_statistics)
    serving = tmp_path / "serving"
    output_uri = str(tmp_path / "run-1" / "Pusher" / "pushed_model")
    first = push(serving, model_dir, statistics_dir, output_uri)
    version = first.get_string_custom_property("pushed_destination")
    assert json.loads((Path(version) / PUSH_RECORD_FILE).read_text()) == {
        "pushed_model": output_uri
    }
    retried = push(serving, model_dir, statistics_dir, output_uri)
    assert retried.get_int_custom_property("pushed") == 1
    assert retried.get_string_custom_property("pushed_destination") == version
    assert (Path(output_uri) / "saved_model.pb").read_bytes() == b"graph"
    assert [p.name for p in serving.iterdir()] == [Path(version).name]
    other_run = push(serving, model_dir, statistics_dir)
    assert other_run.get_int_custom_property("pushed") == 0
