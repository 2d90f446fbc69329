"""The baseline for the Evaluator: the model currently served.

TFX's `Resolver(LatestBlessedModelStrategy)` compiles, for Kubeflow, to a
resolver executor that open-source Kubeflow Pipelines v2 does not implement.
This component does the same job as an ordinary container step, locally and
on Kubeflow alike: it finds the newest version under the Pusher's serving
directory (the one TF Serving loads) and hands a copy to the Evaluator as a
Model artifact. With nothing served yet it emits an empty artifact marked
`has_model = 0`, which `components.evaluator.Evaluator` treats as "no
baseline" (so only absolute thresholds apply, as on a first run).

It reads state outside the pipeline, so it must never be served from cache:
its entry in pipeline/steps.py says `cached=False`, and both runners switch
caching off for it.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

import hashlib
import json
import os
from typing import Any

from absl import logging
from tfx import types
from tfx.dsl.component.experimental.annotations import (
    InputArtifact,
    OutputArtifact,
    Parameter,
)
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts
from tfx.utils import io_utils

from components.artifact_names import HAS_MODEL_PROPERTY, SERVED_PATH_PROPERTY

SERVED_VERSION_PROPERTY = "served_version"
# Where the Evaluator looks for a SavedModel inside a Model artifact.
SERVING_SUBDIR = "Format-Serving"
# Inside a served version: the statistics of the data that trained it (the
# train split's TFDV statistics, as StatisticsGen wrote them). The Pusher
# writes them with the model, so they are there exactly when the model is;
# TF Serving ignores assets.extra/. The drift gate compares new data to them.
TRAINING_STATISTICS_FILE = "assets.extra/training_statistics/FeatureStats.pb"
# Inside a served version: which Pusher execution wrote it (its output URI,
# unique per execution). A retried Pusher finds its own earlier push by it.
PUSH_RECORD_FILE = "assets.extra/push.json"
# Beside the Evaluator's output (TFMA reads only the files it wrote there): what
# it evaluated, and the candidate's metric sums per slice
# (components/evaluation_record.py). The Pusher copies it into the version it
# pushes, where a later Evaluator with the same examples and eval config reuses
# it for its baseline.
EVALUATED_FILE = "evaluated.json"
SERVED_EVALUATION_FILE = "assets.extra/evaluation.json"
# What the Pusher adds to the model it copies; not part of the model.
PUSHER_FILES = (TRAINING_STATISTICS_FILE, PUSH_RECORD_FILE, SERVED_EVALUATION_FILE)


def latest_served_version(serving_model_dir: str) -> "str | None":
    """Newest numeric version directory holding a complete SavedModel, or None.

    TF Serving loads the highest version number; the Pusher writes
    saved_model.pb last, so a version without it is still being copied.
    """
    if not fileio.exists(serving_model_dir):
        return None
    versions = []
    for name in fileio.listdir(serving_model_dir):
        name = name.rstrip("/")
        if name.isdigit() and fileio.exists(
            os.path.join(serving_model_dir, name, "saved_model.pb")
        ):
            versions.append(int(name))
    return str(max(versions)) if versions else None


def served_statistics(serving_model_dir: str) -> "tuple[str, str | None] | None":
    """(newest served version, its training statistics file or None), or None if none is served.

    None for the file: the version was pushed before the Pusher kept statistics.
    """
    version = latest_served_version(serving_model_dir)
    if version is None:
        return None
    path = os.path.join(serving_model_dir, version, TRAINING_STATISTICS_FILE)
    return version, path if fileio.exists(path) else None


def read_served_record(baseline_dir: str) -> "dict[str, Any] | None":
    """The record a served version (copied into `baseline_dir`) holds, or None."""
    path = os.path.join(baseline_dir, SERVED_EVALUATION_FILE)
    if not fileio.exists(path):
        return None
    with fileio.open(path) as f:
        try:
            loaded = json.load(f)
        except ValueError:
            return {}  # unreadable: "another format"
    return loaded if isinstance(loaded, dict) else {}


def add_directory(digest: "hashlib._Hash", directory: str, skip: "tuple[str, ...]" = ()) -> None:
    """Adds every file under `directory` to `digest`: its relative path and bytes, in
    sorted order; files whose relative path is in `skip` are left out."""
    for root, _dirs, files in sorted(fileio.walk(directory)):
        for name in sorted(files):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory)
            if relative in skip:
                continue
            digest.update(relative.encode() + b"\0")
            with fileio.open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
            digest.update(b"\0")


def model_digest(model_dir: str) -> str:
    """SHA-256 over a SavedModel directory: every file's relative path and bytes.

    Two directories with equal digests serve the same model; the Pusher uses
    this to avoid pushing the model that is already being served, and the
    Evaluator to know its baseline is the model a record evaluated. What the
    Pusher adds to a served version (PUSHER_FILES) is not part of the model.
    """
    digest = hashlib.sha256()
    add_directory(digest, model_dir, skip=PUSHER_FILES)
    return digest.hexdigest()


def is_served_baseline(artifact: types.Artifact) -> bool:
    """False only for the empty artifact LatestServedModel emits when nothing is served."""
    return (
        not artifact.has_custom_property(HAS_MODEL_PROPERTY)
        or artifact.get_int_custom_property(HAS_MODEL_PROPERTY) == 1
    )


@component
def LatestServedModel(
    candidate_model: InputArtifact[standard_artifacts.Model],
    baseline_model: OutputArtifact[standard_artifacts.Model],
    serving_model_dir: Parameter[str],
):
    """Copies the newest served model into `baseline_model`, or marks it empty."""
    del candidate_model  # Only orders this step after Trainer; see the module docstring.
    version = latest_served_version(serving_model_dir)
    if version is None:
        logging.info("Nothing served under %s yet: no baseline.", serving_model_dir)
        baseline_model.set_int_custom_property(HAS_MODEL_PROPERTY, 0)
        return
    served_path = os.path.join(serving_model_dir, version)
    io_utils.copy_dir(served_path, os.path.join(baseline_model.uri, SERVING_SUBDIR))
    baseline_model.set_int_custom_property(HAS_MODEL_PROPERTY, 1)
    baseline_model.set_string_custom_property(SERVED_VERSION_PROPERTY, version)
    baseline_model.set_string_custom_property(SERVED_PATH_PROPERTY, served_path)
    logging.info("Baseline: served version %s (%s).", version, served_path)


def signature_defs(model_dir: str) -> "dict[str, Any]":
    """The SavedModel's signatures (SignatureDef protos by name), read from
    `saved_model.pb`, internal ones (`__saved_model_init_op`) left out; none when
    the file is gone (a version Kubeflow's Deploy step rolled back and set aside)."""
    from tensorflow.core.protobuf import saved_model_pb2

    path = os.path.join(model_dir, "saved_model.pb")
    if not fileio.exists(path):
        return {}
    saved_model = saved_model_pb2.SavedModel()
    with fileio.open(path, "rb") as f:
        saved_model.ParseFromString(f.read())
    return {
        name: signature
        for meta_graph in saved_model.meta_graphs
        for name, signature in meta_graph.signature_def.items()
        if not name.startswith("__")
    }


def serving_signatures(model_dir: str) -> "tuple[tuple[str, tuple[str, ...]], ...]":
    """The SavedModel's signatures and their input names (`signature_defs`)."""
    return tuple(
        sorted(
            (name, tuple(sorted(signature.inputs)))
            for name, signature in signature_defs(model_dir).items()
        )
    )


def describe_signatures(signatures: "tuple[tuple[str, tuple[str, ...]], ...]") -> str:
    """`serving_default(examples), serving_json(15 named inputs)`: for a summary line."""
    return ", ".join(
        f"{name}({inputs[0] if len(inputs) == 1 else f'{len(inputs)} named inputs'})"
        for name, inputs in signatures
    )
