"""TFX's Evaluator, taught that an empty baseline means "no baseline".

`LatestServedModel` always emits a Model artifact (a step must produce its
outputs on Kubeflow); when nothing is served yet that artifact is marked
`has_model = 0`. This executor drops such a baseline before TFMA runs, so the
change threshold is skipped exactly as TFX does on a first run without a
blessed model.

It also hands TFX's `custom_extractors` hook the extractors of
components/evaluation_extractors.py (TFMA's, with each batch pruned before it
is unbatched), unless the Evaluator was given a module of its own. Everything
else is the stock executor.
"""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx.components.evaluator import component as evaluator_component
from tfx.components.evaluator import executor as evaluator_executor
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_component_specs

from components import evaluation_extractors
from components.served_model import is_served_baseline

# TFX reads `custom_extractors` from the module these name (tfx udf_utils).
_MODULE_KEYS = ("module_file", "module_path")


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


class ServedBaselineExecutor(evaluator_executor.Executor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        if not any(exec_properties.get(k) for k in _MODULE_KEYS):
            exec_properties = {**exec_properties, "module_path": evaluation_extractors.__name__}
        super().Do(drop_empty_baseline(input_dict), output_dict, exec_properties)


class Evaluator(evaluator_component.Evaluator):
    """`tfx.components.Evaluator` with `ServedBaselineExecutor`."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(ServedBaselineExecutor)
