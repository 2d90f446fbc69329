"""Checks a compiled package with today's KFP SDK; run in this directory's environment.

    uv run --project kubeflow/reference --locked python kubeflow/reference/check_spec.py \
        --package build/pipeline.yaml --placements placements.json

1. Parses the pipeline spec into kfp's `PipelineSpec` and every executor of the
   platform section into kfp-kubernetes' `KubernetesExecutorConfig`, rejecting
   unknown fields.
2. For each component in --placements, compiles a one-step kfp pipeline with
   the same settings applied through kfp's own API (`set_cpu_limit`, ...,
   `set_env_variable`, `kubernetes.add_node_selector`,
   `kubernetes.add_toleration`, `kubernetes.use_secret_as_env`) and prints the
   resulting resources, environment and platform entries as JSON, for the
   caller to compare with its own output.
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
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--package", type=Path, required=True)
    parser.add_argument("--placements", type=Path, required=True)
    args = parser.parse_args(argv)
    check_protos(args.package)
    placements = json.loads(args.placements.read_text())
    print(json.dumps({name: reference_for(p) for name, p in placements.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
