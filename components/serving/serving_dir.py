"""What a serving directory holds, read without TensorFlow: the files the Pusher adds to
each version, whether a version is complete, and a model's digest.

Which version is served is components/serving/served_version.py's answer. The
steps that write a serving directory (the Pusher) and read it (LatestServedModel,
the Evaluator's baseline, the drift gate, the batch scorer) share these with the
reports and the light ScoringReport step, which load no TFX (docs/kubeflow.md,
"What a step loads").
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from components import store_files

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
# (components/evaluator/record.py). The Pusher copies it into the version it
# pushes, where a later Evaluator with the same examples and eval config reuses
# it for its baseline.
EVALUATED_FILE = "evaluated.json"
SERVED_EVALUATION_FILE = "assets.extra/evaluation.json"
# What the Pusher adds to the model it copies; not part of the model.
PUSHER_FILES = (TRAINING_STATISTICS_FILE, PUSH_RECORD_FILE, SERVED_EVALUATION_FILE)


def training_statistics_file(version_dir: str) -> str | None:
    """The training statistics a served version carries, or None: it was pushed before
    the Pusher kept them."""
    path = os.path.join(version_dir, TRAINING_STATISTICS_FILE)
    return path if store_files.exists(path) else None


def is_complete(version_dir: str) -> bool:
    """Whether a version directory holds a whole SavedModel: the Pusher writes
    `saved_model.pb` last, and the Deploy step sets it aside in a version it rejects."""
    return store_files.exists(os.path.join(version_dir, "saved_model.pb"))


def read_served_record(baseline_dir: str) -> dict[str, Any] | None:
    """The record a served version (copied into `baseline_dir`) holds, or None."""
    path = os.path.join(baseline_dir, SERVED_EVALUATION_FILE)
    if not store_files.exists(path):
        return None
    with store_files.open(path) as f:
        try:
            loaded = json.load(f)
        except ValueError:
            return {}  # unreadable: "another format"
    return loaded if isinstance(loaded, dict) else {}


def add_directory(digest: hashlib._Hash, directory: str, skip: tuple[str, ...] = ()) -> None:
    """Adds every file under `directory` to `digest`: its relative path and bytes, in
    sorted order; files whose relative path is in `skip` are left out."""
    for root, _dirs, files in sorted(store_files.walk(directory)):
        for name in sorted(files):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory)
            if relative in skip:
                continue
            digest.update(relative.encode() + b"\0")
            with store_files.open(path, "rb") as f:
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


# tensorflow/core/protobuf/saved_model.proto (TF 2.16): `message SavedModel { int64
# saved_model_schema_version = 1; repeated MetaGraphDef meta_graphs = 2; }`. Its module is
# inside TensorFlow's package; tensorboard's copy of meta_graph.proto (tensorboard/compat/
# proto/meta_graph.proto, TF's field numbers, protobuf alone) gives the MetaGraphDef.
_SAVED_MODEL_PROTO = "components/serving_dir/saved_model.proto"
_SAVED_MODEL_PACKAGE = "components.serving.serving_dir"


def _saved_model_class():
    """TensorFlow's SavedModel message, built on tensorboard's MetaGraphDef (once)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from tensorboard.compat.proto import meta_graph_pb2

    pool = descriptor_pool.Default()
    name = f"{_SAVED_MODEL_PACKAGE}.SavedModel"
    factory = message_factory.MessageFactory(pool)
    try:
        return factory.GetPrototype(pool.FindMessageTypeByName(name))
    except KeyError:
        pass
    file = descriptor_pb2.FileDescriptorProto(
        name=_SAVED_MODEL_PROTO,
        package=_SAVED_MODEL_PACKAGE,
        dependency=[meta_graph_pb2.DESCRIPTOR.name],
        syntax="proto3",
    )
    message = file.message_type.add(name="SavedModel")
    field = descriptor_pb2.FieldDescriptorProto
    message.field.add(
        name="saved_model_schema_version", number=1, type=field.TYPE_INT64,
        label=field.LABEL_OPTIONAL,
    )  # fmt: skip
    message.field.add(
        name="meta_graphs", number=2, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED,
        type_name=f".{meta_graph_pb2.MetaGraphDef.DESCRIPTOR.full_name}",
    )  # fmt: skip
    pool.Add(file)
    return factory.GetPrototype(pool.FindMessageTypeByName(name))


def serving_signatures(model_dir: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The SavedModel's signatures and their input names, read from `saved_model.pb`
    without TensorFlow; internal ones (`__saved_model_init_op`) left out, none when the
    file is gone (a version Kubeflow's Deploy step rolled back and set aside)."""
    path = os.path.join(model_dir, "saved_model.pb")
    if not store_files.exists(path):
        return ()
    with store_files.open(path, "rb") as f:
        saved_model = _saved_model_class().FromString(f.read())
    return tuple(
        sorted(
            (name, tuple(sorted(signature.inputs)))
            for meta_graph in saved_model.meta_graphs
            for name, signature in meta_graph.signature_def.items()
            if not name.startswith("__")
        )
    )


def describe_signatures(signatures: tuple[tuple[str, tuple[str, ...]], ...]) -> str:
    """`serving_default(examples), serving_json(15 named inputs)`: for a summary line."""
    return ", ".join(
        f"{name}({inputs[0] if len(inputs) == 1 else f'{len(inputs)} named inputs'})"
        for name, inputs in signatures
    )
