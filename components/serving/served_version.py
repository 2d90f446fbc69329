"""Which served model a batch scoring run uses: the served version, or a pinned one.

The served version is, locally, the newest complete version under the
serving directory: "complete" is what `components.serving.baseline.component.
latest_served_version` says, the rule the Evaluator's baseline and the drift
gate already follow (a numeric version directory holding `saved_model.pb`,
which the Pusher writes last). With KServe (Kubeflow's Deploy step) it is the
version the rollout last rolled out, which the Deploy step records in
`rolled_out.json` under its storage root, beside the copies KServe serves
from: the newest pushed version may still be a canary, or be rejected.
A pinned version must be a complete one, and lie inside the serving
directory: scores name a version, and a version is only meaningful under the
directory the Pusher writes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from components import store_files
from components.serving.rollout_record import rolled_out_version
from components.serving.serving_dir import latest_served_version, model_digest
from contract.dataset.parse import parse_spec
from contract.dataset.spec import SPEC_ASSET, DatasetSpec


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


def choose_version(
    serving_model_dir: str, version: str | None = None, rolled_out: str | None = None
) -> ServedVersion:
    """`version` when given; else the version the record at `rolled_out` names (the
    Deploy step's, kubeflow/kserve/rollout.py) when one is given; else the newest
    complete version under `serving_model_dir`.

    ModelChoiceError when nothing is served or rolled out, when `version` is not
    a version number (a path, `..`), or when it is not a complete version there.
    """
    if version is None and rolled_out is not None:
        version = rolled_out_version(rolled_out)
        if version is None:
            raise ModelChoiceError(
                f"no model has been rolled out yet: {rolled_out} does not exist (the Deploy "
                "step writes it when a version takes the InferenceService's traffic); pin a "
                "version with the run's model_version parameter to score before that"
            )
        try:
            return choose_version(serving_model_dir, version)
        except ModelChoiceError as err:
            raise ModelChoiceError(f"{rolled_out} names the rolled-out version; {err}") from None
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
        if not store_files.exists(os.path.join(serving_model_dir, chosen, "saved_model.pb")):
            raise ModelChoiceError(
                f"model version {chosen}: {serving_model_dir} holds no complete version {chosen} "
                f"(the newest is {latest_served_version(serving_model_dir) or 'none'})"
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
