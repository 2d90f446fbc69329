"""The command of every compiled Kubeflow step: TFX's V2 container entrypoint, object stores ready.

    python -m kubeflow.step_entrypoint --executor_class_path CLASS \
        --json_serialized_invocation_args EXECUTOR_INPUT [BEAM_ARGS...]

TFX's compiler makes every container run
`tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor`, which
hands the executor the artifact URIs exactly as KFP gives them: s3://... on a
MinIO or S3 cluster. `kubeflow.compile` puts this module in its place; it
takes the same arguments and adds five things around TFX's own `main`:

1. tensorflow-io's filesystems are registered before TFX reads or writes a
   file, whatever the step's executor imports (TensorFlow alone reads no s3://);
2. what the step needs outside its pod answers, with bounded waits: every S3
   bucket in its inputs, outputs and parameters (a one-key listing), and the
   Beam job service of a step on Flink or Spark. A wrong endpoint or
   credential fails the step in seconds, naming what did not answer;
3. each attempt starts from empty output URIs and is recorded beside them,
   with the error that ended it (kubeflow/step_attempt.py): a retried step
   leaves no half-written artifact, and the run's exit handler can say which
   step failed and why;
4. KFP's own artifact types (`system.HTML`, `system.Metrics`) map to TFX
   classes (kubeflow/steps/kfp_artifacts.py): TFX imports a type by its schema
   title, and `system` is not a module;
5. the process exits through `object_store.exit_process`, which sidesteps the
   abort at teardown after S3 use (tensorflow/io#2039), so KFP sees exit 0.
"""

from __future__ import annotations

import contextlib
import json
import sys
import traceback
from collections.abc import Iterator
from typing import Any

from kubeflow.step_attempt import artifact_uris, recorded_attempt
from pipeline import beam, object_store

INVOCATION_FLAG = "--json_serialized_invocation_args"
# The module TFX's V2 compiler names in every container command.
TFX_ENTRYPOINT_MODULE = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"


def step_uris(executor_input: dict[str, Any]) -> list[str]:
    """Every object-store URI in an executor input: artifacts and string parameters."""
    found = artifact_uris(executor_input, "inputs") + artifact_uris(executor_input, "outputs")
    for value in executor_input.get("inputs", {}).get("parameterValues", {}).values():
        found += list(_strings(value))
    return sorted({u for u in found if object_store.is_remote(u)})


def _strings(value: Any) -> Iterator[str]:
    """Strings in a parameter value, JSON-encoded ones (TFX's push destination) searched too."""
    if isinstance(value, str):
        yield value
        if value[:1] in "{[":
            with contextlib.suppress(ValueError):
                yield from _strings(json.loads(value))
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def register_kfp_artifact_types() -> None:
    """Lets TFX's entrypoint map KFP's system schema titles, and our Deployment's, to classes."""
    from tfx.orchestration.kubeflow.v2 import compiler_utils

    from kubeflow.steps import deploy, kfp_artifacts

    compiler_utils.TITLE_TO_CLASS_PATH.update(kfp_artifacts.TITLE_TO_CLASS_PATH)
    compiler_utils.TITLE_TO_CLASS_PATH.update(deploy.TITLE_TO_CLASS_PATH)


def run(argv: list[str]) -> int:
    """Runs one step; returns its exit code."""
    object_store.register_filesystems()
    executor_input: dict[str, Any] = {}
    if INVOCATION_FLAG in argv:
        executor_input = json.loads(argv[argv.index(INVOCATION_FLAG) + 1])
        object_store.check_reachable(step_uris(executor_input))

    from absl import app
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as tfx_entrypoint

    register_kfp_artifact_types()
    # From here on, what ends the attempt is recorded beside its outputs (a
    # store that does not answer, above, leaves nowhere to record it).
    with recorded_attempt(executor_input) as attempt:
        endpoint = beam.job_endpoint(argv)
        if endpoint:
            beam.check_job_service(endpoint)
        try:
            app.run(tfx_entrypoint.main, argv=[TFX_ENTRYPOINT_MODULE, *argv],
                    flags_parser=tfx_entrypoint._parse_flags)  # fmt: skip
        except SystemExit as done:  # absl's app.run always ends this way on success.
            code = done.code
            attempt.exit_code = code if isinstance(code, int) else (0 if code is None else 1)
    return attempt.exit_code or 0


def main() -> None:
    try:
        code = run(sys.argv[1:])
    except (object_store.ObjectStoreError, beam.JobServiceError) as err:
        print(f"error: {err}", file=sys.stderr)
        code = 1
    except Exception:
        traceback.print_exc()
        code = 1
    object_store.exit_process(code)


if __name__ == "__main__":
    main()
