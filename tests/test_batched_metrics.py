"""Batched metrics against TFMA's own evaluator, on the same batches of extracts.

Each case builds the batches the PredictionsExtractor hands on (labels,
predictions, slice columns; keyed by model name with a baseline), runs TFMA's
unbatch, slice-key extractor and default evaluator on them, and our batched
evaluator on them, both through TFMA's default writers, and compares what
`tfma` reads back: every metric key and value, every plot, the validation
result.

Counts, accuracies, precision, recall and the confusion matrix must be
equal; regression errors agree to a relative 1e-6 (tests/harness.py says why).
"""

from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from apache_beam.options.pipeline_options import PipelineOptions
from tensorflow_model_analysis.api import model_eval_lib
from tensorflow_model_analysis.api import types as tfma_types
from tensorflow_model_analysis.evaluators import evaluator, metrics_plots_and_validations_evaluator
from tensorflow_model_analysis.extractors import slice_key_extractor, unbatch_extractor
from tfx.components.evaluator import executor as stock_evaluator

from components.evaluator import batch_slices, batched_metrics
from components.evaluator.executor import batched_arguments, batched_metrics_in_tfx
from components.evaluator.extractors import PRUNE_STAGE_NAME
from contract.dataset.parse import parse_spec
from contract.dataset.spec import DatasetSpec
from pipeline.beam import IN_MEMORY_RUNNER_ARG
from pipeline.pipeline import build_eval_config
from tests.harness import assert_same_evaluation, read_evaluation

LABELS = {
    "binary": {"task": "binary", "column": "y", "classes": ["no", "yes"]},
    "multiclass": {"task": "multiclass", "column": "y", "classes": ["a", "b", "c"]},
    "regression": {"task": "regression", "column": "y", "mean": 10.0, "std": 4.0},
}
NAIVE = {"binary": 0.55, "multiclass": 0.4, "regression": 4.0}
COLORS = np.array([b"red", b"green", b"blue"], dtype=object)
BATCH_SIZES = (1, 2, 7, 130, 250, 64, 200)


def task_spec(task: str) -> DatasetSpec:
    return parse_spec(
        {
            "name": f"{task}-data",
            "label": LABELS[task],
            "features": {"color": {"kind": "categorical"}, "visits": {"kind": "numeric"}},
            "slices": ["color", "visits"],
            "evaluation": {"naive_value": NAIVE[task], "max_drop": 0.01},
        }
    )


def eval_config(task: str, *, baseline: bool) -> tfma.EvalConfig:
    config = build_eval_config(task_spec(task))
    # A cross, a fixed value, and a fixed value crossed with a column.
    config.slicing_specs.add(feature_keys=["color", "visits"])
    config.slicing_specs.add(feature_values={"color": "red"})
    config.slicing_specs.add(feature_keys=["visits"], feature_values={"color": "blue"})
    config.slicing_specs.add(feature_values={"visits": "3"})
    return tfma.utils.update_eval_config_with_defaults(
        config, has_baseline=baseline, rubber_stamp=True
    )


def _predictions(task: str, labels: np.ndarray, rng: np.random.Generator, skill: float):
    size = len(labels)
    if task == "binary":
        p = 1 / (1 + np.exp(-(6 * skill * (labels - 0.5) + rng.normal(0, 1.5, size))))
        p[rng.random(size) < 0.05] = 0.5  # TFMA counts 0.5 as negative (strict >)
        return p.astype(np.float32).reshape(size, 1)
    if task == "multiclass":
        logits = rng.normal(0, 1, (size, 3)) + 3 * skill * np.eye(3)[labels]
        p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        p[rng.random(size) < 0.03] = 1 / 3  # ties: the first class wins
        p[rng.random(size) < 0.02] = 0.0  # no class above the plot's threshold
        return p.astype(np.float32)
    noise = rng.normal(0, 4 * (1 - skill) + 0.1, size)
    return (labels + noise).astype(np.float32).reshape(size, 1)


def _color(rows: np.ndarray, rng: np.random.Generator, ragged: bool):
    """A string column: dense [B, 1] bytes, or VarLen with some rows missing."""
    values = rng.choice(COLORS, len(rows))
    if not ragged:
        return values.reshape(-1, 1)
    present = np.flatnonzero(rng.random(len(rows)) > 0.1)
    return tfma_types.VarLenTensorValue(
        values=values[present],
        indices=np.stack([present, np.zeros_like(present)], axis=1),
        dense_shape=np.array([len(rows), 1]),
    )


def batches(task: str, *, baseline: bool, seed: int = 3) -> list[dict]:
    rng = np.random.default_rng(seed)
    result = []
    for i, size in enumerate(BATCH_SIZES):
        rows = np.arange(size)
        if task == "binary":
            labels = rng.integers(0, 2, size)
        elif task == "multiclass":
            labels = rng.integers(0, 3, size)
        else:
            labels = rng.normal(10, 4, size).astype(np.float32)
        candidate = _predictions(task, labels, rng, skill=0.6)
        features = {
            "color": _color(rows, rng, ragged=i % 2 == 1),
            "visits": rng.integers(0, 6, (size, 1)),
        }
        if baseline:
            batch = {
                "labels": {"candidate": labels, "baseline": labels},
                "predictions": {
                    "candidate": candidate,
                    "baseline": _predictions(task, labels, rng, skill=0.8),
                },
            }
        else:
            batch = {"labels": labels, "predictions": candidate}
        result.append({**batch, "features": features, "transformed_features": {}})
    return result


def _write(config: tfma.EvalConfig, data: list[dict], out: Path, evaluators, extractors) -> None:
    # The FnApiRunner, named as every Beam step names it (pipeline/beam.py): Beam's default
    # runner would first try to fetch Prism, then fall back to it.
    with beam.Pipeline(options=PipelineOptions([IN_MEMORY_RUNNER_ARG])) as p:
        _ = (
            p
            | beam.Create(data, reshuffle=False)
            | model_eval_lib.ExtractAndEvaluate(extractors=extractors, evaluators=evaluators)
            | model_eval_lib.WriteResults(
                writers=tfma.default_writers(output_path=str(out), eval_config=config)
            )
        )


def run_tfma(config: tfma.EvalConfig, data: list[dict], out: Path) -> Path:
    extractors = [
        unbatch_extractor.UnbatchExtractor(),
        slice_key_extractor.SliceKeyExtractor(eval_config=config),
    ]
    # TFMA's default evaluator, given the config as the executor hands it over (with
    # default_evaluators, a baseline would need a real model to count as one).
    stock = metrics_plots_and_validations_evaluator.MetricsPlotsAndValidationsEvaluator(config)
    _write(config, data, out, [stock], extractors)
    return out


def run_batched(config: tfma.EvalConfig, data: list[dict], out: Path, **options) -> Path:
    """Our evaluator on `data`; `options` are EvaluateOnBatches' (recorded or stored sums)."""
    batched = evaluator.Evaluator(
        stage_name=batched_metrics.STAGE_NAME,
        run_after=None,
        ptransform=batched_metrics.EvaluateOnBatches(eval_config=config, **options),
    )
    _write(config, data, out, [batched], [])
    return out


@pytest.fixture(scope="module")
def batched_output(tmp_path_factory):
    """Where our evaluation of a task's `batches`, alone or with a baseline, was written: run
    once for the module (the comparison with TFMA's, the recorded sums' and TFMA's reader
    read it)."""
    outputs = {}

    def output(task: str, baseline: bool) -> Path:
        if (task, baseline) not in outputs:
            out = tmp_path_factory.mktemp(f"batched-{task}-{baseline}")
            config = eval_config(task, baseline=baseline)
            outputs[task, baseline] = run_batched(config, batches(task, baseline=baseline), out)
        return outputs[task, baseline]

    return output


@pytest.mark.slow  # TFMA's Keras metrics take seconds to set up, per case
@pytest.mark.parametrize("baseline", [False, True], ids=["alone", "with-baseline"])
@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_batched_metrics_are_tfma_s(task, baseline, tmp_path, batched_output):
    config = eval_config(task, baseline=baseline)
    data = batches(task, baseline=baseline)
    theirs = read_evaluation(run_tfma(config, data, tmp_path / "tfma"))
    ours = read_evaluation(batched_output(task, baseline))
    assert_same_evaluation(ours, theirs)

    # What the comparison covered: slices of every spec, the keys TFMA names, the gate.
    slices = theirs[0].keys()
    assert len(slices) > 20
    keys = "".join(k for values in theirs[0].values() for k in values)
    assert ("is_diff: true" in keys) == baseline
    assert ('model_name: "baseline"' in keys) == baseline
    if task == "multiclass":
        assert "class_id {\n    value: 2" in keys
        assert any(
            "multi_class_confusion_matrix" in v for p in ours[1].values() for v in p.values()
        )
    if baseline:  # a weaker candidate than the baseline fails the change threshold
        assert not theirs[2].validation_ok


@pytest.mark.parametrize(
    ("metrics", "message"),
    [({}, "no metrics at all"), ({"()": {}}, r"slices without metrics: \['\(\)'\]")],
    ids=["no-slices", "an-empty-slice"],
)
def test_evaluations_without_metrics_are_refused_not_found_equal(metrics, message):
    """What assert_same_evaluation, the check of every comparison above, must not pass."""
    empty = (metrics, {}, tfma.ValidationResult(validation_ok=True))
    with pytest.raises(AssertionError, match=f"ours: {message}"):
        assert_same_evaluation(empty, empty)


def one_model(data: list[dict], model: str) -> list[dict]:
    """Batches with one model's labels and predictions, as TFMA extracts a single model."""
    return [
        {**b, "labels": b["labels"][model], "predictions": b["predictions"][model]} for b in data
    ]


@pytest.mark.slow  # two Beam pipelines per task, and the module's with-baseline one
@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_a_baseline_s_recorded_sums_give_what_scoring_it_gives(task, tmp_path, batched_output):
    """The pushing run scores the future baseline alone and records its sums; a later run
    scores the candidate alone and adds them: the evaluation of scoring both."""
    data = batches(task, baseline=True)
    record_path = tmp_path / "pushed" / "evaluated.json"
    run_batched(
        eval_config(task, baseline=False),
        one_model(data, "baseline"),
        tmp_path / "pushed",
        record={"format": 1},
        record_path=str(record_path),
    )
    record = json.loads(record_path.read_text())
    assert record["format"] == 1
    config = eval_config(task, baseline=True)
    baseline_keys = [
        m.key for m in batched_metrics.metrics_of(config) if m.key.model_name == "baseline"
    ]
    stored = batched_metrics.stored_sums(record["candidate_sums"], baseline_keys)
    reused = read_evaluation(
        run_batched(config, one_model(data, "candidate"), tmp_path / "reused", baseline_sums=stored)
    )
    scored = read_evaluation(batched_output(task, True))  # run_batched(config, data)
    assert_same_evaluation(reused, scored)
    if task != "regression":  # sums of counts: equal, not just close
        assert reused[0] == scored[0]
    keys = "".join(k for values in reused[0].values() for k in values)
    assert 'model_name: "baseline"' in keys and "is_diff: true" in keys
    assert not reused[2].validation_ok  # the weaker candidate fails the change threshold

    if task != "binary":
        return
    # A stored baseline that lacks a slice the candidate has is refused, never half-used.
    stored.pop(next(k for k in stored if k))
    with pytest.raises(Exception, match="they must have the same slices"):
        run_batched(config, one_model(data, "candidate"), tmp_path / "short", baseline_sums=stored)


def test_the_evaluation_reads_back_as_tfma_s(batched_output):
    """`tfma.load_eval_result` (the run summary, the report) reads the batched output,
    crossed and fixed-value slices included."""
    out = batched_output("multiclass", False)
    result = tfma.load_eval_result(str(out))
    slices = {key for key, _ in result.slicing_metrics}
    assert () in slices
    assert (("color", "red"),) in slices
    overall = dict(result.slicing_metrics)[()][""][""]
    assert overall["example_count"]["doubleValue"] == sum(BATCH_SIZES)
    assert 0 < overall["accuracy"]["doubleValue"] < 1
    assert sorted(p.name for p in Path(out).iterdir()) == [
        "attributions-00000-of-00001.tfrecord",
        "eval_config.json",
        "metrics-00000-of-00001.tfrecord",
        "plots-00000-of-00001.tfrecord",
        "validations.tfrecord",
    ]


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda c: c.metrics_specs[0].metrics.add(class_name="AUC"), "metric 'AUC'"),
        (
            lambda c: c.metrics_specs[0].metrics.add(
                class_name="BinaryAccuracy", config=json.dumps({"threshold": 0.3})
            ),
            "BinaryAccuracy options ['threshold']",
        ),
        (lambda c: setattr(c.model_specs[0], "example_weight_key", "w"), "example weights"),
        (lambda c: setattr(c.options.min_slice_size, "value", 5), "min_slice_size"),
        (lambda c: c.cross_slicing_specs.add(), "cross_slicing_specs"),
    ],
)
def test_what_the_batched_path_does_not_compute_is_named(change, reason):
    config = eval_config("binary", baseline=False)
    assert batched_metrics.unsupported(config) is None
    change(config)
    assert reason in batched_metrics.unsupported(config)
    with pytest.raises(ValueError, match="use TFMA's evaluator"):
        batched_metrics.batched_evaluator(config, run_after="x")


def test_a_batch_is_sliced_as_tfma_slices_each_example():
    features = {
        "color": tfma_types.VarLenTensorValue(
            values=np.array([b"red", b"blue", b"red"], dtype=object),
            indices=np.array([[0, 0], [2, 0], [3, 0]]),
            dense_shape=np.array([4, 1]),
        ),
        "visits": np.array([[1], [1], [2], [1]]),
        "tags": [np.array([b"x", b"y", b"x"]), np.array([]), np.array([b"y"]), np.array([b"z"])],
    }
    specs = [
        tfma.SlicingSpec(),
        tfma.SlicingSpec(feature_keys=["color"]),
        tfma.SlicingSpec(feature_keys=["tags", "visits"]),
        tfma.SlicingSpec(feature_values={"color": "red"}, feature_keys=["visits"]),
        tfma.SlicingSpec(feature_keys=["missing"]),
    ]
    masks = batch_slices.slice_masks(
        {"features": features},
        [tfma.slicer.SingleSliceSpec(spec=s) for s in specs],
        model_names=[""],
        batch_size=4,
    )
    got = {key: np.flatnonzero(mask).tolist() for key, mask in masks.items()}
    assert got == {
        (): [0, 1, 2, 3],
        (("color", "red"),): [0, 3],
        (("color", "blue"),): [2],
        (("tags", "x"), ("visits", 1)): [0],
        (("tags", "y"), ("visits", 1)): [0],
        (("tags", "y"), ("visits", 2)): [2],
        (("tags", "z"), ("visits", 1)): [3],
        (("color", "red"), ("visits", 1)): [0, 3],
    }


def test_labels_outside_zero_one_are_refused_as_tfma_refuses_them():
    inputs = batched_metrics.Inputs(np.array([[2.0]]), np.array([[0.7]]))
    with pytest.raises(ValueError, match=r"within \[0, 1\]"):
        batched_metrics.KINDS["BinaryAccuracy"].sums(inputs, None)


def _stage(name: str):
    return tfma.extractors.Extractor(stage_name=name, ptransform=beam.Map(lambda x: x))


def test_the_executor_runs_batched_metrics_after_the_prune_and_drops_the_unbatch():
    config = eval_config("binary", baseline=False)
    stages = ["Predict", PRUNE_STAGE_NAME, unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME, "Slice"]
    arguments = batched_arguments(
        eval_shared_model=None,
        eval_config=config,
        extractors=[_stage(s) for s in stages],
        output_path="out",
    )
    assert [e.stage_name for e in arguments["extractors"]] == stages[:2]
    (batched,) = arguments["evaluators"]
    assert (batched.stage_name, batched.run_after) == (batched_metrics.STAGE_NAME, PRUNE_STAGE_NAME)
    assert arguments["output_path"] == "out"


@pytest.mark.parametrize("own_module", [False, True])
def test_the_executor_falls_back_to_tfma_and_says_why(own_module, caplog):
    config = eval_config("binary", baseline=False)
    stages = ["Predict", unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME, "Slice"]
    if not own_module:
        config.metrics_specs[0].metrics.add(class_name="AUC")
        stages.insert(1, PRUNE_STAGE_NAME)
    extractors = [_stage(s) for s in stages]
    arguments = batched_arguments(eval_shared_model=None, eval_config=config, extractors=extractors)
    assert arguments["extractors"] == extractors
    assert "evaluators" not in arguments
    why = "a module's own extractors" if own_module else "metric 'AUC'"
    assert f"batched metrics do not compute {why}; TFMA's per-example evaluator" in caplog.text


def test_tfx_s_executor_sees_tfma_again_after_do():
    stock = stock_evaluator.tfma
    with batched_metrics_in_tfx():
        assert stock_evaluator.tfma is not stock
        assert stock_evaluator.tfma.EvalConfig is tfma.EvalConfig
    assert stock_evaluator.tfma is stock


def test_the_eval_split_is_read_in_batches_of_up_to_8192_rows_while_do_builds_its_pipeline():
    """TFX's `tfxio.BeamSource()` takes its batching from these kwargs when the pipeline is
    built: Beam's tuning capped at 1,000 rows by default, 8,192 rows (20 MiB) inside."""
    from tfx_bsl.coders import batch_util

    from components.evaluator.executor import byte_size_batches

    assert batch_util.GetBatchElementsKwargs(None)["max_batch_size"] == 1000
    with byte_size_batches():
        inside = batch_util.GetBatchElementsKwargs(None)
        assert inside["max_batch_size"] == inside["min_batch_size"] == 20 * 1024 * 1024
        # Bytes, each record counted as at least 2,560: at most 8,192 rows a batch.
        assert inside["element_size_fn"](b"x") * 8192 == inside["max_batch_size"]
    assert batch_util.GetBatchElementsKwargs(None)["max_batch_size"] == 1000


def test_every_metric_class_of_the_task_table_is_computed_on_whole_batches():
    """contract/dataset/task_metrics.py names each task's metrics once; the Evaluator's batched
    metrics compute every class it names, so no task falls back to TFMA's per-example path."""
    from components.evaluator.batched_metrics import KINDS
    from contract.dataset.sections import GATE_METRICS
    from contract.dataset.task_metrics import TASK_METRICS

    assert {c for m in TASK_METRICS.values() for c in m.classes} <= set(KINDS)
    assert {t: (m.gate, m.higher_is_better) for t, m in TASK_METRICS.items()} == GATE_METRICS
