"""TFX's Pusher, taught not to push the model that is already being served, and to
keep the statistics of the data that trained each model it pushes.

A rerun with nothing changed takes Transform and Trainer from cache, so its
candidate is the very model pushed last time; the Evaluator blesses it again
(it equals its baseline). The stock Pusher would then copy it into a new
version directory: a duplicate that TF Serving reloads for nothing. This
executor compares the candidate with the served version (components/serving/
served_version.py's answer), file by file, and records `pushed = 0` with
`already_served = <path>` instead. A newest version holding the candidate that is
not the served one (its rollout never happened) is recorded as this push, so
that the Deploy step after it takes it to traffic.

Given `training_statistics` (StatisticsGen's output), a push writes the train
split's statistics into the new version at
`components.serving.serving_dir.TRAINING_STATISTICS_FILE`, before `saved_model.pb`,
which TF Serving and `newest_complete_version` take as "this version is
complete". The drift gate reads them back. The copy is the stock executor's
(ported), otherwise unchanged.

Given `evaluation` (the Evaluator's output), a push also copies what that
Evaluator recorded (components/evaluator/record.py: what it evaluated and
the candidate's metric sums per slice) into the new version at
`components.serving.serving_dir.SERVED_EVALUATION_FILE`, so that the next run's
Evaluator can take the baseline's metrics from it instead of scoring the
served model again.

A push also writes `components.serving.serving_dir.PUSH_RECORD_FILE`, naming the
execution's own output URI. On Kubeflow a Pusher whose pod died after the
copy is run again (a retry, with the same output URI); it then finds the
version holding the candidate is its own earlier push and records that push, instead of
"already served by an earlier run", and never copies twice.

The work is components/serving/push/executor.py's (TFX's Pusher executor ported, and the
above), which the step's pod on Kubeflow runs without TFX, TensorFlow or TFMA
(kubeflow/light_step.py); this module declares the component for TFX.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tfx import types
from tfx.components.pusher import component as pusher_component
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ExecutionParameter

from components.serving.push.executor import push_model

TRAINING_STATISTICS_KEY = "training_statistics"
EVALUATION_KEY = standard_component_specs.EVALUATION_KEY
# The KServe rollout's record of the served version (Kubeflow with `serving:`).
ROLLED_OUT_RECORD_KEY = "rolled_out_record"


def _only(artifacts: list[types.Artifact] | None) -> types.Artifact | None:
    """An optional input's one artifact, or None when the step was given none."""
    return artifact_utils.get_single_instance(artifacts) if artifacts else None


class NoDuplicatePushExecutor(base_executor.BaseExecutor):
    """The Pusher's executor: components/serving/push/executor.py's `push_model`,
    which the step's pod on Kubeflow runs without TFX (kubeflow/light_step.py)."""

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        push_model(
            exec_properties[standard_component_specs.PUSH_DESTINATION_KEY],
            model=artifact_utils.get_single_instance(
                input_dict[standard_component_specs.MODEL_KEY]
            ),
            pushed_model=artifact_utils.get_single_instance(
                output_dict[standard_component_specs.PUSHED_MODEL_KEY]
            ),
            model_blessing=_only(input_dict.get(standard_component_specs.MODEL_BLESSING_KEY)),
            training_statistics=_only(input_dict.get(TRAINING_STATISTICS_KEY)),
            evaluation=_only(input_dict.get(EVALUATION_KEY)),
            rolled_out_record=exec_properties.get(ROLLED_OUT_RECORD_KEY) or None,
        )


class PusherSpec(standard_component_specs.PusherSpec):
    INPUTS: ClassVar[dict[str, ChannelParameter]] = {
        **standard_component_specs.PusherSpec.INPUTS,
        TRAINING_STATISTICS_KEY: ChannelParameter(
            type=standard_artifacts.ExampleStatistics, optional=True
        ),
        EVALUATION_KEY: ChannelParameter(type=standard_artifacts.ModelEvaluation, optional=True),
    }
    PARAMETERS: ClassVar[dict[str, ExecutionParameter]] = {
        **standard_component_specs.PusherSpec.PARAMETERS,
        ROLLED_OUT_RECORD_KEY: ExecutionParameter(type=str, optional=True),
    }


class Pusher(pusher_component.Pusher):
    """`tfx.components.Pusher` with `NoDuplicatePushExecutor`, `training_statistics`,
    `evaluation`, and `rolled_out_record` (the KServe rollout's record of the served version,
    where the DAG has one)."""

    SPEC_CLASS = PusherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(NoDuplicatePushExecutor)

    def __init__(
        self,
        *,
        model: types.BaseChannel,
        model_blessing: types.BaseChannel,
        push_destination: pusher_pb2.PushDestination,
        training_statistics: types.BaseChannel | None = None,
        evaluation: types.BaseChannel | None = None,
        rolled_out_record: str | None = None,
    ):
        spec = PusherSpec(
            model=model,
            model_blessing=model_blessing,
            push_destination=push_destination,
            training_statistics=training_statistics,
            evaluation=evaluation,
            rolled_out_record=rolled_out_record,
            pushed_model=types.Channel(type=standard_artifacts.PushedModel),
        )
        # pusher_component.Pusher.__init__ builds TFX's own spec; ours has two more inputs
        # and a parameter.
        base_component.BaseComponent.__init__(self, spec=spec)
