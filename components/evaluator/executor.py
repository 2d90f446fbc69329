"""TFX's Evaluator, taught that an empty baseline means "no baseline".

`LatestServedModel` always emits a Model artifact (a step must produce its
outputs on Kubeflow); when nothing is served yet that artifact is marked
`has_model = 0`. This executor drops such a baseline before TFMA runs, so the
change threshold is skipped exactly as TFX does on a first run without a
blessed model.

It also hands TFX's `custom_extractors` hook the extractors of
components/evaluator/extractors.py (TFMA's, with each batch pruned before it
is unbatched), unless the Evaluator was given a module of its own, and has
components/evaluator/batched_metrics.py compute the metrics on those pruned batches
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

With a baseline, the baseline's metrics may come from the run that pushed it
(components/evaluator/record.py): when the served version's record says that
run evaluated this very model on these examples with this eval config, the
extractors are rebuilt for the candidate alone (the baseline is neither
loaded nor run), and the batched evaluator adds the recorded sums under the
baseline's keys before TFMA's diff and validation steps. Anything else, the
fallback to TFMA's evaluator included, scores both models. One log line and
the evaluation's `baseline_metrics` property say which happened, and why.

It reads the eval split in batches of up to 8,192 rows (`byte_size_batches`):
TFMA's costs are per batch, and Beam's tuning stops at 1,000 rows. With our
extractors, the read decodes only the columns TFMA looks up before the prune,
and TensorFlow reads the files a batch at a time (components/evaluator/reader.py).

Port register: docs/ports.md
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import tensorflow_model_analysis as tfma
from absl import flags, logging
from tensorflow_model_analysis.api import model_eval_lib
from tensorflow_model_analysis.utils import model_util
from tfx import types
from tfx.components.evaluator import executor as evaluator_executor
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import path_utils, proto_utils
from tfx_bsl.coders import batch_util  # noqa: F401  (defines the flag: _BYTE_SIZE_BATCHING)

from components.evaluator import batched_metrics
from components.evaluator import extractors as evaluation_extractors
from components.evaluator import reader as evaluation_reader
from components.evaluator import record as evaluation_record
from components.evaluator.record import COMPUTED, NO_BASELINE, REUSED
from components.serving.baseline.component import is_served_baseline
from components.serving.serving_dir import EVALUATED_FILE, model_digest, read_served_record

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


@dataclass
class EvaluationPlan:
    """What `ServedBaselineExecutor` hands `batched_arguments` for one evaluation.

    `record`: what this run evaluates (evaluation_record.record_of), written to
    `record_path` with the candidate's sums. `stored_sums`: the served baseline's
    recorded sums, when its record matches; else `why_scored` says why not.
    `outcome` (`REUSED`, `COMPUTED` + why, `NO_BASELINE`) and `batched` are set by
    `batched_arguments`. `columns_read`: the only columns the eval split's reader
    decodes (components/evaluator/reader.py), or None for all of them.
    """

    record: dict[str, Any]
    record_path: str
    has_baseline: bool
    columns_read: frozenset[str] | None = None
    stored_sums: list[dict[str, Any]] | None = None
    why_scored: str = ""
    outcome: str = NO_BASELINE
    batched: bool = False


def plan_evaluation(
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
) -> EvaluationPlan | None:
    """The record of this evaluation and whether the baseline's metrics can be reused;
    None where TFX's executor will not evaluate an eval config (it raises, or runs
    the legacy feature_slicing_spec path)."""
    evaluation = output_dict.get(standard_component_specs.EVALUATION_KEY)
    models = input_dict.get(standard_component_specs.MODEL_KEY)
    examples = input_dict.get(standard_component_specs.EXAMPLES_KEY)
    config_json = exec_properties.get(standard_component_specs.EVAL_CONFIG_KEY)
    if not (evaluation and models and examples and config_json):
        return None
    eval_config = proto_utils.json_to_proto(config_json, tfma.EvalConfig())
    splits = json.loads(
        exec_properties.get(standard_component_specs.EXAMPLE_SPLITS_KEY) or "null"
    ) or ["eval"]  # TFX's default (executor.py L222-227)
    schema = input_dict.get(standard_component_specs.SCHEMA_KEY)
    candidate_dir = _serving_dir(models[0])
    baselines = input_dict.get(standard_component_specs.BASELINE_MODEL_KEY) or []
    baseline_dir = _serving_dir(baselines[0]) if baselines else None
    record = evaluation_record.record_of(
        candidate_dir=candidate_dir,
        model_dirs=[candidate_dir] + ([baseline_dir] if baseline_dir else []),
        examples=examples,
        splits=splits,
        schema_uri=artifact_utils.get_single_uri(schema) if schema else None,
        exec_properties=exec_properties,
        eval_config=eval_config,
    )
    plan = EvaluationPlan(
        record=record,
        record_path=os.path.join(artifact_utils.get_single_uri(evaluation), EVALUATED_FILE),
        has_baseline=baseline_dir is not None,
    )
    if _uses_our_extractors(exec_properties):  # with a schema, TFX's reader stays
        plan.columns_read = evaluation_reader.columns_read(
            eval_config, [candidate_dir] + ([baseline_dir] if baseline_dir else [])
        )
    if baseline_dir is not None:
        served = baseline_dir
        stored = read_served_record(served)
        why = evaluation_record.why_not_reusable(stored, record, lambda: model_digest(served))
        if why is None and stored is not None:
            plan.stored_sums = stored["candidate_sums"]
        plan.why_scored = why or ""
    return plan


def _serving_dir(model: types.Artifact) -> str:
    return path_utils.serving_model_path(model.uri, path_utils.is_old_model_artifact(model))


def _candidate_only(
    config: tfma.EvalConfig,
    eval_shared_model: Any,
    tensor_adapter_config: Any,
) -> list[Any]:
    """Our extractors for the candidate alone, as TFMA builds them for a single model."""
    candidate_spec = next(s for s in config.model_specs if not s.is_baseline)
    candidate = next(m for m in eval_shared_model if m.model_name == candidate_spec.name)
    single = tfma.EvalConfig()
    single.CopyFrom(config)
    del single.model_specs[:]
    single.model_specs.add().CopyFrom(candidate_spec)
    single.model_specs[0].name = ""
    # The extractors read the model spec and the slices; TFMA refuses change thresholds
    # without a baseline (utils/config_util.py L126-131), and no metric is computed from here.
    del single.metrics_specs[:]
    return evaluation_extractors.custom_extractors(
        eval_shared_model=candidate._replace(model_name=""),
        eval_config=single,
        tensor_adapter_config=tensor_adapter_config,
    )


def batched_arguments(
    *,
    eval_shared_model: Any,
    eval_config: tfma.EvalConfig | None,
    extractors: list[Any] | None,
    plan: EvaluationPlan | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """`tfma.ExtractEvaluateAndWriteResults`'s arguments, with batched metrics where they
    apply, and the baseline's recorded sums where `plan` has them."""
    stages = [e.stage_name for e in extractors or []]
    models = eval_shared_model if isinstance(eval_shared_model, list) else [eval_shared_model]
    reason = "no eval_config" if eval_config is None else batched_metrics.unsupported(eval_config)
    if reason is None and evaluation_extractors.PRUNE_STAGE_NAME not in stages:
        reason = "a module's own extractors"
    if reason is None and any(
        m is not None and m.include_default_metrics and m.model_type == tfma.TF_KERAS
        for m in models
    ):  # TFMA adds a Keras model's compiled metrics (TFMA's evaluator.py L816-823)
        reason = "a Keras model's own compiled metrics"
    why_scored = plan.why_scored if plan else ""
    if reason is not None:
        batched_metrics.log_fallback(reason)
        why_scored = f"TFMA's evaluator scores both models ({reason})"
    else:
        assert eval_config is not None and extractors is not None
        # The config TFMA gives its own evaluator (model names, baseline, defaults).
        config = model_eval_lib._update_eval_config_with_defaults(eval_config, eval_shared_model)
        baseline = model_util.get_baseline_model_spec(config)
        baseline_sums = None
        if plan is not None and plan.stored_sums is not None and baseline is not None:
            keys = [m.key for m in batched_metrics.metrics_of(config)]
            try:
                baseline_sums = batched_metrics.stored_sums(
                    plan.stored_sums, [k for k in keys if k.model_name == baseline.name]
                )
            except ValueError as e:
                why_scored = str(e)
        if baseline_sums is not None:
            extractors = _candidate_only(
                config, eval_shared_model, kwargs.get("tensor_adapter_config")
            )
            stages = [e.stage_name for e in extractors]
        at = stages.index(evaluation_extractors.PRUNE_STAGE_NAME)
        # Nothing reads unbatched extracts any more: the extractors end at the pruned batches.
        extractors = extractors[: at + 1]
        if plan is not None:
            plan.batched = True
            plan.outcome = _outcome(plan, baseline_sums is not None, why_scored)
        kwargs["evaluators"] = [
            batched_metrics.batched_evaluator(
                config,
                run_after=stages[at],
                baseline_sums=baseline_sums,
                record=_with_outcome(plan),
                record_path=plan.record_path if plan else None,
            )
        ]
    if plan is not None and not plan.batched:
        plan.outcome = _outcome(plan, False, why_scored)
    if plan is not None and plan.has_baseline:
        logging.info(
            "Evaluator: baseline metrics %s",
            "reused from the run that pushed the baseline (same model, examples, eval config)"
            if plan.outcome == REUSED
            else plan.outcome,
        )
    return {
        "eval_shared_model": eval_shared_model,
        "eval_config": eval_config,
        "extractors": extractors,
        **kwargs,
    }


def _outcome(plan: EvaluationPlan, reused: bool, why_scored: str) -> str:
    if not plan.has_baseline:
        return NO_BASELINE
    return REUSED if reused else COMPUTED + why_scored


def _with_outcome(plan: EvaluationPlan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    return {**plan.record, evaluation_record.BASELINE_METRICS_PROPERTY: plan.outcome}


class _TfmaWithBatchedMetrics:
    """The `tfma` module as TFX's executor sees it during `Do`: one call changed."""

    def __init__(self, plan: EvaluationPlan | None = None):
        self.plan = plan

    def __getattr__(self, name: str) -> Any:
        return getattr(tfma, name)

    def ExtractEvaluateAndWriteResults(self, **kwargs: Any) -> Any:
        return tfma.ExtractEvaluateAndWriteResults(**batched_arguments(plan=self.plan, **kwargs))


@contextlib.contextmanager
def batched_metrics_in_tfx(plan: EvaluationPlan | None = None) -> Iterator[None]:
    """TFX's executor module sees `_TfmaWithBatchedMetrics` as `tfma`, then TFMA again."""
    stock = evaluator_executor.tfma
    evaluator_executor.tfma = _TfmaWithBatchedMetrics(plan)
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


def with_our_extractors(exec_properties: dict[str, Any]) -> dict[str, Any]:
    """The properties with components/evaluator/extractors.py as TFX's module, unless
    the Evaluator was given a module of its own."""
    if any(exec_properties.get(k) for k in _MODULE_KEYS):
        return exec_properties
    return {**exec_properties, "module_path": evaluation_extractors.__name__}


def _uses_our_extractors(exec_properties: dict[str, Any]) -> bool:
    return not exec_properties.get("module_file") and (
        exec_properties.get("module_path") == evaluation_extractors.__name__
    )


class ServedBaselineExecutor(evaluator_executor.Executor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        exec_properties = with_our_extractors(exec_properties)
        input_dict = drop_empty_baseline(input_dict)
        plan = plan_evaluation(input_dict, output_dict, exec_properties)
        columns = plan.columns_read if plan else None
        with (
            batched_metrics_in_tfx(plan),
            byte_size_batches(),
            evaluation_reader.columns_only_in_tfx(columns),
        ):
            super().Do(input_dict, output_dict, exec_properties)
        if plan is None:
            return
        if not plan.batched:  # no sums to record: what was evaluated, and how
            evaluation_record.write_record(plan.record_path, _with_outcome(plan) or {})
        evaluation = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.EVALUATION_KEY]
        )
        evaluation.set_string_custom_property(
            evaluation_record.BASELINE_METRICS_PROPERTY, plan.outcome
        )
