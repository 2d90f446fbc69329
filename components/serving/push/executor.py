"""The Pusher's work without TensorFlow: TFX 1.16's Pusher executor, ported, and what ours adds.

components/serving/push/component.py declares the step for TFX (local runs, TFX's compiler)
and its executor calls `push_model`; on Kubeflow the step's pod runs
`push_model` through kubeflow/light_step.py, without TFX's entrypoint,
TensorFlow or TFMA (docs/kubeflow.md, "What a step loads"). What TFX's
executor does is ported here, each rule citing its line (paths under
`site-packages/tfx/`, `components/pusher/executor.py` unless named), and
files on local paths and s3:// go through components/store_files.py.
tests/test_light_step.py runs TFX's own executor, ours under TFX's
entrypoint, and this function under the light runner on the same executor
inputs, and compares what they write.

What ours adds to TFX's push (components/serving/push/component.py's docstring says why):
the candidate already served is not pushed again (`already_served`), a retried
attempt records its own earlier push, and a push writes the training
statistics, the Evaluator's record and the push record into the version,
before `saved_model.pb`.

Port register: docs/ports.md
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from absl import logging
from google.protobuf import json_format
from tfx.proto import pusher_pb2

from components import store_files
from components.artifact_names import (
    ALREADY_SERVED_PROPERTY,
    BLESSED_PROPERTY,
    PUSHED_DESTINATION_PROPERTY,
    PUSHED_PROPERTY,
    PUSHED_VERSION_PROPERTY,
    STATISTICS_FILE,
    TRAINING_SPLIT,
)
from components.artifact_views import InputArtifact, OutputArtifact, split_uri
from components.serving.baseline.executor import SERVING_SUBDIR
from components.serving.served_version import newest_complete_version, served_version
from components.serving.serving_dir import (
    EVALUATED_FILE,
    PUSH_RECORD_FILE,
    SERVED_EVALUATION_FILE,
    TRAINING_STATISTICS_FILE,
    model_digest,
)

# The file TF Serving and `newest_complete_version` take as "this version is complete".
SAVED_MODEL_FILE = "saved_model.pb"
# Lines 202-203: the copy that leaves it out, by this pattern on each file's full path.
_SAVED_MODEL_PATTERN = r"saved_model\.pb"
# utils/path_utils.py, line 120: an estimator's export directory under Format-Serving.
_ESTIMATOR_EXPORT_DIR = "export"


def is_blessed(model_blessing: InputArtifact) -> bool:
    """components/util/model_utils.py, `is_model_blessed` (line 28): `blessed` read as TFX's
    `get_int_custom_property` reads it (types/artifact.py, lines 714-721: 0 when absent, a
    JSON number, as the entrypoint's inputs carry it, cut to an int) equals 1."""
    value = (
        model_blessing.get_custom_property(BLESSED_PROPERTY)
        if model_blessing.has_custom_property(BLESSED_PROPERTY)
        else None
    )
    return int(value or 0) == 1


def serving_model_path(model_uri: str) -> str:
    """utils/path_utils.py, `serving_model_path` (lines 117-131): `Format-Serving` under the
    Model artifact, or the one model of an estimator's `export/<exporter>/` under it. The
    `serving_model_dir` of an artifact older than TFX 0.29 (lines 100-104) is read only for
    one resolved from ML Metadata without that version (types/standard_artifact_utils.py,
    lines 48-69); the entrypoint's inputs have no state, and the Trainer that wrote ours is
    this TFX (components/artifact_views.py, `split_uri`, says the same of splits)."""
    model_dir = os.path.join(model_uri, SERVING_SUBDIR)
    export_dir = os.path.join(model_dir, _ESTIMATOR_EXPORT_DIR)
    if store_files.exists(export_dir):
        logging.warning("An estimator's export directory: %s", export_dir)  # Lines 122-126.
        return store_files.only_file_in(store_files.only_file_in(export_dir))
    return model_dir


def _holding(candidate_digest: str, serving_model_dir: str, version: str | None) -> str | None:
    """The directory of `version` when it holds the model whose digest is
    `candidate_digest`, or None (no such version, or another model)."""
    if version is None:
        return None
    path = os.path.join(serving_model_dir, version)
    return path if model_digest(path) == candidate_digest else None


def served_duplicate(
    model_path: str, serving_model_dir: str, rolled_out_record: str | None = None
) -> str | None:
    """The served version directory (served_version.py's answer) that holds exactly
    `model_path`, or None."""
    return _holding(
        model_digest(model_path),
        serving_model_dir,
        served_version(serving_model_dir, rolled_out_record),
    )


def pushed_by(served_path: str) -> str | None:
    """The output URI of the Pusher execution that wrote a served version, if it says."""
    path = os.path.join(served_path, PUSH_RECORD_FILE)
    if not store_files.exists(path):
        return None
    with store_files.open(path) as f:
        return json.load(f).get("pushed_model")


def pushed_extras(
    training_statistics: Any | None = None, evaluation: InputArtifact | None = None
) -> dict[str, str]:
    """What a push adds to the model: path in the version -> the file to copy there (the
    train split's statistics, as StatisticsGen wrote them, and the Evaluator's record where
    it wrote one)."""
    extras = {}
    if training_statistics is not None:
        extras[TRAINING_STATISTICS_FILE] = os.path.join(
            split_uri(training_statistics, TRAINING_SPLIT), STATISTICS_FILE
        )
    if evaluation is not None:
        record = os.path.join(evaluation.uri, EVALUATED_FILE)
        if store_files.exists(record):
            extras[SERVED_EVALUATION_FILE] = record
        else:
            logging.info("The evaluation has no %s: the next run scores this model again.", record)
    return extras


def model_version(filesystem: pusher_pb2.PushDestination.Filesystem) -> str:
    """Lines 183-190: AUTO is UNIX_TIMESTAMP, the push's second; any other is refused."""
    if filesystem.versioning in (pusher_pb2.Versioning.AUTO, pusher_pb2.Versioning.UNIX_TIMESTAMP):
        return str(int(time.time()))
    raise NotImplementedError(f"Invalid Versioning {filesystem.versioning}")


def mark_pushed(pushed_model: OutputArtifact, pushed_destination: str, pushed_version: str) -> None:
    """`_MarkPushed` (lines 222-230)."""
    pushed_model.set_int_custom_property(PUSHED_PROPERTY, 1)
    pushed_model.set_string_custom_property(PUSHED_DESTINATION_PROPERTY, pushed_destination)
    pushed_model.set_string_custom_property(PUSHED_VERSION_PROPERTY, pushed_version)


def write_version(model_path: str, serving_path: str, extras: dict[str, str], pushed: str) -> None:
    """The model copied into the new version, `saved_model.pb` last (lines 198-209: TF
    Serving and `newest_complete_version` take it for "this version is complete", so a push
    cut short leaves a version nobody serves). With `extras`, they and the push record (the
    execution's output URI `pushed`) are written before it."""
    store_files.copy_dir(model_path, serving_path, deny_regex_patterns=[_SAVED_MODEL_PATTERN])
    saved_model = os.path.join(model_path, SAVED_MODEL_FILE)
    if extras:
        for relative, source in extras.items():
            store_files.copy_file(source, os.path.join(serving_path, relative))
        store_files.write_text(
            os.path.join(serving_path, PUSH_RECORD_FILE), json.dumps({"pushed_model": pushed})
        )
        store_files.copy_file(saved_model, os.path.join(serving_path, SAVED_MODEL_FILE))
        logging.info("Model and %s written to %s.", ", ".join(sorted(extras)), serving_path)
        return
    if store_files.exists(saved_model):  # Lines 204-209.
        store_files.copy_file(saved_model, os.path.join(serving_path, SAVED_MODEL_FILE))
    logging.info("Model written to serving path %s.", serving_path)  # Line 210.


def push_model(
    push_destination: str,
    model: InputArtifact,
    pushed_model: OutputArtifact,
    model_blessing: InputArtifact | None = None,
    training_statistics: Any | None = None,
    evaluation: InputArtifact | None = None,
    rolled_out_record: str | None = None,
) -> None:
    """Pushes the blessed `model` to the filesystem destination `push_destination` (TFX's
    PushDestination as JSON) unless it is already served, and records what it did on
    `pushed_model` (`pushed`, `pushed_destination`, `pushed_version`, `already_served`).

    "Served" is served_version.py's answer: with `rolled_out_record` (the KServe
    rollout's record, on Kubeflow with `serving:`), the version it names."""
    # utils/proto_utils.py, `json_to_proto` (lines 74-76): unknown fields ignored.
    destination = json_format.Parse(
        push_destination, pusher_pb2.PushDestination(), ignore_unknown_fields=True
    )
    if model_blessing is None:  # Lines 97-100: TFX pushes, and warns.
        logging.warning("Pusher is going to push the model without validation.")
    elif not is_blessed(model_blessing):  # Lines 81-88 and 162-164, `_MarkNotPushed` 232-233.
        logging.info("Model on %s was not blessed by model validation", model_blessing.uri)
        pushed_model.set_int_custom_property(PUSHED_PROPERTY, 0)
        return
    model_path = serving_model_path(model.uri)  # Line 165 (`GetModelPath`, lines 119-124).
    kind = destination.WhichOneof("destination")
    if kind != "filesystem":  # Lines 180-181 and 211-213.
        raise NotImplementedError(f"Invalid push destination {kind}")
    base_directory = destination.filesystem.base_directory
    # Each digest reads every byte of a model: the candidate's is taken once.
    candidate = model_digest(model_path)
    served = served_version(base_directory, rolled_out_record or None)
    newest = newest_complete_version(base_directory)
    duplicate = _holding(candidate, base_directory, served)
    # The same model pushed and not (or not yet) taking traffic: by a run whose rollout
    # never happened (the newest version, not the served one), or by an earlier attempt
    # of this step (found by its push record; locally that version is also the served
    # one). It is this push: the Deploy step after it takes it to traffic, and no
    # second copy is written.
    pending = _holding(candidate, base_directory, newest) if newest != served else None
    pending_by = pushed_by(pending) if pending is not None else None
    if pending is None and duplicate is not None:
        pending_by = pushed_by(duplicate)
        pending = duplicate if pending_by == pushed_model.uri else None
    if pending is not None:
        if pending_by == pushed_model.uri:
            logging.info("An earlier attempt of this step pushed %s; recording it.", pending)
        else:
            logging.info(
                "%s holds the candidate, pushed by %s and not taking traffic; recording it "
                "as this push.",
                pending,
                pending_by or "an earlier run",
            )
        store_files.copy_dir(model_path, pushed_model.uri)
        mark_pushed(pushed_model, pending, os.path.basename(pending.rstrip("/")))
        return
    if duplicate is not None:
        logging.info("The candidate is already served at %s; not pushing.", duplicate)
        pushed_model.set_int_custom_property(PUSHED_PROPERTY, 0)
        pushed_model.set_string_custom_property(ALREADY_SERVED_PROPERTY, duplicate)
        return
    version = model_version(destination.filesystem)
    logging.info("Model version: %s", version)  # Line 190.
    serving_path = os.path.join(base_directory, version)  # Line 191.
    extras = pushed_extras(training_statistics, evaluation)
    if store_files.exists(serving_path):  # Lines 193-196.
        logging.info("Destination directory %s already exists, skipping this push.", serving_path)
    else:
        write_version(model_path, serving_path, extras, pushed_model.uri)
    store_files.copy_dir(model_path, pushed_model.uri)  # Line 216: the copy kept with the run.
    mark_pushed(pushed_model, serving_path, version)  # Lines 217-219.
    logging.info("Model pushed to %s.", pushed_model.uri)  # Line 220.
