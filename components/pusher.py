"""TFX's Pusher, taught not to push the model that is already being served, and to
keep the statistics of the data that trained each model it pushes.

A rerun with nothing changed takes Transform and Trainer from cache, so its
candidate is the very model pushed last time; the Evaluator blesses it again
(it equals its baseline). The stock Pusher would then copy it into a new
version directory: a duplicate that TF Serving reloads for nothing. This
executor compares the candidate with the newest served version, file by file,
and records `pushed = 0` with `already_served = <path>` instead.

Given `training_statistics` (StatisticsGen's output), a push writes the train
split's statistics into the new version at
`components.serving_dir.TRAINING_STATISTICS_FILE`, before `saved_model.pb`,
which TF Serving and `latest_served_version` take as "this version is
complete". The drift gate reads them back. The copy is the stock executor's,
otherwise unchanged.

Given `evaluation` (the Evaluator's output), a push also copies what that
Evaluator recorded (components/evaluation_record.py: what it evaluated and
the candidate's metric sums per slice) into the new version at
`components.served_model.SERVED_EVALUATION_FILE`, so that the next run's
Evaluator can take the baseline's metrics from it instead of scoring the
served model again.

A push also writes `components.served_model.PUSH_RECORD_FILE`, naming the
execution's own output URI. On Kubeflow a Pusher whose pod died after the
copy is run again (a retry, with the same output URI); it then finds the
served duplicate is its own earlier push and records that push, instead of
"already served by an earlier run", and never copies twice.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, ClassVar

from absl import logging
from tfx import types
from tfx.components.pusher import component as pusher_component
from tfx.components.pusher import executor as pusher_executor
from tfx.components.statistics_gen import stats_artifact_utils
from tfx.dsl.components.base import base_component, executor_spec
from tfx.dsl.io import fileio
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter
from tfx.utils import io_utils, proto_utils

from components.artifact_names import ALREADY_SERVED_PROPERTY, TRAINING_SPLIT
from components.serving_dir import (
    EVALUATED_FILE,
    PUSH_RECORD_FILE,
    SERVED_EVALUATION_FILE,
    TRAINING_STATISTICS_FILE,
    latest_served_version,
    model_digest,
)

TRAINING_STATISTICS_KEY = "training_statistics"
EVALUATION_KEY = standard_component_specs.EVALUATION_KEY


def served_duplicate(model_path: str, serving_model_dir: str) -> str | None:
    """The served version directory that holds exactly `model_path`, or None."""
    version = latest_served_version(serving_model_dir)
    if version is None:
        return None
    served_path = os.path.join(serving_model_dir, version)
    return served_path if model_digest(served_path) == model_digest(model_path) else None


class NoDuplicatePushExecutor(pusher_executor.Executor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        destination = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.PUSH_DESTINATION_KEY],
            pusher_pb2.PushDestination(),
        )
        if destination.WhichOneof("destination") == "filesystem" and self.CheckBlessing(input_dict):
            model_path = self.GetModelPath(input_dict)
            duplicate = served_duplicate(model_path, destination.filesystem.base_directory)
            model_push = artifact_utils.get_single_instance(
                output_dict[standard_component_specs.PUSHED_MODEL_KEY]
            )
            if duplicate is not None and pushed_by(duplicate) == model_push.uri:
                logging.info("An earlier attempt of this step pushed %s; recording it.", duplicate)
                io_utils.copy_dir(model_path, model_push.uri)
                self._MarkPushed(
                    model_push,
                    pushed_destination=duplicate,
                    pushed_version=os.path.basename(duplicate.rstrip("/")),
                )
                return
            if duplicate is not None:
                logging.info("The candidate is already served at %s; not pushing.", duplicate)
                self._MarkNotPushed(model_push)
                model_push.set_string_custom_property(ALREADY_SERVED_PROPERTY, duplicate)
                return
            extras = pushed_extras(input_dict)
            if extras:
                self._push_with_extras(input_dict, output_dict, destination, extras)
                return
        super().Do(input_dict, output_dict, exec_properties)

    def _push_with_extras(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        destination: pusher_pb2.PushDestination,
        extras: dict[str, str],
    ) -> None:
        """The stock filesystem push (UNIX-timestamp versions), with `extras` (path in
        the version -> file to copy there) and the push record written before
        `saved_model.pb`."""
        model_push = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.PUSHED_MODEL_KEY]
        )
        model_path = self.GetModelPath(input_dict)
        model_version = str(int(time.time()))
        serving_path = os.path.join(destination.filesystem.base_directory, model_version)
        if fileio.exists(serving_path):
            logging.info("Destination %s already exists, skipping this push.", serving_path)
        else:
            io_utils.copy_dir(model_path, serving_path, deny_regex_patterns=[r"saved_model\.pb"])
            for relative, source in extras.items():
                io_utils.copy_file(source, os.path.join(serving_path, relative))
            io_utils.write_string_file(
                os.path.join(serving_path, PUSH_RECORD_FILE),
                json.dumps({"pushed_model": model_push.uri}),
            )
            io_utils.copy_file(
                os.path.join(model_path, "saved_model.pb"),
                os.path.join(serving_path, "saved_model.pb"),
            )
            logging.info("Model and %s written to %s.", ", ".join(sorted(extras)), serving_path)
        io_utils.copy_dir(model_path, model_push.uri)
        self._MarkPushed(model_push, pushed_destination=serving_path, pushed_version=model_version)


def pushed_by(served_path: str) -> str | None:
    """The output URI of the Pusher execution that wrote a served version, if it says."""
    path = os.path.join(served_path, PUSH_RECORD_FILE)
    if not fileio.exists(path):
        return None
    with fileio.open(path) as f:
        return json.load(f).get("pushed_model")


def pushed_extras(input_dict: dict[str, list[types.Artifact]]) -> dict[str, str]:
    """What a push adds to the model: path in the version -> the file to copy there
    (the training statistics, and the Evaluator's record where it wrote one)."""
    extras = {}
    statistics = input_dict.get(TRAINING_STATISTICS_KEY)
    if statistics:
        extras[TRAINING_STATISTICS_FILE] = statistics_file(statistics[0])
    evaluation = input_dict.get(EVALUATION_KEY)
    if evaluation:
        record = os.path.join(evaluation[0].uri, EVALUATED_FILE)
        if fileio.exists(record):
            extras[SERVED_EVALUATION_FILE] = record
        else:
            logging.info("The evaluation has no %s: the next run scores this model again.", record)
    return extras


def statistics_file(statistics: types.Artifact) -> str:
    """The train split's statistics file in a StatisticsGen output."""
    return os.path.join(
        artifact_utils.get_split_uri([statistics], TRAINING_SPLIT),
        stats_artifact_utils.BINARY_PB_BASENAME,
    )


class PusherSpec(standard_component_specs.PusherSpec):
    INPUTS: ClassVar[dict[str, ChannelParameter]] = {
        **standard_component_specs.PusherSpec.INPUTS,
        TRAINING_STATISTICS_KEY: ChannelParameter(
            type=standard_artifacts.ExampleStatistics, optional=True
        ),
        EVALUATION_KEY: ChannelParameter(type=standard_artifacts.ModelEvaluation, optional=True),
    }


class Pusher(pusher_component.Pusher):
    """`tfx.components.Pusher` with `NoDuplicatePushExecutor`, `training_statistics` and
    `evaluation`."""

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
    ):
        spec = PusherSpec(
            model=model,
            model_blessing=model_blessing,
            push_destination=push_destination,
            training_statistics=training_statistics,
            evaluation=evaluation,
            pushed_model=types.Channel(type=standard_artifacts.PushedModel),
        )
        # pusher_component.Pusher.__init__ builds TFX's own spec; ours has two more inputs.
        base_component.BaseComponent.__init__(self, spec=spec)
