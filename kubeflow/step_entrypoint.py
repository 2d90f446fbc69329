"""The command of every compiled Kubeflow step: TFX's V2 container entrypoint, object stores ready.

    python -m kubeflow.step_entrypoint --executor_class_path CLASS \
        --json_serialized_invocation_args EXECUTOR_INPUT [BEAM_ARGS...]

TFX's compiler makes every container run
`tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor`, which
hands the executor the artifact URIs exactly as KFP gives them: s3://... on a
MinIO or S3 cluster. `kubeflow.compile` puts this module in its place; it
takes the same arguments, plus `--declared_outputs`, and adds six things
around TFX's own `main`:

0. the executor input is put back into the shape TFX reads
   (`as_declared`): open-source KFP's driver builds it from ML Metadata,
   which leaves every input artifact untyped, and adds an output the
   component never declared (see that function);
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

A light step (kubeflow/light_step.py, LIGHT_STEPS) is dispatched on its
executor class before TFX or tensorflow-io is imported, and runs without
either. Points 0, 2, 3 and 5 hold for it too; not 1 (what it hands
TensorFlow, it registers tensorflow-io for itself) nor 4 (it needs no classes).

Port register: docs/ports.md
"""

from __future__ import annotations

import contextlib
import json
import sys
import traceback
from collections.abc import Iterator
from typing import Any

from kubeflow import light_step
from kubeflow.step_attempt import artifact_uris, recorded_attempt
from pipeline import beam, object_store

EXECUTOR_CLASS_FLAG = "--executor_class_path"
INVOCATION_FLAG = "--json_serialized_invocation_args"
INPUTS_SPEC_FLAG = "--json_serialized_inputs_spec_args"
# Ours, written by kubeflow.compile: the JSON list of the step's output artifact
# names, as its component declares them. Taken out before TFX parses the rest
# (TFX hands flags it does not know to Beam).
DECLARED_OUTPUTS_FLAG = "--declared_outputs"
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


def as_declared(
    executor_input: dict[str, Any],
    inputs_spec: dict[str, Any] | None,
    declared_outputs: list[str] | None,
) -> tuple[dict[str, Any], list[str]]:
    """The executor input as the component declares it; also what was changed, in words.

    Open-source KFP's driver hands a step two things TFX 1.16's entrypoint
    cannot read (kubeflow/pipelines, every 2.x release read, 2.14.0 to 2.17.0):

    * **Untyped inputs.** It resolves each input artifact from ML Metadata
      through `GetOutputArtifactsByExecutionId`, which builds it with
      `Schema: "" // TODO(Bobgy): figure out how to get schema`
      (backend/src/v2/metadata/client.go, line 1144 at 2.17.0), and
      `ToRuntimeArtifact` turns that into `instanceSchema: ""` (same file,
      line 245). TFX reads the class from the type (`_retrieve_class_path`:
      `yaml.safe_load("")` is None, so `None.get`: AttributeError). KFP's
      master (3.0) puts the raw schema YAML into `schemaTitle` instead, which
      TFX would try to import as a class path. Either way each input gets
      the type the step's inputs spec declares for it, which in a
      TFX-compiled package is the producer's declared output type
      (tensorflow/tfx#7768; sky-uk/kfp-operator's TFX shim, patch 4, does
      the same).
    * **An undeclared output.** With log publishing on (`PUBLISH_LOGS`, on in
      the API server's stock manifest) `provisionOutputs` adds
      `executor-logs`, typed `system.Artifact` (backend/src/v2/driver/
      driver.go, line 755 at 2.17.0), which TFX would import as a class
      (ImportError). The launcher uploads the log there itself and ignores
      what an executor reports for it (component/launcher_v2.go,
      `uploadOutputArtifacts`), so only the declared outputs reach TFX (and
      the attempt's clean start never touches the log's URI).

    `inputs_spec` None (a package compiled before `--declared_outputs`, or a
    hand-written command) leaves inputs as they are; `declared_outputs` None
    keeps every output.
    """
    fixed = json.loads(json.dumps(executor_input))
    changes = []
    declared_inputs = (inputs_spec or {}).get("artifacts", {})
    for name, artifact_list in fixed.get("inputs", {}).get("artifacts", {}).items():
        declared = declared_inputs.get(name, {}).get("artifactType")
        if not declared:
            continue
        for artifact in artifact_list.get("artifacts", []):
            if artifact.get("type") != declared:
                changes.append(f"input {name}: type {artifact.get('type')!r} -> the declared one")
                artifact["type"] = declared
    if declared_outputs is not None:
        outputs = fixed.get("outputs", {}).get("artifacts", {})
        for name in sorted(set(outputs) - set(declared_outputs)):
            del outputs[name]
            changes.append(f"output {name}: not declared by the component, not handed to TFX")
    return fixed, changes


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else None


def step_arguments(argv: list[str]) -> tuple[list[str], dict[str, Any], list[str]]:
    """(TFX's arguments with the executor input as declared, that input, what changed)."""
    declared_text = _flag(argv, DECLARED_OUTPUTS_FLAG)
    if DECLARED_OUTPUTS_FLAG in argv:
        at = argv.index(DECLARED_OUTPUTS_FLAG)
        argv = argv[:at] + argv[at + 2 :]
    invocation = _flag(argv, INVOCATION_FLAG)
    if invocation is None:
        return argv, {}, []
    inputs_spec_text = _flag(argv, INPUTS_SPEC_FLAG)
    executor_input, changes = as_declared(
        json.loads(invocation),
        json.loads(inputs_spec_text) if inputs_spec_text else None,
        json.loads(declared_text) if declared_text is not None else None,
    )
    argv = list(argv)
    argv[argv.index(INVOCATION_FLAG) + 1] = json.dumps(executor_input)
    return argv, executor_input, changes


def register_kfp_artifact_types() -> None:
    """Lets TFX's entrypoint map KFP's system schema titles, and our Deployment's, to classes."""
    from tfx.orchestration.kubeflow.v2 import compiler_utils

    from kubeflow.steps import kfp_artifacts
    from kubeflow.steps.deploy import component as deploy

    compiler_utils.TITLE_TO_CLASS_PATH.update(kfp_artifacts.TITLE_TO_CLASS_PATH)
    compiler_utils.TITLE_TO_CLASS_PATH.update(deploy.TITLE_TO_CLASS_PATH)


def run(argv: list[str]) -> int:
    """Runs one step; returns its exit code. A light step (kubeflow/light_step.py) runs
    without TFX's entrypoint, TensorFlow or tensorflow-io; every other step through TFX's."""
    if _flag(argv, EXECUTOR_CLASS_FLAG) in light_step.LIGHT_STEPS:
        return run_light(argv)
    return run_tfx(argv)


def _announce(changes: list[str]) -> None:
    for change in changes:
        # absl logs INFO only once TFX's main has set its verbosity: printed, so the
        # step's log shows what the backend handed over.
        print(f"Executor input as declared: {change}", file=sys.stderr, flush=True)


def run_light(argv: list[str]) -> int:
    """Runs a step of LIGHT_STEPS as TFX's entrypoint would, without TFX's entrypoint."""
    argv, executor_input, changes = step_arguments(argv)
    if not executor_input:
        raise light_step.LightStepError(f"{INVOCATION_FLAG} is missing: no executor input")
    object_store.check_reachable(step_uris(executor_input))
    _announce(changes)
    inputs_spec_text = _flag(argv, INPUTS_SPEC_FLAG)
    with recorded_attempt(executor_input):
        light_step.run(
            str(_flag(argv, EXECUTOR_CLASS_FLAG)),
            executor_input,
            json.loads(inputs_spec_text) if inputs_spec_text else None,
        )
    return 0


def run_tfx(argv: list[str]) -> int:
    """Runs one step through TFX's container entrypoint; returns its exit code."""
    object_store.register_filesystems()
    argv, executor_input, changes = step_arguments(argv)
    if executor_input:
        object_store.check_reachable(step_uris(executor_input))

    from absl import app
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as tfx_entrypoint

    _announce(changes)
    register_kfp_artifact_types()
    # From here on, what ends the attempt is recorded beside its outputs (a
    # store that does not answer, above, leaves nowhere to record it).
    with recorded_attempt(executor_input) as attempt:
        endpoint = beam.job_endpoint(argv)
        if endpoint:
            beam.check_job_service(endpoint, beam.job_service_timeout(argv))
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
    except (object_store.ObjectStoreError, beam.JobServiceError, light_step.LightStepError) as err:
        print(f"error: {err}", file=sys.stderr)
        code = 1
    except Exception:
        traceback.print_exc()
        code = 1
    object_store.exit_process(code)


if __name__ == "__main__":
    main()
