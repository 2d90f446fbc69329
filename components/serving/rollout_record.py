"""What the KServe rollout last rolled out, as the Deploy step records it on the object store.

The Deploy step (kubeflow/kserve/rollout.py) writes `rolled_out.json` under
its `storage_root`, beside the per-version copies KServe serves from, each
time it learns or changes what its InferenceService has rolled out; the
batch scorer on Kubeflow reads it to score with that version
(components/serving/served_version.py). It sits on the object store rather than
being read from the InferenceService because the scoring pod has the store's
credentials already, and no Kubernetes permissions (docs/batch-scoring.md).
"""

from __future__ import annotations

import json
import os

from components import store_files

ROLLED_OUT_FILE = "rolled_out.json"


def rolled_out_record(storage_root: str) -> str:
    """Where the Deploy step records what it rolled out: beside the versions it serves."""
    return f"{storage_root.rstrip('/')}/{ROLLED_OUT_FILE}"


def record_rolled_out(path: str, version: str | None, storage_uri: str, service: str) -> None:
    """Records `version` (at `storage_uri`) as what `service` rolled out; None: nothing.

    Written to a temporary name and renamed, so a reader never sees half a record.
    """
    # Written by the Deploy step only, which loads TensorFlow to check the model anyway.
    from tfx.dsl.io import fileio

    if version is None:
        if fileio.exists(path):
            fileio.remove(path)
        return
    record = {"version": version, "storage_uri": storage_uri, "inference_service": service}
    temporary = path + ".tmp"
    fileio.makedirs(os.path.dirname(path))
    with fileio.open(temporary, "w") as f:
        f.write(json.dumps(record, sort_keys=True))
    fileio.rename(temporary, path, overwrite=True)


def rolled_out_version(path: str) -> str | None:
    """The version the record at `path` says was rolled out; None when there is no record."""
    if not store_files.exists(path):
        return None
    with store_files.open(path, "r") as f:
        return str(json.loads(f.read())["version"])
