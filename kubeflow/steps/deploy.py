"""Deploy: the pushed version to a KServe InferenceService (with `serving:` in the settings).

It runs after the Pusher and acts only when the Pusher pushed a new version
(`pushed = 1`; a rerun whose candidate was already served pushes nothing, and
this step says so and succeeds). Then, in kubeflow/kserve/:

1. picks the TF Serving release that loads the version, no older than the
   TensorFlow that exported it (runtime.py), copies the version to a base
   path of its own (layout.py) and checks the predictor's service account
   and S3 secret (credentials.py);
2. scores a few of the run's eval rows with the pushed model, as the
   Evaluator did, and turns them into a `serving_json` request (smoke.py);
3. creates the InferenceService, or rolls the version out at 0% of the
   traffic, sends the smoke request to the new revision's own URL, gives it
   the canary share and promotes it, or rolls back and fails (rollout.py).

When the version fails before it takes traffic, the step also takes it out
of the Pusher's directory as the served version (`saved_model.pb` is renamed;
nothing is deleted), so the next run's Evaluator and drift gate compare with
the model that really serves. A promotion that only runs late fails the step
but leaves the version be: it serves.

Its `deployment` output holds `deployment.json` (the Outcome), which the
RunReport step shows and turns into KFP metrics.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

import json
import os

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

from components.artifact_names import PUSHED_DESTINATION_PROPERTY, PUSHED_PROPERTY

OUTCOME_FILE = "deployment.json"
REJECTED_FILE = "assets.extra/rejected.json"
REJECTED_SUFFIX = ".rejected"


class Deployment(types.Artifact):
    """A directory holding `deployment.json`: what the Deploy step did."""

    # TFX's Kubeflow V2 compiler wants `<namespace>.<Title>` and its entrypoint
    # imports the title back as a class path; `kubeflow` is a namespace package
    # shared with Kubeflow's SDKs, so the entrypoint is told the path instead
    # (TITLE_TO_CLASS_PATH, kubeflow/step_entrypoint.py).
    TYPE_NAME = "kubeflow_steps.Deployment"


TITLE_TO_CLASS_PATH = ((Deployment.TYPE_NAME, f"{__name__}.Deployment"),)


def read_outcome(uri: str) -> "dict[str, object] | None":
    path = os.path.join(uri, OUTCOME_FILE)
    if not fileio.exists(path):
        return None
    with fileio.open(path) as f:
        return json.load(f)


def reject_version(pushed_destination: str, reason: str) -> None:
    """Marks a pushed version as not served: without `saved_model.pb` no step takes it for one."""
    io_utils.write_string_file(
        os.path.join(pushed_destination, REJECTED_FILE), json.dumps({"reason": reason})
    )
    model = os.path.join(pushed_destination, "saved_model.pb")
    if fileio.exists(model):
        fileio.copy(model, model + REJECTED_SUFFIX, overwrite=True)
        fileio.remove(model)


@component
def Deploy(
    pushed_model: InputArtifact[standard_artifacts.PushedModel],
    examples: InputArtifact[standard_artifacts.Examples],
    deployment: OutputArtifact[Deployment],
    serving: Parameter[str],
):
    """Takes the pushed version to traffic, or leaves what serves untouched and fails."""
    from kubeflow.kserve import layout, runtime, smoke
    from kubeflow.kserve.cluster import ServingCluster
    from kubeflow.kserve.rollout import DeployError, Outcome, Rollout

    config = json.loads(serving)
    properties = pushed_model.mlmd_artifact.custom_properties
    pushed = (
        pushed_model.get_custom_property(PUSHED_PROPERTY) if PUSHED_PROPERTY in properties else 0
    )
    if not pushed:
        outcome = Outcome(
            outcome="skipped", summary="nothing new was pushed: the InferenceService is untouched"
        )
    else:
        destination = str(pushed_model.get_custom_property(PUSHED_DESTINATION_PROPERTY))
        version = os.path.basename(destination.rstrip("/"))
        try:
            runtime_version = runtime.runtime_version(
                config["runtime_version"], runtime.exported_by(destination), gpu=config["gpu"]
            )
        except runtime.RuntimeVersionError as err:
            reject_version(destination, str(err))
            raise DeployError(f"version {version} not deployed: {err}") from None
        storage_uri = layout.publish_version(destination, config["storage_root"], version)
        instances, serialized = smoke.eval_rows(examples.uri, destination, config["smoke_rows"])
        cluster = ServingCluster.from_environment()
        rollout = Rollout(
            cluster=cluster,
            config=config,
            namespace=config.get("namespace") or cluster.default_namespace,
            version=version,
            storage_uri=storage_uri,
            instances=instances,
            expected=smoke.expected_scores(destination, serialized),
            runtime_version=runtime_version,
            log=logging.info,
        )
        try:
            outcome = rollout.run()
        except DeployError as err:
            if err.rejects:
                reject_version(destination, str(err))
            raise
    logging.info("Deploy: %s: %s", outcome.outcome, outcome.summary)
    io_utils.write_string_file(
        os.path.join(deployment.uri, OUTCOME_FILE), json.dumps(outcome.to_json(), indent=2)
    )
    deployment.set_string_custom_property("outcome", outcome.outcome)
    if outcome.version:
        deployment.set_string_custom_property("version", outcome.version)
    if outcome.url:
        deployment.set_string_custom_property("url", outcome.url)
