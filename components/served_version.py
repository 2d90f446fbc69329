"""Which served model a batch scoring run uses: the newest complete version, or a pinned one.

"Complete" is what `components.served_model.latest_served_version` says, the
rule the Evaluator's baseline and the drift gate already follow: a numeric
version directory holding `saved_model.pb`, which the Pusher writes last.
A pinned version must be one of those, and lie inside the serving directory:
scores name a version, and a version is only meaningful under the directory
the Pusher writes (on Kubeflow, the one KServe rolls out).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from tfx.dsl.io import fileio

from components.served_model import latest_served_version, model_digest
from trainer.dataset_spec import DatasetSpec, parse_spec
from trainer.export import SPEC_ASSET


class ModelChoiceError(ValueError):
    """No served model to score with, or a version that cannot be used."""


@dataclass(frozen=True)
class ServedVersion:
    """One served version: its number, its directory and the dataset spec it was trained on."""

    version: str
    path: str
    spec: DatasetSpec

    def digest(self) -> str:
        """The model's digest, as the Pusher compares versions (`served_model.model_digest`)."""
        return model_digest(self.path)


def choose_version(serving_model_dir: str, version: str | None = None) -> ServedVersion:
    """The newest complete version under `serving_model_dir`, or `version` when given.

    ModelChoiceError when nothing is served, when `version` is not a version
    number (a path, `..`), or when it is not a complete version there.
    """
    if version is None:
        chosen = latest_served_version(serving_model_dir)
        if chosen is None:
            raise ModelChoiceError(
                f"no model is served under {serving_model_dir} (no numeric version directory "
                "with saved_model.pb): run the training pipeline first, or pass the serving "
                "directory it pushed to"
            )
    else:
        chosen = str(version).strip()
        if not chosen.isdigit():
            raise ModelChoiceError(
                f"model version {version!r}: a version is a directory number under the "
                f"serving directory {serving_model_dir}; a model from elsewhere is refused"
            )
        if not fileio.exists(os.path.join(serving_model_dir, chosen, "saved_model.pb")):
            raise ModelChoiceError(
                f"model version {chosen}: {serving_model_dir} holds no complete version {chosen} "
                f"(the newest is {latest_served_version(serving_model_dir) or 'none'})"
            )
    path = os.path.join(serving_model_dir, chosen)
    return ServedVersion(version=chosen, path=path, spec=served_spec(path))


def served_spec(version_dir: str) -> DatasetSpec:
    """The dataset spec exported with the model (trainer/export.py's SPEC_ASSET)."""
    path = os.path.join(version_dir, SPEC_ASSET)
    if not fileio.exists(path):
        raise ModelChoiceError(
            f"{version_dir} has no {SPEC_ASSET}: it was not exported by this template's "
            "trainer, so its classes and task are unknown"
        )
    with fileio.open(path, "r") as f:
        return parse_spec(json.loads(f.read()))
