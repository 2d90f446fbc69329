"""The Deploy step's work: the pushed version to a KServe InferenceService, and its outcome.

kubeflow/steps/deploy/component.py declares the step and says what it does; on Kubeflow
its pod runs `deploy` through kubeflow/light_step.py, without TFX's
entrypoint. A run that pushed nothing loads no TensorFlow; one that pushed a
version loads it to read the SavedModel's TensorFlow version and to score the
smoke request's rows with the pushed model (kubeflow/kserve/serving_runtime.py, smoke.py).
"""

from __future__ import annotations

import json
import os

from absl import logging

from components import store_files
from components.artifact_names import PUSHED_DESTINATION_PROPERTY, PUSHED_PROPERTY
from components.artifact_views import InputArtifact
from kubeflow.steps.kfp_display import OutputFile

OUTCOME_FILE = "deployment.json"
REJECTED_FILE = "assets.extra/rejected.json"
REJECTED_SUFFIX = ".rejected"


def read_outcome(uri: str) -> dict[str, object] | None:
    path = os.path.join(uri, OUTCOME_FILE)
    if not store_files.exists(path):
        return None
    with store_files.open(path) as f:
        return json.load(f)


def reject_version(pushed_destination: str, reason: str) -> None:
    """Marks a pushed version as not served: without `saved_model.pb` no step takes it for one."""
    from tfx.dsl.io import fileio  # A pushed version: TensorFlow is loaded already.
    from tfx.utils import io_utils

    io_utils.write_string_file(
        os.path.join(pushed_destination, REJECTED_FILE), json.dumps({"reason": reason})
    )
    model = os.path.join(pushed_destination, "saved_model.pb")
    if fileio.exists(model):
        fileio.copy(model, model + REJECTED_SUFFIX, overwrite=True)
        fileio.remove(model)


def deploy(
    pushed_model: InputArtifact,
    examples: InputArtifact,
    deployment: OutputFile,
    serving: str,
    *,
    poll_seconds: float | None = None,
) -> None:
    """Takes the pushed version to traffic, or leaves what serves untouched and fails.

    `poll_seconds`: how often the rollout reads the InferenceService (None: the
    rollout's own); the step passes none, tests on the stand-in poll faster."""
    from kubeflow.kserve.rollout import DeployError, Outcome, Rollout

    config = json.loads(serving)
    pushed = (
        pushed_model.get_custom_property(PUSHED_PROPERTY)
        if pushed_model.has_custom_property(PUSHED_PROPERTY)
        else 0
    )
    if not pushed:
        outcome = Outcome(
            outcome="skipped", summary="nothing new was pushed: the InferenceService is untouched"
        )
    else:
        # The version is read, copied and scored through TensorFlow (TFX's fileio), which
        # reads s3:// once tensorflow-io is loaded.
        store_files.register_tensorflow_filesystems()
        from kubeflow.kserve import layout, smoke
        from kubeflow.kserve import serving_runtime as runtime
        from kubeflow.kserve.cluster import ServingCluster

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
            **({} if poll_seconds is None else {"poll_seconds": poll_seconds}),
        )
        try:
            outcome = rollout.run()
        except DeployError as err:
            if err.rejects:
                reject_version(destination, str(err))
            raise
    logging.info("Deploy: %s: %s", outcome.outcome, outcome.summary)
    store_files.write_text(
        os.path.join(deployment.uri, OUTCOME_FILE), json.dumps(outcome.to_json(), indent=2)
    )
    deployment.set_string_custom_property("outcome", outcome.outcome)
    if outcome.version:
        deployment.set_string_custom_property("version", outcome.version)
    if outcome.url:
        deployment.set_string_custom_property("url", outcome.url)
