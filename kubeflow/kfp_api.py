"""What `kubeflow.submit` and `kubeflow.release` share: reading a compiled package,
and connecting to the KFP API with its backend's release checked.

Runs in the current-KFP-SDK environment (kubeflow/reference/); nothing here
imports TFX, and kfp only inside `connect`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml

from kubeflow import backend
from kubeflow.compile import SCORES_ROOT_PARAMETER
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.object_store import ObjectStore, store_path
from kubeflow.step_ids import TUNE
from kubeflow.tfx_spec import all_tasks

# PyYAML's safe loader on libyaml's parser where PyYAML was built with it (its wheels
# are): the same documents, parsed in C; a compiled package is thousands of lines.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def package_spec(package: Path) -> dict:
    """The package's pipeline spec, its first YAML document."""
    return next(yaml.load_all(package.read_text(), Loader=SAFE_LOADER))


def is_scoring_package(spec: dict) -> bool:
    """The batch scoring package: the one whose runs take a `scores_root`."""
    parameters = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    return SCORES_ROOT_PARAMETER in parameters


def is_tuning_package(spec: dict) -> bool:
    """The tuning package (`python -m kubeflow.compile --tuning`): the one with the search."""
    return TUNE in all_tasks(spec)


def pipeline_root(
    spec: dict, override: str | None, object_store: ObjectStore | None, package: Path
) -> str:
    """The run's pipeline root: `override` (--pipeline-root), else the package's own."""
    if override is not None:
        return store_path(override, "--pipeline-root", object_store)
    root = spec.get("defaultPipelineRoot")
    if not isinstance(root, str) or not root:
        raise SettingsError(
            f"--package: {package} has no defaultPipelineRoot; compile it with "
            "python -m kubeflow.compile, or give --pipeline-root"
        )
    return root


def backend_release(client) -> str | None:
    """The API server's release tag, from its healthz endpoint; None where it says none.

    kfp.Client's own `get_kfp_healthz` reads the answer through the v2beta1
    model, which keeps `multi_user` only; the server also sends `tag_name`
    (its TAG_NAME), so the raw answer is read, through the client's session.
    """
    try:
        response = client._healthz_api.healthz_service_get_healthz(_preload_content=False)
        tag = json.loads(response.data).get("tag_name")
    except Exception:  # Any failure to read it is a warning, not an error.
        return None
    if not isinstance(tag, str) or backend.parse_release(tag) is None:
        return None
    return tag


# A bearer token for the KFP API, where its front door wants one (CI: a repository secret).
TOKEN_VARIABLE = "KFP_TOKEN"


def connect(host: str, namespace: str | None):
    """A kfp.Client for `host`, with the backend's release read: (client, tag), or None
    after printing why the backend is refused. Warnings go to stderr.

    Authentication is kfp's own (its IAP client-id variables, in-cluster service
    account tokens), or the bearer token in $KFP_TOKEN where that is set.
    """
    import kfp

    token = os.environ.get(TOKEN_VARIABLE) or None
    client = kfp.Client(host=host, namespace=namespace, existing_token=token)
    tag = backend_release(client)
    if tag is not None and (problem := backend.refusal(tag)):
        print(f"error: {problem}", file=sys.stderr)
        return None
    for warning in backend.warnings(tag):
        print(f"warning: {warning}", file=sys.stderr)
    return client, tag
