"""What `kubeflow.submit` and `kubeflow.release` share: reading a compiled package,
and connecting to the KFP API with its backend's release checked.

Runs in the current-KFP-SDK environment (kubeflow/kfp_sdk/); nothing here
imports TFX, and kfp only inside `connect`.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubeflow import backend
from kubeflow.run_parameters import SCORES_ROOT_PARAMETER
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


@dataclass(frozen=True)
class Connection:
    """A kfp.Client and what its server said of itself (healthz): its release tag
    (None where it says none) and whether it runs in multi-user mode. `namespace`
    is the profile namespace every call is made in; None on a single-user server."""

    client: Any
    tag: str | None
    multi_user: bool
    namespace: str | None


def healthz(client) -> tuple[str | None, bool]:
    """The API server's release tag and multi-user flag, from its healthz endpoint
    (backend/src/apiserver/server/healthz_server.go 2.16.1: `tag_name` is its
    TAG_NAME, `multi_user` its MULTIUSER). kfp.Client's own `get_kfp_healthz`
    reads the answer through the v2beta1 model, which drops `tag_name`, so the
    raw answer is read, through the client's session. A tag that cannot be read is
    a warning (None); the mode cannot be guessed, so a failure to read it is raised."""
    response = client._healthz_api.healthz_service_get_healthz(_preload_content=False)
    answer = json.loads(response.data)
    tag = answer.get("tag_name")
    if not isinstance(tag, str) or backend.parse_release(tag) is None:
        tag = None
    return tag, bool(answer.get("multi_user"))


# A bearer token for the KFP API, where its front door wants one (CI: a repository secret).
TOKEN_VARIABLE = "KFP_TOKEN"
# Or a file holding it, read at each start (a projected ServiceAccount token rotates).
TOKEN_FILE_VARIABLE = "KFP_TOKEN_FILE"


def bearer_token() -> str | None:
    token = os.environ.get(TOKEN_VARIABLE) or None
    path = os.environ.get(TOKEN_FILE_VARIABLE)
    if token is None and path:
        try:
            token = Path(path).read_text().strip() or None
        except OSError as err:
            raise SettingsError(
                f"${TOKEN_FILE_VARIABLE}: {path} cannot be read ({err.strerror})"
            ) from None
    return token


def api_refusal(err: Exception) -> str:
    """A KFP API error in one line: its status and the server's own message."""
    status = getattr(err, "status", None)
    if status is None:
        return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    message = ""
    try:
        body = json.loads(getattr(err, "body", "") or "{}")
        message = body.get("error") or body.get("message") or ""
    except (ValueError, AttributeError):
        message = str(getattr(err, "body", "") or "")
    reason = getattr(err, "reason", "") or ""
    return f"the KFP API answered {status} {reason}: {' '.join(str(message).split())[:300]}"


def connect(host: str, namespace: str | None) -> Connection | None:
    """A kfp.Client for `host` with the server's release and mode read, or None after
    printing why it is refused. Warnings go to stderr.

    A multi-user server (the Kubeflow platform) refuses experiments, runs and
    recurring runs without a namespace ("An experiment cannot have an empty
    namespace in multi-user mode", experiment_server.go 2.16.1 L356-358), after a
    release would already have uploaded: so no namespace there is refused here,
    before any change. A single-user server drops any namespace it is given
    (resource_manager.go 2.16.1 L2088-2094): it is dropped here too, with a warning.

    Authentication: the bearer token in $KFP_TOKEN or the file $KFP_TOKEN_FILE names
    (a Dex token through the platform's gateway, a ServiceAccount token where an m2m
    overlay accepts it, a projected token in the cluster); else kfp's own (its
    in-cluster service account token, IAP client ids). docs/kubeflow-operations.md
    says how to get each.
    """
    import kfp

    token = bearer_token()
    with warnings.catch_warnings():
        # kfp.Client warns on every construction that it needs KFP 2.0.0-beta.2 or
        # later (kfp 2.17.0 client.py L159); backend.refusal checks the real release.
        warnings.filterwarnings("ignore", "This client only works", FutureWarning)
        client = kfp.Client(host=host, namespace=namespace or "kubeflow", existing_token=token)
    try:
        tag, multi_user = healthz(client)
    except Exception as err:  # The server's answer, or why there was none, in one line.
        reason = getattr(err, "status", None) or type(err).__name__
        print(f"error: {host}: the KFP API's healthz did not answer ({reason}): is this "
              "the API's address, and does it take the token given?", file=sys.stderr)  # fmt: skip
        return None
    if tag is not None and (problem := backend.refusal(tag)):
        print(f"error: {problem}", file=sys.stderr)
        return None
    for warning in backend.warnings(tag):
        print(f"warning: {warning}", file=sys.stderr)
    if multi_user and not namespace:
        print(
            f"error: {host} runs KFP in multi-user mode (the Kubeflow platform): give the "
            "profile namespace, --namespace NS or `kfp.namespace:` in the settings "
            "(kubeflow-user-example-com on a fresh install); nothing was changed",
            file=sys.stderr,
        )
        return None
    if multi_user:
        # The gateway's identity and the profile's access, checked by a read before
        # anything changes: a token it does not take is 401, a namespace the user is
        # no contributor of 403.
        try:
            client._experiment_api.experiment_service_list_experiments(
                namespace=namespace, page_size=1
            )
        except Exception as err:
            print(
                f"error: {host}: {api_refusal(err)} (reading namespace {namespace}); check "
                f"${TOKEN_VARIABLE} and that your profile is {namespace}",
                file=sys.stderr,
            )
            return None
    if not multi_user and namespace:
        print(
            f"warning: {host} runs KFP in single-user mode, which has no namespaces: "
            f"{namespace!r} is ignored",
            file=sys.stderr,
        )
        namespace = None
    return Connection(client, tag, multi_user, namespace)
