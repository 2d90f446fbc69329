"""The open-source Kubeflow Pipelines backends a compiled package runs on, stated once.

Supported: 2.15.0 to the 2.18 line, whose 2.18.2 (2026-11-23) is the newest
release. Why that range (source read: kubeflow/pipelines 2.14.0 to 2.17.0
and master, with argo-workflows v3.7.3 and v4.0.5, the Argo they ship; 2.18
itself was not read in source):

* **2.15.0 at least.** With object-store credentials the platform spec's
  `secretAsEnv` carries `optional: false`, as kfp-kubernetes writes it
  (kubeflow/spec_completion.py, `secret_as_env`). The field came in 2.15.0
  (commit 55ec8469d5, #12216; kubeflow/pipelines 2.15.0,
  kubernetes_platform/proto/kubernetes_executor_config.proto:77). 2.14.x's
  Argo compiler parses each executor's platform config strictly
  (kubeflow/pipelines 2.14.0, 2.14.3 and 2.14.4, backend/src/v2/compiler/
  argocompiler/container.go:285, `protojson.Unmarshal` without
  `DiscardUnknown`, into a `SecretAsEnv` with no `optional`), so it refuses
  the run ("failed to unmarshal kubernetes config: ... unknown field").
  Before that, 2.14.0 was already needed: the backend honours a task's
  `retryPolicy` inside the exit handler's `tfx-dag` sub-DAG, and hands an
  exit handler its `PipelineTaskFinalStatus`, from 2.14.0 on
  (kubeflow/pipelines#11908).
* **A 2.x newer than 2.18** was not read: `kubeflow.submit` says so and goes on.
* **3.x is refused.** KFP's master is the 3.0 line: it removes ML Metadata
  (kubeflow/pipelines#13986, a branch in the mirror read, not yet on master
  at 7b70c7b95f) and changes what a step receives and what the exit handler
  reads: an input's `schemaTitle` holding raw schema YAML, a declared output
  with no local copy failing the step, Metrics metadata that must be
  numbers, an exit handler that may read RUNNING after a successful DAG.
  Refusing is the choice until the package is read against a 3.x release.
* **From 2.17.0, stock installs retry only Errors.** They set
  `workflowDefaults.spec.templateDefaults.retryStrategy: {limit: '2',
  retryPolicy: OnError}` in Argo's `workflow-controller-configmap`
  (kubeflow/pipelines 2.17.0, manifests/kustomize/third-party/argo/base/
  workflow-controller-configmap-patch.yaml:56-59; commit 2dea6fd468,
  #13485). KFP compiles a task's `retryPolicy` into `limit` and `backoff`
  with no `retryPolicy` (2.17.0, backend/src/v2/compiler/argocompiler/
  container.go:667-685, `getTaskRetryStrategyFromInput`), and Argo merges
  the cluster's template defaults under a template's own fields
  (argo-workflows v4.0.5, workflow/controller/operator.go:4448,
  `mergedTemplateDefaultsInto`): every retried step gets `OnError`, and a
  step that fails (a non-zero exit, an eviction) is not retried.
  `kubeflow.submit` warns; docs/kubeflow-operations.md gives the change.

The compile prints the range (`requirement`); `kubeflow.submit` reads the API
server's release and asks `refusal` and `warnings`.
"""

from __future__ import annotations

import re

MINIMUM = (2, 15, 0)
MINIMUM_TEXT = ".".join(map(str, MINIMUM))
NEEDED_FOR = (
    "secretAsEnv.optional, retries of steps inside the exit handler's sub-DAG and the exit "
    "handler's final status"
)
# The newest release line supported (its newest release: 2.18.2, 2026-11-23).
NEWEST_READ = (2, 18)
NEWEST_READ_TEXT = "2.18.x"
# Stock installs from this release retry Errors only (see the module docstring).
ON_ERROR_DEFAULTS_FROM = (2, 17, 0)
# The API server's release tag (TAG_NAME): 2.15.0, v2.15.1, 2.15.0-rc.1.
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$")


def parse_release(tag: str | None) -> tuple[int, int, int] | None:
    """A release tag as (major, minor, patch), or None where it names no release."""
    match = _RELEASE.match((tag or "").strip())
    if not match:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def requirement() -> str:
    """The supported range, in words, for the compile's output and the docs."""
    return (
        f"Kubeflow Pipelines backend {MINIMUM_TEXT} to {NEWEST_READ_TEXT} ({MINIMUM_TEXT} for "
        f"{NEEDED_FOR}; 3.x refused)"
    )


def refusal(tag: str) -> str | None:
    """Why a backend of release `tag` cannot run the package, or None (unknown tags too)."""
    release = parse_release(tag)
    if release is None:
        return None
    if release < MINIMUM:
        return (
            f"the Kubeflow Pipelines backend is {tag}; this package needs {MINIMUM_TEXT} or "
            f"later for {NEEDED_FOR}. 2.14 refuses a package whose platform spec carries "
            "secretAsEnv.optional; before 2.14 every step would run once, never retried, and "
            "the run-status step would not get the run's outcome: upgrade KFP"
        )
    if release[0] >= 3:
        return (
            f"the Kubeflow Pipelines backend is {tag}; this package supports {MINIMUM_TEXT} to "
            f"{NEWEST_READ_TEXT}. The 3.x line removes ML Metadata (kubeflow/pipelines#13986) "
            "and changes what a step receives (an input's schemaTitle, outputs that must have "
            "a local copy, numeric Metrics metadata) and the final status an exit handler "
            "reads; this package was not read against it"
        )
    return None


def warnings(tag: str | None) -> list[str]:
    """What `kubeflow.submit` warns about before it submits to a backend of release `tag`.

    `tag` None: the server named no release.
    """
    release = parse_release(tag)
    if release is None:
        return [
            "could not read the Kubeflow Pipelines backend's release (healthz tag_name); this "
            f"package needs {MINIMUM_TEXT} to {NEWEST_READ_TEXT}"
        ]
    found = []
    if release[0] == 2 and release[:2] > NEWEST_READ:
        found.append(
            f"the Kubeflow Pipelines backend is {tag}, newer than the releases this package "
            f"was read against ({MINIMUM_TEXT} to {NEWEST_READ_TEXT}); submitting anyway"
        )
    if release >= ON_ERROR_DEFAULTS_FROM:
        found.append(
            f"Kubeflow Pipelines {tag}: stock installs from 2.17.0 set "
            "workflowDefaults.spec.templateDefaults.retryStrategy {limit: '2', retryPolicy: "
            "OnError} in Argo's workflow-controller-configmap, and KFP compiles a step's "
            "retries with no retryPolicy, so Argo merges OnError in: a step that fails (exits "
            "non-zero, is evicted) is never retried, whatever `retries:` says; only Errors (a "
            "deleted pod, a container that never started) are, for every step, the gates "
            "included. For `retries:` to cover failures and the gates never to retry, delete "
            "that retryStrategy from workflowDefaults (docs: Operating scheduled runs, Retries "
            "on the cluster)"
        )
    return found
