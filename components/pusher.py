"""TFX's Pusher, taught not to push the model that is already being served.

A rerun with nothing changed takes Transform and Trainer from cache, so its
candidate is the very model pushed last time; the Evaluator blesses it again
(it equals its baseline). The stock Pusher would then copy it into a new
version directory: a duplicate that TF Serving reloads for nothing. This
executor compares the candidate with the newest served version, file by file,
and records `pushed = 0` with `already_served = <path>` instead. Anything else
is the stock executor, including writing `saved_model.pb` last.
"""

from __future__ import annotations

import os
from typing import Any

from absl import logging
from tfx import types
from tfx.components.pusher import component as pusher_component
from tfx.components.pusher import executor as pusher_executor
from tfx.dsl.components.base import executor_spec
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from components.served_model import latest_served_version, model_digest

ALREADY_SERVED_PROPERTY = "already_served"
# What TFX's Pusher records on its PushedModel (its own names are private).
PUSHED_PROPERTY = "pushed"
PUSHED_DESTINATION_PROPERTY = "pushed_destination"


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
            duplicate = served_duplicate(
                self.GetModelPath(input_dict), destination.filesystem.base_directory
            )
            if duplicate is not None:
                logging.info("The candidate is already served at %s; not pushing.", duplicate)
                model_push = artifact_utils.get_single_instance(
                    output_dict[standard_component_specs.PUSHED_MODEL_KEY]
                )
                self._MarkNotPushed(model_push)
                model_push.set_string_custom_property(ALREADY_SERVED_PROPERTY, duplicate)
                return
        super().Do(input_dict, output_dict, exec_properties)


class Pusher(pusher_component.Pusher):
    """`tfx.components.Pusher` with `NoDuplicatePushExecutor`."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(NoDuplicatePushExecutor)
