"""TFMA's default extractors, with each batch pruned to what slicing and metrics read.

TFMA extracts a batch of examples (raw features, the Transform replay that
computes the label, predictions), then unbatches *every* extract into one
dict per example before slicing and metrics. On the taxi data that is ~40
arrays split per example, about a third of the Evaluator's time. Metrics read
labels, predictions and example weights; slicing reads the slice columns. So
a step just before the unbatch keeps those and drops the rest: the raw
record, every other feature, every other transformed feature. The metrics,
slices and validation are the ones TFMA computes without it (compared in
tests/test_evaluation_extractors.py).

TFX's Evaluator takes these through its `custom_extractors` hook
(components/evaluator/executor.py supplies this module's path).

Port register: docs/ports.md
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis import constants
from tensorflow_model_analysis.extractors import extractor, unbatch_extractor

PRUNE_STAGE_NAME = "PruneExtractsToSlicesAndMetrics"

# What metrics read from an example's extracts (besides slice columns).
_KEPT = (
    constants.LABELS_KEY,
    constants.PREDICTIONS_KEY,
    constants.EXAMPLE_WEIGHTS_KEY,
    constants.SLICE_KEY_TYPES_KEY,
    constants.ATTRIBUTIONS_KEY,
)
_FEATURE_DICTS = (constants.FEATURES_KEY, constants.TRANSFORMED_FEATURES_KEY)


def slice_columns(eval_config: tfma.EvalConfig) -> frozenset[str]:
    """Every column a slicing spec (or cross-slicing spec) of `eval_config` reads."""
    specs = list(eval_config.slicing_specs)
    for cross in eval_config.cross_slicing_specs:
        specs += [cross.baseline_spec, *cross.slicing_specs]
    columns = set()
    for spec in specs:
        if spec.slice_keys_sql:
            raise ValueError(
                "eval_config: SQL slices (slice_keys_sql) read the whole batch; "
                "they are not supported with pruned extracts"
            )
        columns.update(spec.feature_keys)
        columns.update(spec.feature_values)
    return frozenset(columns)


def prune(extracts: dict[str, Any], columns: frozenset[str]) -> dict[str, Any]:
    """A batch's extracts with only what metrics and the slice `columns` need."""
    kept = {k: v for k, v in extracts.items() if k in _KEPT}
    for key in _FEATURE_DICTS:
        features = extracts.get(key)
        if isinstance(features, dict):
            kept[key] = {name: v for name, v in features.items() if name in columns}
    return kept


def prune_extractor(eval_config: tfma.EvalConfig) -> extractor.Extractor:
    columns = slice_columns(eval_config)
    return extractor.Extractor(
        stage_name=PRUNE_STAGE_NAME,
        ptransform=beam.Map(prune, columns=columns),
    )


def custom_extractors(
    eval_shared_model: Any, eval_config: tfma.EvalConfig, tensor_adapter_config: Any
) -> list[extractor.Extractor]:
    """TFX's `custom_extractors` hook: TFMA's defaults plus the prune before the unbatch."""
    extractors = tfma.default_extractors(
        eval_shared_model=eval_shared_model,
        eval_config=eval_config,
        tensor_adapter_config=tensor_adapter_config,
    )
    names = [e.stage_name for e in extractors]
    at = names.index(unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME)
    return [*extractors[:at], prune_extractor(eval_config), *extractors[at:]]
