"""Deploy: the pushed version to a KServe InferenceService (with `serving:` in the settings).

It runs after the Pusher and acts only when the Pusher pushed a new version
(`pushed = 1`; a rerun whose candidate was already served pushes nothing, and
this step says so and succeeds). Then, in kubeflow/kserve/:

1. picks the TF Serving release that loads the version, no older than the
   TensorFlow that exported it (serving_runtime.py), copies the version to a base
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
RunReport step shows and turns into KFP metrics. The work is
kubeflow/steps/deploy/executor.py's, which the step's pod runs without TFX's
entrypoint (kubeflow/light_step.py); this module declares it.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

from tfx import types
from tfx.dsl.component.experimental.annotations import (
    InputArtifact,
    OutputArtifact,
    Parameter,
)
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts

from kubeflow.steps.deploy.executor import deploy


class Deployment(types.Artifact):
    """A directory holding `deployment.json`: what the Deploy step did."""

    # TFX's Kubeflow V2 compiler wants `<namespace>.<Title>` and its entrypoint
    # imports the title back as a class path; `kubeflow` is a namespace package
    # shared with Kubeflow's SDKs, so the entrypoint is told the path instead
    # (TITLE_TO_CLASS_PATH, kubeflow/step_entrypoint.py).
    TYPE_NAME = "kubeflow_steps.Deployment"


TITLE_TO_CLASS_PATH = ((Deployment.TYPE_NAME, f"{__name__}.Deployment"),)


@component
def Deploy(
    pushed_model: InputArtifact[standard_artifacts.PushedModel],
    examples: InputArtifact[standard_artifacts.Examples],
    deployment: OutputArtifact[Deployment],
    serving: Parameter[str],
):
    """Takes the pushed version to traffic, or leaves what serves untouched and fails."""
    deploy(pushed_model, examples, deployment, serving)
