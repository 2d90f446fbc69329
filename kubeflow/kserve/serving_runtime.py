"""Which TF Serving serves a version: the runtime and the `runtimeVersion` the predictor pins.

KServe picks a runtime for `modelFormat: tensorflow` by priority when the
predictor names none, and its `kserve-tensorflow-serving` runtime runs the
image `tensorflow/serving:2.6.2` (kserve v0.15.0 and v0.17.0
config/runtimes/kustomization.yaml L19-21, kserve-tensorflow-serving.yaml).
TF Serving 2.6 cannot load what TF 2.16 exports: the graph holds ops it does
not have (`DisableCopyOnRead`, tensorflow/tensorflow#62229). So the predictor
names the runtime, and `runtimeVersion` (which replaces the image's tag:
kserve v0.15.0 pkg/controller/v1beta1/inferenceservice/utils/utils.go
L293-301) is a TF Serving release no older than the TensorFlow that exported
the model, read from the SavedModel itself.

KServe appends `-gpu` to the tag of a GPU predictor only when `runtimeVersion`
is unset (same file, L302-313), so a GPU predictor's version is written with
it here.
"""

from __future__ import annotations

import os
import re

SAVED_MODEL = "saved_model.pb"
DEFAULT_RUNTIME = "kserve-tensorflow-serving"
GPU_SUFFIX = "-gpu"
# tensorflow/serving's release tags from 2.6.0 (its git tags at 2.20.0,
# 2026-04-23; release candidates left out). There is no 2.15.0 or 2.16.0: the
# first releases of those lines are 2.15.1 and 2.16.1.
TF_SERVING_RELEASES = (
    "2.6.0", "2.6.1", "2.6.2", "2.6.3", "2.6.5", "2.7.0", "2.7.3", "2.7.4",
    "2.8.0", "2.8.2", "2.8.3", "2.8.4", "2.9.0", "2.9.1", "2.9.2", "2.9.3",
    "2.10.0", "2.10.1", "2.11.0", "2.11.1", "2.12.0", "2.12.1", "2.12.2",
    "2.13.0", "2.13.1", "2.14.0", "2.14.1", "2.15.1", "2.16.1", "2.17.0",
    "2.17.1", "2.18.0", "2.18.1", "2.19.0", "2.19.1", "2.20.0",
)  # fmt: skip
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


class RuntimeVersionError(ValueError):
    """No TF Serving release that loads the model is named or known; the message says which."""


def release(text: str) -> tuple[int, int, int]:
    """`2.16.2` (or `2.16.2-rc1`, `2.16.1-gpu`) as (2, 16, 2)."""
    match = _VERSION.match(text)
    if not match:
        raise RuntimeVersionError(f"{text!r} is not a version MAJOR.MINOR.PATCH")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch)


def exported_by(model_dir: str) -> str:
    """The TensorFlow version that wrote the SavedModel (its MetaGraph's `tensorflow_version`)."""
    from tensorflow.core.protobuf import saved_model_pb2
    from tfx.dsl.io import fileio

    saved_model = saved_model_pb2.SavedModel()
    with fileio.open(os.path.join(model_dir, SAVED_MODEL), "rb") as f:
        saved_model.ParseFromString(f.read())
    versions = {g.meta_info_def.tensorflow_version for g in saved_model.meta_graphs}
    versions.discard("")
    if not versions:
        raise RuntimeVersionError(
            f"{model_dir}/{SAVED_MODEL} does not say which TensorFlow wrote it: set "
            "serving.runtime_version to a TF Serving release that loads it"
        )
    return max(versions, key=release)


def check_runtime_version(version: str, exported: str, where: str) -> None:
    """Refuses a TF Serving older than the exporting TensorFlow, or a release that is not."""
    wanted = release(version)
    if wanted[:2] < release(exported)[:2]:
        raise RuntimeVersionError(
            f"{where}: TF Serving {version} is older than TensorFlow {exported}, which "
            "exported the model: it would not load it (ops it does not have); name "
            f"{exported.rsplit('.', 1)[0]}.x or later"
        )
    newest = release(TF_SERVING_RELEASES[-1])
    if wanted <= newest and version not in TF_SERVING_RELEASES:
        same_line = [r for r in TF_SERVING_RELEASES if release(r)[:2] == wanted[:2]]
        raise RuntimeVersionError(
            f"{where}: tensorflow/serving has no release {version!r}"
            + (f" (that line has {', '.join(same_line)})" if same_line else "")
        )


def runtime_version(configured: str | None, exported: str, gpu: bool) -> str:
    """The predictor's `runtimeVersion`: the configured one, checked, or the newest TF
    Serving release of the exporting TensorFlow's line; `-gpu` for a GPU predictor."""
    if configured:
        check_runtime_version(configured, exported, "serving.runtime_version")
        version = configured
    else:
        line = release(exported)[:2]
        same_line = [r for r in TF_SERVING_RELEASES if release(r)[:2] == line]
        if not same_line:
            raise RuntimeVersionError(
                f"serving.runtime_version: no TF Serving release is known for TensorFlow "
                f"{exported}, which exported the model; set it to a tensorflow/serving tag "
                f"no older than {line[0]}.{line[1]}"
            )
        version = same_line[-1]
    return version + GPU_SUFFIX if gpu else version
