"""Executes a compiled pipeline package step by step, as the KFP v2 backend would, on this machine.

    uv run --project kubeflow/reference --locked python kubeflow/reference/run_compiled.py \
        --package build/pipeline.yaml --pipeline-root /tmp/root --python .venv/bin/python \
        --parameter data_root=/path/to/csv --parameter 'train_args={"num_steps": 20}' \
        --summary /tmp/summary.json

KFP's own local executor (`kfp.local`, from this directory's current kfp) does
the work a cluster's driver and launcher do: it orders the DAG, resolves the
runtime parameters, builds each step's executor input from the spec (parameter
values, input artifacts handed over from upstream outputs, output artifact
URIs under the pipeline root, the executor output file), substitutes the
container's `command` + `args` placeholders, and collects each step's outputs
from its executor output file.

Two things are ours:

* **The task handler.** Each container's command runs as a subprocess instead
  of `docker run`, with `python` meaning the project's interpreter (the image
  is that environment). Nothing else about the command changes.
* **Input artifact types.** On a cluster, the launcher records each output in
  ML Metadata with the type schema its producer declares, and the driver
  hands it to consumers with that type (`toRuntimeArtifact(artifact,
  instanceSchema, schemaTitle)` in KFP's backend). kfp.local hands artifacts
  between steps as `dsl.Artifact` objects and keeps only KFP's own types, so a
  `tfx.Examples` would arrive as `system.Artifact`, which TFX's container
  entrypoint cannot map to a class. Here the executor input gets the type the
  consumer's input definition declares: in a TFX-compiled spec, the same type
  as the producer's output.

Not reproduced here: resource requests, node selectors and tolerations
(scheduling), caching, lifecycle hooks (`preCacheCheck`, which open-source KFP
does not run either), retries, and ML Metadata (kfp.local keeps none).

The summary file holds, per step: status, wall seconds, start-up seconds (from
starting the command to TFX's "Starting executor" log line), the parameter
values its executor input carried and the URIs of its output artifacts.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml
from google.protobuf import json_format
from kfp import local
from kfp.local import (
    executor_input_utils,
    pipeline_orchestrator,
    status,
    subprocess_task_handler,
)
from kfp.pipeline_spec import pipeline_spec_pb2

# TFX's entrypoint logs this (absl format) right before calling the executor.
_EXECUTOR_START = re.compile(r"^I(\d{4}) (\d\d:\d\d:\d\d\.\d+) .*\] Starting executor$")
_INVOCATION_FLAG = "--json_serialized_invocation_args"


def step_ids_by_executor_class(spec: dict) -> dict[str, str]:
    """`--executor_class_path` value -> component id, from the spec's deployment section."""
    ids = {}
    for name, executor in spec["deploymentSpec"]["executors"].items():
        args = executor.get("container", {}).get("args", [])
        if "--executor_class_path" in args:
            ids[args[args.index("--executor_class_path") + 1]] = name.removesuffix("_executor")
    return ids


def _executor_start(lines: list[str], started: datetime.datetime) -> datetime.datetime | None:
    for line in lines:
        match = _EXECUTOR_START.match(line.strip())
        if match:
            month_day, clock = match.groups()
            stamp = f"{started.year}{month_day} {clock}"
            return datetime.datetime.strptime(stamp, "%Y%m%d %H:%M:%S.%f")
    return None


def make_task_handler(project_python: str, steps: dict[str, dict], ids: dict[str, str]):
    class ProjectEnvironmentTaskHandler:
        """kfp.local's task handler interface: runs the container command as a subprocess."""

        def __init__(self, image, full_command, pipeline_root, runner, env_vars=None):
            del image, pipeline_root, runner  # The image is the project's environment.
            self.full_command = list(full_command)
            self.env_vars = env_vars or {}

        def run(self) -> status.Status:
            command = self.full_command
            if command[0] in ("python", "python3"):
                command = [project_python, *command[1:]]
            step_id = ids.get(_flag_value(command, "--executor_class_path"), command[-1])
            executor_input = json.loads(_flag_value(command, _INVOCATION_FLAG) or "{}")
            started_at = datetime.datetime.now()
            started = time.monotonic()
            process = subprocess.run(
                command,
                env={**subprocess_environment(), **self.env_vars},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            seconds = time.monotonic() - started
            lines = process.stdout.splitlines()
            print("\n".join(lines[-40:] if process.returncode else lines[-5:]), flush=True)
            executor_started = _executor_start(lines, started_at)
            steps[step_id] = {
                "status": "SUCCESS" if process.returncode == 0 else "FAILURE",
                "seconds": round(seconds, 2),
                "startup_seconds": (
                    round((executor_started - started_at).total_seconds(), 2)
                    if executor_started
                    else None
                ),
                "parameters": executor_input.get("inputs", {}).get("parameterValues", {}),
                "outputs": {
                    name: [a["uri"] for a in artifacts.get("artifacts", [])]
                    for name, artifacts in executor_input.get("outputs", {})
                    .get("artifacts", {})
                    .items()
                },
                "log_tail": lines[-40:] if process.returncode else [],
            }
            return status.Status.SUCCESS if process.returncode == 0 else status.Status.FAILURE

    return ProjectEnvironmentTaskHandler


def _flag_value(command: list[str], flag: str) -> str | None:
    return command[command.index(flag) + 1] if flag in command else None


def subprocess_environment() -> dict[str, str]:
    # The step's own environment, minus this (reference) environment's virtualenv.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def typed_executor_input(component_spec, arguments, task_root, block_input_artifact):
    """kfp.local's executor input, with input artifact types as the consumer declares them."""
    executor_input = _construct_executor_input(
        component_spec=component_spec,
        arguments=arguments,
        task_root=task_root,
        block_input_artifact=block_input_artifact,
    )
    for name, artifact_list in executor_input.inputs.artifacts.items():
        declared = component_spec.input_definitions.artifacts[name].artifact_type
        for artifact in artifact_list.artifacts:
            artifact.type.CopyFrom(declared)
    return executor_input


_construct_executor_input = executor_input_utils.construct_executor_input


def run(package: Path, pipeline_root: Path, project_python: str, parameters: dict) -> dict:
    spec_dict, _platform = list(yaml.safe_load_all(package.read_text()))
    spec = json_format.ParseDict(spec_dict, pipeline_spec_pb2.PipelineSpec())
    steps: dict[str, dict] = {}
    subprocess_task_handler.SubprocessTaskHandler = make_task_handler(
        project_python, steps, step_ids_by_executor_class(spec_dict)
    )
    executor_input_utils.construct_executor_input = typed_executor_input
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=str(pipeline_root),
        raise_on_error=False,
    )
    started = time.monotonic()
    error = None
    try:
        pipeline_orchestrator.run_local_pipeline(spec, parameters)
    except Exception as err:  # Reported in the summary; the caller decides.
        error = f"{type(err).__name__}: {err}"
    failed = [s for s, v in steps.items() if v["status"] != "SUCCESS"]
    return {
        "pipeline": spec.pipeline_info.name,
        "order": list(steps),
        "steps": steps,
        "seconds": round(time.monotonic() - started, 2),
        "succeeded": not failed and error is None and len(steps) == len(spec.root.dag.tasks),
        "error": error,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", type=Path, required=True)
    parser.add_argument("--pipeline-root", type=Path, required=True)
    parser.add_argument("--python", required=True, help="the project environment's interpreter")
    parser.add_argument(
        "--parameter", action="append", default=[], help="NAME=VALUE, a runtime parameter"
    )
    parser.add_argument("--summary", type=Path, required=True, help="where to write JSON")
    args = parser.parse_args(argv)
    parameters = dict(p.split("=", 1) for p in args.parameter)
    summary = run(args.package, args.pipeline_root, args.python, parameters)
    args.summary.write_text(json.dumps(summary, indent=2))
    print(
        f"{summary['pipeline']}: {'succeeded' if summary['succeeded'] else 'FAILED'} "
        f"({len(summary['steps'])} steps, {summary['seconds']:.0f} s)"
    )
    return 0 if summary["succeeded"] else 1


if __name__ == "__main__":
    sys.exit(main())
