"""Which model is served: the one answer every step that reads the served model takes.

Two things can say what takes traffic, and this module is the one place that
knows which speaks where:

* **TF Serving's rule** (locally, and on Kubeflow without `serving:`): the
  newest complete version under the serving directory, a numeric version
  directory holding `saved_model.pb`, which the Pusher writes last and the
  Deploy step sets aside in a version it rejects (`newest_complete_version`).
* **The KServe rollout's record** (Kubeflow with `serving:`): `rolled_out.json`,
  which the Deploy step writes under its storage root each time it learns or
  changes what its InferenceService has rolled out
  (components/serving/rollout_record.py). The newest pushed version may still
  be a canary, or a version whose Deploy was interrupted before it took
  traffic; the record names the one that serves.

`served_version` gives that answer, and the Evaluator's baseline
(LatestServedModel), the drift gate, the Pusher's "already served" check and
batch scoring (`choose_version`, which may also pin a version) all read it;
each is handed the record's path where the DAG has one. A pinned version must
be a complete one, and lie inside the serving directory: scores name a version,
and a version is only meaningful under the directory the Pusher writes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from components import store_files
from components.serving.rollout_record import rolled_out_version
from components.serving.serving_dir import is_complete, model_digest
from contract.dataset.parse import parse_spec
from contract.dataset.spec import SPEC_ASSET, DatasetSpec


class ModelChoiceError(ValueError):
    """No served model to score with, or a version that cannot be used."""


def newest_complete_version(serving_model_dir: str) -> str | None:
    """The newest numeric version directory holding a complete SavedModel, or None:
    the version TF Serving loads, and the one the Pusher pushed last."""
    if not store_files.exists(serving_model_dir):
        return None
    versions = [
        int(name)
        for name in (entry.rstrip("/") for entry in store_files.listdir(serving_model_dir))
        if name.isdigit() and is_complete(os.path.join(serving_model_dir, name))
    ]
    return str(max(versions)) if versions else None


def served_version(serving_model_dir: str, rolled_out_record: str | None = None) -> str | None:
    """The version of ours that takes traffic, or None while none does.

    With `rolled_out_record` (the KServe rollout's record, on Kubeflow with
    `serving:`): the version it names, when the serving directory holds it
    complete; None before the first rollout, and when the InferenceService serves
    a model this pipeline did not push there (one it was created with, say): then
    no model of ours is served, as on a first run. Else the newest complete version
    (TF Serving's rule).
    """
    if not rolled_out_record:
        return newest_complete_version(serving_model_dir)
    version = rolled_out_version(rolled_out_record)
    if version is None or not is_complete(os.path.join(serving_model_dir, version)):
        return None
    return version


@dataclass(frozen=True)
class ServedVersion:
    """One served version: its number, its directory and the dataset spec it was trained on."""

    version: str
    path: str
    spec: DatasetSpec

    def digest(self) -> str:
        """The model's digest, as the Pusher compares versions (`serving_dir.model_digest`)."""
        return model_digest(self.path)


def choose_version(
    serving_model_dir: str, version: str | None = None, rolled_out: str | None = None
) -> ServedVersion:
    """`version` when given; else the served version (`served_version`, with the
    rollout's record at `rolled_out` where one is given).

    ModelChoiceError when nothing is served or rolled out, when `version` is not
    a version number (a path, `..`), or when it is not a complete version there.
    """
    if version is None:
        chosen = served_version(serving_model_dir, rolled_out)
        rolled = rolled_out_version(rolled_out) if rolled_out and chosen is None else None
        if rolled is not None:
            raise ModelChoiceError(
                f"{rolled_out} names the rolled-out version {rolled}, and {serving_model_dir} "
                f"holds no complete version {rolled} (the newest is "
                f"{newest_complete_version(serving_model_dir) or 'none'}): the "
                "InferenceService serves a model this pipeline did not push there; pin a "
                "version with the run's model_version parameter, or roll one of ours out"
            )
        if chosen is None and rolled_out:
            raise ModelChoiceError(
                f"no model has been rolled out yet: {rolled_out} does not exist (the Deploy "
                "step writes it when a version takes the InferenceService's traffic); pin a "
                "version with the run's model_version parameter to score before that"
            )
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
        if not is_complete(os.path.join(serving_model_dir, chosen)):
            raise ModelChoiceError(
                f"model version {chosen}: {serving_model_dir} holds no complete version {chosen} "
                f"(the newest is {newest_complete_version(serving_model_dir) or 'none'})"
            )
    path = os.path.join(serving_model_dir, chosen)
    return ServedVersion(version=chosen, path=path, spec=served_spec(path))


def served_spec(version_dir: str) -> DatasetSpec:
    """The dataset spec exported with the model (trainer/export.py's SPEC_ASSET)."""
    path = os.path.join(version_dir, SPEC_ASSET)
    if not store_files.exists(path):
        raise ModelChoiceError(
            f"{version_dir} has no {SPEC_ASSET}: it was not exported by this template's "
            "trainer, so its classes and task are unknown"
        )
    with store_files.open(path, "r") as f:
        return parse_spec(json.loads(f.read()))
