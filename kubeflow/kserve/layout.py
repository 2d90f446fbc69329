"""Where a version is served from: a base path of its own, `<storage_root>/<version>/`.

TF Serving (KServe's `tensorflow` runtime) loads a model base path that holds
numbered version directories, and serves the highest; KServe's storage
initializer copies everything under `storageUri` into the pod. So:

* `storageUri` = the Pusher's `serving_model_dir` would copy every version
  ever pushed into every pod, and serve the newest: a revision rolled back to
  would load the newest model again as soon as its pod restarts;
* `storageUri` = `serving_model_dir/<version>` holds the SavedModel itself,
  with no numbered directory: TF Serving finds "no versions of servable"
  (kserve/kserve#4264, #4269).

The Deploy step copies the pushed version to `<storage_root>/<version>/<version>/`
and serves `<storage_root>/<version>`: exactly one version per revision, and a
revision's model never changes under it, so a rollback is real. `saved_model.pb`
is copied last, so a copy cut short is never taken for a version (and is
completed by the next attempt).
"""

from __future__ import annotations

import os

from tfx.dsl.io import fileio
from tfx.utils import io_utils

SAVED_MODEL = "saved_model.pb"


def base_path(storage_root: str, version: str) -> str:
    return f"{storage_root.rstrip('/')}/{version}"


def publish_version(pushed_dir: str, storage_root: str, version: str) -> str:
    """Copies the pushed version to its own base path; returns the base path (the storageUri)."""
    base = base_path(storage_root, version)
    target = f"{base}/{version}"
    if not fileio.exists(os.path.join(target, SAVED_MODEL)):
        io_utils.copy_dir(pushed_dir, target, deny_regex_patterns=[r"saved_model\.pb"])
        io_utils.copy_file(os.path.join(pushed_dir, SAVED_MODEL), os.path.join(target, SAVED_MODEL))
    return base
