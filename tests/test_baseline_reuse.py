"""The baseline's metrics come from the run that pushed it, and only when that run
evaluated this very model on these examples with this eval config.

The Evaluator tests read the shared two local runs: the first pushed its
candidate with its evaluation record; the second trained another model (more
steps, same examples), and its Evaluator reused the record for the baseline.
The two models score differently, so baseline metrics taken from the
candidate, or from anything but the served model, show. The Pusher tests push
a stand-in SavedModel directory.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import metric_types
from tfx.proto import pusher_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from components.evaluator import batched_metrics
from components.evaluator.executor import (
    EvaluationPlan,
    ServedBaselineExecutor,
    batched_arguments,
    drop_empty_baseline,
    plan_evaluation,
    with_our_extractors,
)
from components.evaluator.extractors import PRUNE_STAGE_NAME
from components.evaluator.record import (
    BASELINE_METRICS_PROPERTY,
    COMPUTED,
    NO_BASELINE,
    REUSED,
    why_not_reusable,
)
from components.serving.push.component import NoDuplicatePushExecutor
from components.serving.push.executor import served_duplicate
from components.serving.serving_dir import (
    EVALUATED_FILE,
    PUSH_RECORD_FILE,
    SERVED_EVALUATION_FILE,
    model_digest,
)
from tests.conftest import REPO_ROOT
from tests.harness import (
    assert_models_differ,
    assert_same_evaluation,
    candidate_vs_baseline_by_tfma,
    evaluator_inputs,
    latest_artifact,
    metrics_by_tfma,
    read_evaluation,
    run_evaluator,
    without_evaluation_record,
)

SPEC = REPO_ROOT / "schemas" / "chicago_taxi" / "dataset.yaml"


def _root(runs) -> Path:
    return runs.output_dir / "pipeline_root"


def _served_baseline(runs) -> Path:
    """The second run's baseline: a copy of the version the first run pushed."""
    return latest_artifact(_root(runs) / "LatestServedModel" / "baseline_model")


def _evaluations(runs) -> tuple[Path, Path]:
    """The first run's Evaluator output and the second's."""
    first, second = sorted(
        (_root(runs) / "Evaluator" / "evaluation").iterdir(), key=lambda p: int(p.name)
    )
    return first, second


def assert_baseline_is_the_first_run_s_candidate(runs, evaluation: Path) -> None:
    """`evaluation` (the second run's candidate against the served model) holds, as the
    baseline's, the metrics the first run's Evaluator computed for the model it pushed,
    and they differ from the candidate's."""
    values = candidate_vs_baseline_by_tfma(str(evaluation))
    assert_models_differ(values)
    first = metrics_by_tfma(str(_evaluations(runs)[0]))
    assert {k for k in values if k[2] == "baseline"} == {(*k, "baseline") for k in first}
    for (slice_name, name), value in first.items():
        assert values[slice_name, name, "baseline"] == pytest.approx(value), (slice_name, name)


# --- the Evaluator -------------------------------------------------------------------------


def test_the_pushed_version_carries_its_evaluation_and_the_next_run_reused_it(two_local_runs):
    record = json.loads((two_local_runs.first_version / SERVED_EVALUATION_FILE).read_text())
    assert record[BASELINE_METRICS_PROPERTY] == NO_BASELINE
    assert record["candidate_model"] == model_digest(str(two_local_runs.first_version))
    assert record["splits"] == ["eval"] and record["raw_feature_slices"] is True
    slices = [entry["slice"] for entry in record["candidate_sums"]]
    assert [] in slices and any(s[0][0] == "payment_type" for s in slices if s)
    _, second = _evaluations(two_local_runs)
    second_record = json.loads((second / EVALUATED_FILE).read_text())
    assert second_record[BASELINE_METRICS_PROPERTY] == REUSED
    # Another candidate than the served model, whose metrics were reused, not scored again.
    assert second_record["candidate_model"] != record["candidate_model"]
    assert_baseline_is_the_first_run_s_candidate(two_local_runs, second)
    # The served version is untouched by the second run, its record included.
    assert two_local_runs.served_files_after_second == two_local_runs.served_files_before_second


def test_reused_baseline_metrics_are_those_of_scoring_the_baseline(
    two_local_runs, tmp_path, caplog
):
    caplog.set_level(logging.INFO)
    root = _root(two_local_runs)
    reused_inputs = evaluator_inputs(root, _served_baseline(two_local_runs), tmp_path / "r", SPEC)
    run_evaluator(ServedBaselineExecutor, tmp_path / "r", reused_inputs)
    assert "Evaluator: baseline metrics reused from the run that pushed" in caplog.text
    # The same served version without its record: both models are scored.
    unrecorded = without_evaluation_record(_served_baseline(two_local_runs), tmp_path / "copy")
    scored_inputs = evaluator_inputs(root, unrecorded, tmp_path / "s", SPEC)
    run_evaluator(ServedBaselineExecutor, tmp_path / "s", scored_inputs)
    assert (
        "Evaluator: baseline metrics computed: the served version holds no evaluation record"
        in caplog.text
    )

    (reused_evaluation,), (scored_evaluation,) = (
        inputs[1]["evaluation"] for inputs in (reused_inputs, scored_inputs)
    )
    assert reused_evaluation.get_string_custom_property(BASELINE_METRICS_PROPERTY) == REUSED
    assert scored_evaluation.get_string_custom_property(BASELINE_METRICS_PROPERTY).startswith(
        COMPUTED
    )
    # The scored baseline is the served model, another model than the candidate.
    assert_baseline_is_the_first_run_s_candidate(two_local_runs, Path(scored_evaluation.uri))
    reused = read_evaluation(Path(reused_evaluation.uri))
    scored = read_evaluation(Path(scored_evaluation.uri))
    assert reused[0] == scored[0]  # binary: counts, accuracies and their diffs, equal
    assert_same_evaluation(reused, scored)
    keys = "".join(k for values in reused[0].values() for k in values)
    assert 'model_name: "baseline"' in keys and "is_diff: true" in keys
    (reused_blessing,), (scored_blessing,) = (
        inputs[1]["blessing"] for inputs in (reused_inputs, scored_inputs)
    )
    assert reused_blessing.get_int_custom_property(
        "blessed"
    ) == scored_blessing.get_int_custom_property("blessed")
    assert sorted(p.name for p in Path(reused_blessing.uri).iterdir()) == sorted(
        p.name for p in Path(scored_blessing.uri).iterdir()
    )
    # TFMA reads the output as usual, the record beside it notwithstanding.
    assert (Path(reused_evaluation.uri) / EVALUATED_FILE).is_file()
    result = tfma.load_eval_result(reused_evaluation.uri)
    assert () in dict(result.slicing_metrics)


def _plan(inputs) -> EvaluationPlan:
    """What the executor decides before it runs TFX's."""
    input_dict, output_dict, exec_properties = inputs
    plan = plan_evaluation(
        drop_empty_baseline(input_dict), output_dict, with_our_extractors(exec_properties)
    )
    assert plan is not None
    return plan


def test_the_record_is_reused_only_for_the_same_model_examples_and_config(two_local_runs, tmp_path):
    root = _root(two_local_runs)
    baseline = _served_baseline(two_local_runs)
    same = _plan(evaluator_inputs(root, baseline, tmp_path / "same", SPEC))
    assert same.stored_sums is not None and same.why_scored == ""

    # Other examples: the eval split with one byte changed.
    inputs = evaluator_inputs(root, baseline, tmp_path / "examples", SPEC)
    examples = inputs[0]["examples"][0]
    copied = shutil.copytree(examples.uri, tmp_path / "examples-copy")
    (data,) = (copied / "Split-eval").iterdir()
    data.write_bytes(data.read_bytes() + b"\0")
    examples.uri = str(copied)
    assert (
        _plan(inputs).why_scored == "the eval examples are not the ones its pushing run evaluated"
    )

    # Another eval config: one more slice.
    inputs = evaluator_inputs(root, baseline, tmp_path / "config", SPEC)
    config = proto_utils.json_to_proto(inputs[2]["eval_config"], tfma.EvalConfig())
    config.slicing_specs.add(feature_keys=["company"])
    inputs[2]["eval_config"] = proto_utils.proto_to_json(config)
    assert _plan(inputs).why_scored == "the eval config is not its pushing run's"

    # Another served model under the same record.
    other = shutil.copytree(baseline, tmp_path / "other-model")
    (other / "Format-Serving" / "assets.extra" / "other.txt").write_text("another model")
    inputs = evaluator_inputs(root, other, tmp_path / "model", SPEC)
    assert _plan(inputs).why_scored == "the served model is not the one its record evaluated"


def test_a_record_of_other_code_or_of_tfma_s_evaluator_is_not_reused():
    record = {
        "format": 1,
        "candidate_model": "m",
        "examples": "e",
        "splits": ["eval"],
        "config": "c",
        "evaluator": "v",
        "raw_feature_slices": True,
    }
    stored = {**record, "candidate_sums": []}
    assert why_not_reusable(stored, record, lambda: "m") is None
    assert "another format" in why_not_reusable({**stored, "format": 0}, record, lambda: "m")
    assert "code changed" in why_not_reusable({**stored, "evaluator": "w"}, record, lambda: "m")
    assert "per-example evaluator" in why_not_reusable(record, record, lambda: "m")
    transformed = {**stored, "raw_feature_slices": False}
    assert "transformed features" in why_not_reusable(transformed, record, lambda: "m")


def test_tfma_s_evaluator_scores_the_baseline_even_with_a_matching_record(caplog):
    caplog.set_level(logging.INFO)
    config = tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(name="candidate"), tfma.ModelSpec(name="baseline")],
        metrics_specs=[tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name="AUC")])],
    )
    config.model_specs[1].is_baseline = True
    plan = EvaluationPlan(record={}, record_path="x", has_baseline=True, stored_sums=[])
    stages = ["Predict", PRUNE_STAGE_NAME, "Unbatch"]
    extractors = [tfma.extractors.Extractor(stage_name=s, ptransform=None) for s in stages]
    arguments = batched_arguments(
        eval_shared_model=None, eval_config=config, extractors=extractors, plan=plan
    )
    assert "evaluators" not in arguments and not plan.batched
    assert plan.outcome == COMPUTED + "TFMA's evaluator scores both models (metric 'AUC')"
    assert f"Evaluator: baseline metrics {plan.outcome}" in caplog.text


def test_recorded_sums_read_back_under_the_baseline_s_keys_only_if_they_match():
    key = metric_types.MetricKey(name="example_count", model_name="candidate")
    plot = metric_types.PlotKey(name="matrix", model_name="candidate")
    stale = metric_types.MetricKey(name="example_count", model_name="baseline")
    sliced = [
        ((), {key: np.array([3.0]), plot: np.ones((2, 3))}),
        ((("visits", 2), ("color", "red"), ("score", 0.5)), {key: np.array([1.0])}),
    ]
    entries = json.loads(json.dumps(batched_metrics.recorded_sums(sliced[:1], "baseline")))
    baseline_keys = [k._replace(model_name="baseline") for k in (key, plot)]
    stored = batched_metrics.stored_sums(entries, baseline_keys)
    assert list(stored) == [()]
    (values,) = stored.values()
    assert {k: type(k) for k in values} == {k: type(k) for k in baseline_keys}
    assert values[baseline_keys[1]].tolist() == [[1.0] * 3] * 2
    # Slice values keep their types (text, int, float): they key the join with the candidate's.
    one = json.loads(json.dumps(batched_metrics.recorded_sums(sliced[1:], None)))
    assert list(batched_metrics.stored_sums(one, [stale])) == [sliced[1][0]]
    with pytest.raises(ValueError, match="not this config's"):
        batched_metrics.stored_sums(entries, [stale])


# --- the Pusher ------------------------------------------------------------------------------


def _push(serving: Path, model_dir: Path, evaluation_dir: Path | None, name: str):
    model = standard_artifacts.Model()
    model.uri = str(model_dir)
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", 1)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(serving.parent / name)
    inputs = {"model": [model], "model_blessing": [blessing]}
    if evaluation_dir is not None:
        evaluation = standard_artifacts.ModelEvaluation()
        evaluation.uri = str(evaluation_dir)
        inputs["evaluation"] = [evaluation]
    destination = pusher_pb2.PushDestination(
        filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=str(serving))
    )
    NoDuplicatePushExecutor().Do(
        inputs,
        {"pushed_model": [pushed]},
        {"push_destination": proto_utils.proto_to_json(destination)},
    )
    return pushed


def _model(tmp_path: Path) -> Path:
    model_dir = tmp_path / "model"
    (model_dir / "Format-Serving" / "variables").mkdir(parents=True)
    (model_dir / "Format-Serving" / "saved_model.pb").write_bytes(b"graph")
    (model_dir / "Format-Serving" / "variables" / "variables.index").write_bytes(b"weights")
    return model_dir


def test_a_push_keeps_the_evaluation_record_with_the_model_and_is_not_repeated(tmp_path):
    model_dir = _model(tmp_path)
    evaluation_dir = tmp_path / "evaluation"
    evaluation_dir.mkdir()
    (evaluation_dir / EVALUATED_FILE).write_text('{"format": 1}')
    serving = tmp_path / "serving"
    first = _push(serving, model_dir, evaluation_dir, "pushed-1")
    assert first.get_int_custom_property("pushed") == 1
    version = Path(first.get_string_custom_property("pushed_destination"))
    assert (version / SERVED_EVALUATION_FILE).read_text() == '{"format": 1}'
    assert (version / PUSH_RECORD_FILE).is_file() and (version / "saved_model.pb").is_file()
    # The record is not part of the model: the same candidate is already served.
    serving_dir = os.fspath(model_dir / "Format-Serving")
    assert served_duplicate(serving_dir, str(serving)) == str(version)
    second = _push(serving, model_dir, evaluation_dir, "pushed-2")
    assert second.get_int_custom_property("pushed") == 0
    assert [p.name for p in serving.iterdir()] == [version.name]


@pytest.mark.parametrize("evaluation", ["none", "without-record"])
def test_a_push_without_an_evaluation_record_pushes_the_model_alone(tmp_path, evaluation):
    evaluation_dir = None
    if evaluation == "without-record":  # an Evaluator that wrote no record
        evaluation_dir = tmp_path / "evaluation"
        evaluation_dir.mkdir()
    serving = tmp_path / "serving"
    pushed = _push(serving, _model(tmp_path), evaluation_dir, "pushed")
    assert pushed.get_int_custom_property("pushed") == 1
    version = Path(pushed.get_string_custom_property("pushed_destination"))
    assert (version / "saved_model.pb").read_bytes() == b"graph"
    assert not (version / SERVED_EVALUATION_FILE).exists()
