"""TFMA's metrics, plots and validation, computed on whole batches.

TFMA 0.47.1 has no batched metrics path: it unbatches every extract into one
dict per example, fans each example out to its slices, and feeds every metric
combiner one example at a time (tensorflow_model_analysis/evaluators/
metrics_plots_and_validations_evaluator.py L298-426, L862-933). This module is
an evaluator that runs instead, on the batches the PredictionsExtractor
emits, before `ExtractUnbatchedInputs`:

1. each batch is sliced with numpy, as `slicer_lib.SingleSliceSpec.
   generate_slices` slices an example (components/evaluator/batch_slices.py);
2. each (batch, slice) becomes one fixed-size array of sums per metric key
   (counts, confusion counts at 0.5, error sums, a class x class matrix);
3. `beam.CombinePerKey` adds them per slice, so memory is per slice, not per
   example, and the step scales out like any Beam combine;
4. each slice's sums become TFMA's values under TFMA's own keys, from
   `metric_specs.keys_and_metrics_from_specs`; then TFMA's diff metrics,
   `metrics_validator.validate_metrics` and the default writers run unchanged.

The values are TFMA's (tests/test_batched_metrics.py runs both on the same
batches): BinaryAccuracy, Precision and Recall count `prediction > 0.5` with
fractional labels (contrib/aggregates/binary_confusion_matrices.py L146-164,
metric_util.py L731-757); Keras' SparseCategoricalAccuracy is the float32
ratio Keras returns; MeanAbsoluteError and MeanSquaredError skip NaN errors
(mean_regression_error.py L393-437); Keras' RootMeanSquaredError is summed in
float64, where TFMA sums float32 per 1,000 examples (so the two agree to
float32 rounding); MultiClassConfusionMatrixPlot is TFMA's matrix at
threshold 0 (multi_class_confusion_matrix_metrics.py L252-288).

`unsupported(eval_config)` names what this path does not compute (AUC, other
metrics, metric options, weights, several outputs, query keys, cross slices,
confidence intervals, minimum slice sizes); the caller then runs TFMA's own
evaluator instead.

The per-slice sums of step 3 are also what a later run reuses: given
`record_path`, the evaluator writes the candidate's sums there (JSON, keys
without their model name, `recorded_sums`); given `baseline_sums` (a record's
sums read back by `stored_sums`), the extracts hold the candidate alone, and
the stored sums join the candidate's per slice under the baseline's keys
before step 4, so the values, diffs and validation are computed by the same
code as when both models are scored.

Port register: docs/ports.md
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis import constants
from tensorflow_model_analysis.evaluators import evaluator, metrics_validator
from tensorflow_model_analysis.evaluators import (
    metrics_plots_and_validations_evaluator as tfma_evaluator,
)
from tensorflow_model_analysis.metrics import metric_specs, metric_types
from tensorflow_model_analysis.metrics import multi_class_confusion_matrix_metrics as mc_matrices
from tensorflow_model_analysis.slicer import slicer_lib
from tensorflow_model_analysis.utils import model_util
from tfx.dsl.io import fileio

from components.evaluator.batch_slices import SliceKey, slice_masks

STAGE_NAME = "EvaluateMetricsAndPlotsOnBatches"

# A MetricKey or PlotKey (tensorflow_model_analysis/metrics/metric_types.py L242-253).
Key = Any
Sums = np.ndarray

# TFMA's default decision thresholds: BinaryAccuracy, Precision and Recall
# (confusion_matrix_metrics.py L405-407); the plot (multi_class_confusion_matrix_plot.py L78-79).
_THRESHOLD = 0.5
_PLOT_THRESHOLD = 0.0


def _divide(numerator: float, denominator: float) -> float:
    """TFMA's `_divide_only_positive_denominator` (confusion_matrix_metrics.py L1316-1317)."""
    return numerator / denominator if denominator > 0 else float("nan")


@dataclass(frozen=True)
class Inputs:
    """One model's labels and predictions for the rows of one slice of a batch, 2-D."""

    labels: np.ndarray
    predictions: np.ndarray


def _pairs(inputs: Inputs, sub_key: metric_types.SubKey | None) -> tuple[np.ndarray, np.ndarray]:
    """(label, prediction) per value, as TFMA's `to_label_prediction_example_weight` flattens."""
    labels, predictions = inputs.labels, inputs.predictions
    if sub_key is not None and sub_key.class_id is not None:
        if predictions.shape[1] < 2:
            raise ValueError(f"class_id {sub_key.class_id} needs one prediction per class")
        if sub_key.class_id >= predictions.shape[1]:
            raise ValueError(f"class_id {sub_key.class_id} out of range of the predictions")
        if labels.shape[1] == predictions.shape[1]:
            labels = labels[:, sub_key.class_id]
        else:
            labels = (labels[:, 0] == sub_key.class_id).astype(np.float64)
        return labels, predictions[:, sub_key.class_id]
    if labels.shape[1] == 1 and predictions.shape[1] > 1:  # a sparse label, one-hot
        labels = (labels == np.arange(predictions.shape[1])).astype(np.float64)
    return labels.ravel(), predictions.ravel()


def _confusion(inputs: Inputs, sub_key: metric_types.SubKey | None) -> Sums:
    """[tp, tn, fp, fn] at TFMA's threshold, labels split as fractional labels."""
    labels, predictions = _pairs(inputs, sub_key)
    labels = labels.astype(np.float64)
    if np.any((labels < 0) | (labels > 1)):
        raise ValueError(f"label must be within [0, 1]: labels={labels[:10]}")
    positive = predictions > _THRESHOLD
    return np.array(
        [
            labels[positive].sum(),
            (1 - labels[~positive]).sum(),
            (1 - labels[positive]).sum(),
            labels[~positive].sum(),
        ]
    )


def _argmax_hits(inputs: Inputs, sub_key: metric_types.SubKey | None) -> Sums:
    """[matches, count], as Keras' sparse_categorical_accuracy counts them."""
    predicted = np.argmax(inputs.predictions, axis=1)
    return np.array([np.sum(predicted == inputs.labels[:, 0]), len(predicted)], dtype=np.float64)


def _errors(power: int, skip_nan: bool) -> Callable[[Inputs, Any], Sums]:
    def sums(inputs: Inputs, sub_key: metric_types.SubKey | None) -> Sums:
        labels, predictions = _pairs(inputs, sub_key)
        # The difference in the inputs' own dtype, as TFMA and Keras take it; sums in float64.
        errors = np.abs(labels - predictions).astype(np.float64) ** power
        if skip_nan:
            errors = errors[~np.isnan(errors)]
        return np.array([errors.sum(), errors.size], dtype=np.float64)

    return sums


def _matrix(inputs: Inputs, sub_key: metric_types.SubKey | None) -> Sums:
    """Counts [actual, predicted + 1]; predicted is -1 where the top score is <= 0."""
    classes = inputs.predictions.shape[1]
    if classes < 2:
        raise ValueError("a multi-class confusion matrix needs one prediction per class")
    labels = inputs.labels
    actual = np.argmax(labels, axis=1) if labels.shape[1] > 1 else labels[:, 0].astype(np.int64)
    if np.any((actual < 0) | (actual >= classes)):
        raise ValueError(f"labels outside the {classes} predicted classes: {actual[:10]}")
    predicted = np.argmax(inputs.predictions, axis=1)
    top = inputs.predictions[np.arange(len(predicted)), predicted]
    predicted = np.where(top <= _PLOT_THRESHOLD, -1, predicted)
    counts = np.zeros((classes, classes + 1))
    np.add.at(counts, (actual, predicted + 1), 1.0)
    return counts


def _plot(counts: Sums) -> Any:
    matrices = mc_matrices.Matrices()
    matrices[_PLOT_THRESHOLD] = {
        mc_matrices.MatrixEntryKey(int(a), int(p) - 1): float(counts[a, p])
        for a, p in zip(*np.nonzero(counts), strict=True)
    }
    return matrices.to_proto().multi_class_confusion_matrix_at_thresholds


def _keras_ratio(sums: Sums) -> np.float32:
    """Keras' Mean: float32 total / float32 count (0 when empty), as TFMA reports it."""
    total, count = np.float32(sums[0]), np.float32(sums[1])
    return np.float32(total / count) if count else np.float32(0.0)


@dataclass(frozen=True)
class Kind:
    """How one metric class sums a slice of a batch, and turns the sums into its value."""

    sums: Callable[[Inputs, metric_types.SubKey | None], Sums]
    value: Callable[[Sums], Any]
    plot: bool = False


KINDS: dict[str, Kind] = {
    "ExampleCount": Kind(
        lambda inputs, _: np.array([len(inputs.labels)], dtype=np.float64),
        lambda s: float(s[0]),
    ),
    "BinaryAccuracy": Kind(_confusion, lambda s: _divide(s[0] + s[1], s.sum())),
    "Precision": Kind(_confusion, lambda s: _divide(s[0], s[0] + s[2])),
    "Recall": Kind(_confusion, lambda s: _divide(s[0], s[0] + s[3])),
    "SparseCategoricalAccuracy": Kind(_argmax_hits, _keras_ratio),
    "MeanAbsoluteError": Kind(_errors(1, skip_nan=True), lambda s: _divide(s[0], s[1])),
    "MeanSquaredError": Kind(_errors(2, skip_nan=True), lambda s: _divide(s[0], s[1])),
    "RootMeanSquaredError": Kind(
        _errors(2, skip_nan=False),
        lambda s: float(np.sqrt(s[0] / s[1])) if s[1] else 0.0,
    ),
    "MultiClassConfusionMatrixPlot": Kind(_matrix, _plot, plot=True),
}


# The kinds TFMA computes per class when a spec binarizes by class_ids.
_BINARIZED = ("BinaryAccuracy", "Precision", "Recall")


@dataclass(frozen=True)
class Metric:
    """One output key of the evaluation and the kind that computes it."""

    key: Key
    kind: str


def _config_options(config: tfma.MetricConfig) -> set[str]:
    return set(json.loads(config.config or "{}")) - {"name"}


def unsupported(eval_config: tfma.EvalConfig) -> str | None:
    """Why the batched path cannot compute `eval_config` exactly as TFMA does, or None."""
    options = eval_config.options
    if options.compute_confidence_intervals.value:
        return "confidence intervals"
    if options.min_slice_size.value > 1:
        return "min_slice_size"
    if eval_config.cross_slicing_specs:
        return "cross_slicing_specs"
    if any(spec.slice_keys_sql for spec in eval_config.slicing_specs):
        return "slice_keys_sql"
    for model in eval_config.model_specs:
        if model.example_weight_key or model.example_weight_keys:
            return f"example weights (model {model.name!r})"
        if model.label_keys or model.prediction_keys:
            return f"several outputs (model {model.name!r})"
    for spec in eval_config.metrics_specs:
        if spec.output_names or spec.query_key or spec.HasField("aggregate"):
            return "output_names, query_key or aggregate in a metrics spec"
        if spec.cross_slice_thresholds:
            return "cross-slice thresholds"
        binarize = spec.binarize
        if binarize.top_k_list.values or binarize.k_list.values:
            return "top_k or k binarization"
        for config in spec.metrics:
            if config.class_name not in KINDS or config.module:
                return f"metric {config.class_name!r}"
            if binarize.class_ids.values and config.class_name not in _BINARIZED:
                return f"{config.class_name} per class_id"
            if _config_options(config):
                return f"{config.class_name} options {sorted(_config_options(config))}"
    if any(key.example_weighted for key, _, _ in _keys(eval_config)):
        return "example-weighted metrics"
    return None


def _keys(eval_config: tfma.EvalConfig) -> Iterator[tuple[Key, Any, Any]]:
    return metric_specs.keys_and_metrics_from_specs(eval_config, eval_config.metrics_specs)


def metrics_of(eval_config: tfma.EvalConfig) -> list[Metric]:
    """Every key TFMA would output for `eval_config` (diff keys aside), with its kind."""
    result = []
    for key, config, _ in _keys(eval_config):
        if KINDS[config.class_name].plot:
            key = metric_types.PlotKey(
                name=key.name,
                model_name=key.model_name,
                output_name=key.output_name,
                sub_key=key.sub_key,
                example_weighted=key.example_weighted,
            )
        result.append(Metric(key, config.class_name))
    return result


# --- Summing and combining ---------------------------------------------------------------


def _as_2d(value: Any, what: str) -> np.ndarray:
    if isinstance(value, Mapping):
        raise ValueError(
            f"batched metrics need one {what} array per model, got a dict with keys "
            f"{sorted(value)}: a multi-output model needs TFMA's evaluator"
        )
    array = np.asarray(value)
    return array.reshape(len(array), -1)


def model_inputs(extracts: Mapping[str, Any], model_name: str) -> Inputs:
    """One model's labels and predictions, keyed by model name when there are several."""
    labels = extracts[constants.LABELS_KEY]
    predictions = extracts[constants.PREDICTIONS_KEY]
    if model_name:
        predictions = predictions[model_name]
        if isinstance(labels, Mapping) and model_name in labels:
            labels = labels[model_name]
    return Inputs(_as_2d(labels, "label"), _as_2d(predictions, "prediction"))


class SumPerSlice(beam.DoFn):
    """A batch of extracts -> (slice key, {metric key: sums}) for each slice in it.

    `extract_models`: the models whose outputs the extracts hold (default: the
    config's); TFMA keys labels, predictions and transformed features by model
    name only when there are several.
    """

    def __init__(
        self,
        eval_config: tfma.EvalConfig,
        metrics: Sequence[Metric],
        extract_models: Sequence[str] | None = None,
    ):
        self._metrics = list(metrics)
        self._specs = [slicer_lib.SingleSliceSpec(spec=s) for s in eval_config.slicing_specs]
        self._model_names = list(
            extract_models
            if extract_models is not None
            else [m.name for m in eval_config.model_specs]
        )

    def process(self, extracts: Mapping[str, Any]) -> Iterator[tuple[SliceKey, dict[Key, Sums]]]:
        several = len(self._model_names) > 1
        inputs = {
            n: model_inputs(extracts, n if several else "")
            for n in {m.key.model_name for m in self._metrics}
        }
        batch_size = len(next(iter(inputs.values())).labels) if inputs else 0
        masks = slice_masks(extracts, self._specs, self._model_names, batch_size)
        for slice_key, mask in masks.items():
            sliced = {n: Inputs(i.labels[mask], i.predictions[mask]) for n, i in inputs.items()}
            yield (
                slice_key,
                {
                    m.key: KINDS[m.kind].sums(sliced[m.key.model_name], m.key.sub_key)
                    for m in self._metrics
                },
            )


class AddSums(beam.CombineFn):
    """Adds {metric key: sums} dicts; the accumulator is one small array per key."""

    def create_accumulator(self) -> dict[Key, Sums]:
        return {}

    def add_input(self, accumulator: dict[Key, Sums], sums: dict[Key, Sums]) -> dict[Key, Sums]:
        for key, value in sums.items():
            accumulator[key] = accumulator[key] + value if key in accumulator else value
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[dict[Key, Sums]]) -> dict[Key, Sums]:
        result: dict[Key, Sums] = {}
        for accumulator in accumulators:
            self.add_input(result, accumulator)
        return result

    def extract_output(self, accumulator: dict[Key, Sums]) -> dict[Key, Sums]:
        return accumulator


def values_of(sums: Mapping[Key, Sums], metrics: Sequence[Metric]) -> dict[Key, Any]:
    return {m.key: KINDS[m.kind].value(sums[m.key]) for m in metrics}


# --- Sums recorded for a later run -------------------------------------------------------

# {slice key: {metric key: sums}}: one model's sums over a whole evaluation.
SlicedSums = Mapping[SliceKey, Mapping[Key, Sums]]


def key_text(key: Key) -> str:
    """A metric or plot key as a record names it: TFMA's text form, without the model name."""
    return str(key._replace(model_name=""))


def recorded_sums(
    sliced: Iterable[tuple[SliceKey, Mapping[Key, Sums]]], baseline_name: str | None
) -> list[dict[str, Any]]:
    """The candidate's sums per slice, as JSON data (the baseline's keys left out)."""
    entries = [
        {
            "slice": [list(column_value) for column_value in slice_key],
            "sums": {
                key_text(k): v.tolist()
                for k, v in sorted(sums.items(), key=lambda item: key_text(item[0]))
                if baseline_name is None or k.model_name != baseline_name
            },
        }
        for slice_key, sums in sliced
    ]
    return sorted(entries, key=lambda e: json.dumps(e["slice"]))


def stored_sums(entries: Sequence[Mapping[str, Any]], keys: Iterable[Key]) -> dict[SliceKey, dict]:
    """`recorded_sums` read back under `keys` (the baseline's); ValueError unless the
    record holds exactly those keys in every slice."""
    by_text = {key_text(k): k for k in keys}
    result: dict[SliceKey, dict] = {}
    for entry in entries:
        if set(entry["sums"]) != set(by_text):
            missing = sorted(set(by_text) - set(entry["sums"]))
            extra = sorted(set(entry["sums"]) - set(by_text))
            raise ValueError(
                f"the recorded metrics are not this config's (missing {missing}, extra {extra})"
            )
        slice_key = tuple((column, value) for column, value in entry["slice"])
        result[slice_key] = {
            by_text[text]: np.asarray(value, dtype=np.float64)
            for text, value in entry["sums"].items()
        }
    return result


def _write_record(
    sliced: list[tuple[SliceKey, Mapping[Key, Sums]]],
    record: Mapping[str, Any],
    path: str,
    baseline_name: str | None,
) -> None:
    fileio.makedirs(os.path.dirname(path))  # TFMA's writers may not have made it yet
    with fileio.open(path, "w") as f:
        f.write(json.dumps({**record, "candidate_sums": recorded_sums(sliced, baseline_name)}))


def _with_stored(
    slice_key: SliceKey, grouped: Mapping[str, Iterable[Mapping[Key, Sums]]]
) -> tuple[SliceKey, dict[Key, Sums]]:
    computed, stored = list(grouped["computed"]), list(grouped["stored"])
    if len(computed) != 1 or len(stored) != 1:
        # Slices depend on the examples and the config alone, which the record matched.
        raise ValueError(
            f"slice {slice_key}: in the candidate's evaluation {len(computed)} time(s), "
            f"in the stored baseline's {len(stored)}; they must have the same slices"
        )
    return slice_key, {**computed[0], **stored[0]}


@beam.ptransform_fn
def EvaluateOnBatches(
    extracts: beam.PCollection,
    eval_config: tfma.EvalConfig,
    baseline_sums: SlicedSums | None = None,
    record: Mapping[str, Any] | None = None,
    record_path: str | None = None,
) -> evaluator.Evaluation:
    """Batched extracts -> TFMA's {'metrics', 'plots', 'attributions', 'validations'}.

    `baseline_sums`: the baseline's sums (`stored_sums`); the extracts then hold the
    candidate alone. `record_path`: where `record` is written, with the candidate's sums.
    """
    metrics = metrics_of(eval_config)
    baseline = model_util.get_baseline_model_spec(eval_config)
    baseline_name = baseline.name if baseline else None
    computed, extract_models = metrics, None
    if baseline_sums is not None:
        if baseline_name is None:
            raise ValueError("baseline_sums given, but the eval config has no baseline model")
        computed = [m for m in metrics if m.key.model_name != baseline_name]
        extract_models = [s.name for s in eval_config.model_specs if not s.is_baseline]
    sums = (
        extracts
        | "SumPerSlice" >> beam.ParDo(SumPerSlice(eval_config, computed, extract_models))
        | "AddPerSlice" >> beam.CombinePerKey(AddSums())
    )
    if record_path is not None:
        _ = (
            sums
            | "AllSlices" >> beam.combiners.ToList()
            | "WriteRecord"
            >> beam.Map(_write_record, dict(record or {}), record_path, baseline_name)
        )
    if baseline_sums is not None:
        stored = extracts.pipeline | "StoredBaselineSums" >> beam.Create(
            [(k, dict(v)) for k, v in baseline_sums.items()]
        )
        sums = (
            {"computed": sums, "stored": stored}
            | "JoinStoredBaseline" >> beam.CoGroupByKey()
            | "WithStoredBaseline" >> beam.MapTuple(_with_stored)
        )
    sliced = (
        sums
        | "Values" >> beam.MapTuple(lambda key, sums: (key, values_of(sums, metrics)))
        # TFMA's own step: adds `candidate - baseline` under is_diff keys (evaluator L628-669).
        | "AddDiffMetrics"
        >> tfma_evaluator._AddDerivedCrossSliceAndDiffMetrics([], [], [], baseline_name)
    )
    by_type = tfma_evaluator._filter_by_key_type  # TFMA's split by key type, L680-705
    result = {
        constants.METRICS_KEY: sliced | "Metrics" >> beam.Map(by_type, metric_types.MetricKey),
        constants.PLOTS_KEY: sliced | "Plots" >> beam.Map(by_type, metric_types.PlotKey),
        constants.ATTRIBUTIONS_KEY: sliced
        | "Attributions" >> beam.Map(by_type, metric_types.AttributionsKey),
    }
    result[constants.VALIDATIONS_KEY] = result[constants.METRICS_KEY] | "Validate" >> beam.Map(
        metrics_validator.validate_metrics, eval_config
    )
    return result


def batched_evaluator(
    eval_config: tfma.EvalConfig,
    run_after: str,
    baseline_sums: SlicedSums | None = None,
    record: Mapping[str, Any] | None = None,
    record_path: str | None = None,
) -> evaluator.Evaluator:
    """The evaluator, on the extracts of stage `run_after` (batched: before the unbatch);
    `EvaluateOnBatches` says what the other arguments do."""
    reason = unsupported(eval_config)
    if reason:
        raise ValueError(f"batched metrics do not compute {reason}; use TFMA's evaluator")
    return evaluator.Evaluator(
        stage_name=STAGE_NAME,
        run_after=run_after,
        ptransform=EvaluateOnBatches(
            eval_config=eval_config,
            baseline_sums=baseline_sums,
            record=record,
            record_path=record_path,
        ),
    )


def log_fallback(reason: str) -> None:
    logging.warning(
        "Evaluator: batched metrics do not compute %s; TFMA's per-example evaluator runs instead",
        reason,
    )
