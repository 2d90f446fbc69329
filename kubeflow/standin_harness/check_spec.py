"""Checks a compiled package with today's KFP SDK; run in this directory's environment.

    uv run --project kubeflow/kfp_sdk --locked python kubeflow/standin_harness/check_spec.py \
        --package build/pipeline.yaml --placements placements.json

1. Parses the pipeline spec into kfp's `PipelineSpec` and every executor of the
   platform section into kfp-kubernetes' `KubernetesExecutorConfig`, rejecting
   unknown fields.
2. For each component in --placements, compiles a one-step kfp pipeline with
   the same settings applied through kfp's own API (`set_cpu_limit`, ...,
   `set_env_variable`, `kubernetes.add_node_selector`,
   `kubernetes.add_toleration`, `kubernetes.use_secret_as_env`, `set_retry`)
   and prints the resulting resources, environment, platform entries and
   retry policy as JSON, for the caller to compare with its own output.
3. Under the key `exit_handler`, what kfp compiles for a `dsl.ExitHandler`
   whose body reads a pipeline parameter and writes `dsl.HTML` and
   `dsl.Metrics` artifacts, and whose exit task takes the
   `dsl.PipelineTaskFinalStatus`: the artifact types, the final status input,
   the exit task's trigger policy, and how the body's sub-DAG gets the
   parameter.

    uv run --project kubeflow/kfp_sdk --locked python kubeflow/standin_harness/check_spec.py \
        --kfp-artifacts artifacts.json

4. For a JSON object of metric values and an HTML artifact's URI
   (`{"metrics": {...}, "html_uri": "..."}`), prints what kfp's own artifact
   classes make of them: the metadata of a `dsl.Metrics` after `log_metric`
   for each value, and the file a `dsl.HTML` component writes (`.path`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml
from google.protobuf import json_format
from kfp import compiler, dsl, kubernetes
from kfp.kubernetes import kubernetes_executor_config_pb2
from kfp.pipeline_spec import pipeline_spec_pb2


def check_protos(package: Path) -> None:
    spec, platform = list(yaml.safe_load_all(package.read_text()))
    json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())
    json_format.ParseDict(platform, pipeline_spec_pb2.PlatformSpec())
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    for config in executors.values():
        json_format.ParseDict(config, kubernetes_executor_config_pb2.KubernetesExecutorConfig())


def reference_for(placement: dict) -> dict:
    @dsl.container_component
    def step():
        return dsl.ContainerSpec(image="image", command=["true"])

    @dsl.pipeline(name="reference")
    def reference():
        task = step()
        if placement.get("retry"):
            task.set_retry(**placement["retry"])
        resources = placement["resources"]
        for key, setter in (
            ("cpu_request", task.set_cpu_request),
            ("cpu_limit", task.set_cpu_limit),
            ("memory_request", task.set_memory_request),
            ("memory_limit", task.set_memory_limit),
        ):
            if resources.get(key) is not None:
                setter(resources[key])
        if resources.get("gpu"):
            task.set_accelerator_type(resources["accelerator"])
            task.set_accelerator_limit(resources["gpu"])
        for key, value in placement["node_selector"].items():
            kubernetes.add_node_selector(task, label_key=key, label_value=value)
        for name, value in placement.get("env", {}).items():
            task.set_env_variable(name, value)
        for secret in placement.get("secret_as_env", []):
            kubernetes.use_secret_as_env(
                task, secret_name=secret["secret"], secret_key_to_env=secret["key_to_env"]
            )
        for toleration in placement["tolerations"]:
            kubernetes.add_toleration(
                task,
                key=toleration.get("key"),
                operator=toleration.get("operator", "Equal"),
                value=toleration.get("value"),
                effect=toleration.get("effect"),
                toleration_seconds=toleration.get("toleration_seconds"),
            )

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reference.yaml"
        compiler.Compiler().compile(reference, str(path))
        docs = list(yaml.safe_load_all(path.read_text()))
    spec = docs[0]
    platform = docs[1] if len(docs) > 1 else {}
    executors = platform.get("platforms", {}).get("kubernetes", {})
    container = spec["deploymentSpec"]["executors"]["exec-step"]["container"]
    return {
        "resources": container.get("resources", {}),
        "env": container.get("env", []),
        "kubernetes": executors.get("deploymentSpec", {}).get("executors", {}).get("exec-step", {}),
        "retry_policy": spec["root"]["dag"]["tasks"]["step"].get("retryPolicy"),
    }


def _typed_component(function, **annotations):
    """A kfp component; its annotations given as objects (this module's are strings)."""
    function.__annotations__ = annotations
    return dsl.component(base_image="python:3.10")(function)


def exit_handler_reference() -> dict:
    def work(data_root, page, metrics):
        del data_root, page, metrics

    def report(status):
        del status

    work = _typed_component(
        work, data_root=str, page=dsl.Output[dsl.HTML], metrics=dsl.Output[dsl.Metrics]
    )
    report = _typed_component(report, status=dsl.PipelineTaskFinalStatus)

    def reference(data_root=""):
        with dsl.ExitHandler(report()):
            work(data_root=data_root)

    reference.__annotations__ = {"data_root": str}
    reference = dsl.pipeline(name="reference")(reference)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reference.yaml"
        compiler.Compiler().compile(reference, str(path))
        spec = next(yaml.safe_load_all(path.read_text()))
    outputs = spec["components"]["comp-work"]["outputDefinitions"]["artifacts"]
    body = spec["components"]["comp-exit-handler-1"]
    (body_parameter,) = body["inputDefinitions"]["parameters"]
    return {
        "html_type": outputs["page"]["artifactType"],
        "metrics_type": outputs["metrics"]["artifactType"],
        "final_status_input": spec["components"]["comp-report"]["inputDefinitions"]["parameters"][
            "status"
        ],
        "exit_task_trigger": spec["root"]["dag"]["tasks"]["report"]["triggerPolicy"],
        "final_status_source": spec["root"]["dag"]["tasks"]["report"]["inputs"]["parameters"][
            "status"
        ],
        "body_reads": body["dag"]["tasks"]["work"]["inputs"]["parameters"]["data_root"],
        "body_declares": body["inputDefinitions"]["parameters"][body_parameter],
        "body_is_passed": spec["root"]["dag"]["tasks"]["exit-handler-1"]["inputs"]["parameters"][
            body_parameter
        ],
    }


def kfp_artifacts_reference(given: dict) -> dict:
    metrics = dsl.Metrics(name="metrics", uri="", metadata={})
    for name, value in given["metrics"].items():
        metrics.log_metric(name, value)
    return {
        "metrics_metadata": metrics.metadata,
        "html_path": dsl.HTML(name="report", uri=given["html_uri"], metadata={}).path,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kfp-artifacts", type=Path)
    parser.add_argument("--package", type=Path)
    parser.add_argument("--placements", type=Path)
    args = parser.parse_args(argv)
    if args.kfp_artifacts:
        print(json.dumps(kfp_artifacts_reference(json.loads(args.kfp_artifacts.read_text()))))
        return 0
    if not (args.package and args.placements):
        parser.error("--package and --placements, or --kfp-artifacts")
    check_protos(args.package)
    placements = json.loads(args.placements.read_text())
    references = {name: reference_for(p) for name, p in placements.items()}
    print(json.dumps({**references, "exit_handler": exit_handler_reference()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
