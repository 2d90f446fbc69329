"""TFX's Evaluator, taught that an empty baseline means "no baseline".

`LatestServedModel` always emits a Model artifact (a step must produce its
outputs on Kubeflow); when nothing is served yet that artifact is marked
`has_model = 0`. This executor drops such a baseline before TFMA runs, so the
change threshold is skipped exactly as TFX does on a first run without a
blessed model.

It also hands TFX's `custom_extractors` hook the extractors of
components/evaluation_extractors.py (TFMA's, with each batch pruned before it
is unbatched), unless the Evaluator was given a module of its own, and has
components/batched_metrics.py compute the metrics on those pruned batches
instead of TFMA's per-example evaluator. Everything else, the blessing
included, is the stock executor.

TFX's executor builds the Beam pipeline inside `Do` and calls
`tfma.ExtractEvaluateAndWriteResults` with extractors but no evaluators
(tfx 1.16, components/evaluator/executor.py L278-295). Rather than copy that
`Do`, this one runs the stock `Do` while the executor module's `tfma` name is
`_TfmaWithBatchedMetrics`, which forwards everything to TFMA and adds the
batched evaluator to that one call; the name is restored when `Do` returns.
Where the batched path does not compute the eval config (AUC, weights, ...;
`batched_metrics.unsupported`) or the extractors are a module's own, TFMA's
evaluator runs, and the log says why.

It reads the eval split in batches of up to 8,192 rows (`byte_size_batches`):
TFMA's costs are per batch, and Beam's tuning stops at 1,000 rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import tensorflow_model_analysis as tfma
from absl import flags
from tensorflow_model_analysis.api import model_eval_lib
from tfx import types
from tfx.components.evaluator import component as evaluator_component
from tfx.components.evaluator import executor as evaluator_executor
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_component_specs
from tfx_bsl.coders import batch_util  # noqa: F401  (defines the flag: _BYTE_SIZE_BATCHING)

from components import batched_metrics, evaluation_extractors
from components.served_model import is_served_baseline

# TFX reads `custom_extractors` from the module these name (tfx udf_utils).
_MODULE_KEYS = ("module_file", "module_path")
# tfx_bsl's flag (coders/batch_util.py), defined when tfx_bsl's batch_util is imported.
_BYTE_SIZE_BATCHING = "tfxio_use_byte_size_batching"


def drop_empty_baseline(
    input_dict: dict[str, list[types.Artifact]],
) -> dict[str, list[types.Artifact]]:
    baselines = [
        a
        for a in input_dict.get(standard_component_specs.BASELINE_MODEL_KEY, [])
        if is_served_baseline(a)
    ]
    result = {
        k: v for k, v in input_dict.items() if k != standard_component_specs.BASELINE_MODEL_KEY
    }
    if baselines:
        result[standard_component_specs.BASELINE_MODEL_KEY] = baselines
    return result


def batched_arguments(
    *,
    eval_shared_model: Any,
    eval_config: tfma.EvalConfig | None,
    extractors: list[Any] | None,
    **kwargs: Any,
) -> dict[str, Any]:
    """`tfma.ExtractEvaluateAndWriteResults`'s arguments, with batched metrics where they apply."""
    stages = [e.stage_name for e in extractors or []]
    models = eval_shared_model if isinstance(eval_shared_model, list) else [eval_shared_model]
    reason = "no eval_config" if eval_config is None else batched_metrics.unsupported(eval_config)
    if reason is None and evaluation_extractors.PRUNE_STAGE_NAME not in stages:
        reason = "a module's own extractors"
    if reason is None and any(
        m is not None and m.include_default_metrics and m.model_type == tfma.TF_KERAS
        for m in models
    ):  # TFMA adds a Keras model's compiled metrics (evaluator.py L816-823)
        reason = "a Keras model's own compiled metrics"
    if reason is not None:
        batched_metrics.log_fallback(reason)
    else:
        assert eval_config is not None and extractors is not None
        # The config TFMA gives its own evaluator (model names, baseline, defaults).
        config = model_eval_lib._update_eval_config_with_defaults(eval_config, eval_shared_model)
        at = stages.index(evaluation_extractors.PRUNE_STAGE_NAME)
        # Nothing reads unbatched extracts any more: the extractors end at the pruned batches.
        extractors = extractors[: at + 1]
        kwargs["evaluators"] = [batched_metrics.batched_evaluator(config, run_after=stages[at])]
    return {
        "eval_shared_model": eval_shared_model,
        "eval_config": eval_config,
        "extractors": extractors,
        **kwargs,
    }


class _TfmaWithBatchedMetrics:
    """The `tfma` module as TFX's executor sees it during `Do`: one call changed."""

    def __getattr__(self, name: str) -> Any:
        return getattr(tfma, name)

    @staticmethod
    def ExtractEvaluateAndWriteResults(**kwargs: Any) -> Any:
        return tfma.ExtractEvaluateAndWriteResults(**batched_arguments(**kwargs))


@contextlib.contextmanager
def batched_metrics_in_tfx() -> Iterator[None]:
    """TFX's executor module sees `_TfmaWithBatchedMetrics` as `tfma`, then TFMA again."""
    stock = evaluator_executor.tfma
    evaluator_executor.tfma = _TfmaWithBatchedMetrics()
    try:
        yield
    finally:
        evaluator_executor.tfma = stock


@contextlib.contextmanager
def byte_size_batches() -> Iterator[None]:
    """The examples are read in batches of up to 8,192 rows (20 MiB) while `Do` builds
    its Beam pipeline, instead of batches Beam tunes between 1 and 1,000 rows.

    TFX's executor reads the eval split through `tfxio.BeamSource()` with no batch
    size, so tfx_bsl lets `beam.BatchElements` tune it, capped at 1,000 rows
    (tfx_bsl 1.16, coders/batch_util.py L64-98); every batch then pays TFMA's
    fixed costs once per model (decoding, the model call, pruning, slicing). Its
    own flag `tfxio_use_byte_size_batching` switches to batches by size (its
    docstring: "Experimental"), read when the pipeline is built, so it holds on
    any runner. The metrics are sums per slice: the same whatever the batches
    (tests/test_batched_metrics.py). The flag counts only once absl's flags are
    parsed; a local run never parses them (TFX's entrypoint on Kubeflow does), so
    they are marked parsed, which leaves every other flag's value as it is.
    """
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    before = flags.FLAGS[_BYTE_SIZE_BATCHING].value
    flags.FLAGS[_BYTE_SIZE_BATCHING].value = True
    try:
        yield
    finally:
        flags.FLAGS[_BYTE_SIZE_BATCHING].value = before


class ServedBaselineExecutor(evaluator_executor.Executor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        if not any(exec_properties.get(k) for k in _MODULE_KEYS):
            exec_properties = {**exec_properties, "module_path": evaluation_extractors.__name__}
        with batched_metrics_in_tfx(), byte_size_batches():
            super().Do(drop_empty_baseline(input_dict), output_dict, exec_properties)


class Evaluator(evaluator_component.Evaluator):
    """`tfx.components.Evaluator` with `ServedBaselineExecutor`."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(ServedBaselineExecutor)
