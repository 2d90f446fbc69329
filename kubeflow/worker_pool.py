"""The Beam worker-pool sidecar for Flink task managers and Spark executors, from the settings.

    ./dev exec python -m kubeflow.worker_pool [--config kubeflow/pipeline.yaml]

prints the container to run beside every Flink task manager (a
FlinkDeployment's `spec.taskManager.podTemplate.spec.containers`) or Spark
executor (a SparkApplication's `spec.executor.sidecars`). It is the pipeline
image started with `--worker_pool` (the image's entrypoint is Beam's boot
binary), listening where the steps' default `environment_config` points
(localhost:50000): the job server hands it the Python work of tf.Transform,
TFMA and the rest. Those workers read and write artifacts too, so they get
the same object-store environment and credentials secret as the steps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from kubeflow.package_settings import load_package_settings
from kubeflow.settings import DEFAULT_SETTINGS_FILE, KubeflowSettings
from kubeflow.settings.beam import WORKER_POOL_PORT
from kubeflow.settings.fields import SettingsError

CONTAINER_NAME = "beam-worker-pool"


def sidecar_container(settings: KubeflowSettings) -> dict[str, Any]:
    """A Kubernetes container (core/v1 Container fields) for the worker pool."""
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": settings.image,
        "args": ["--worker_pool"],
        "ports": [{"name": "worker-pool", "containerPort": WORKER_POOL_PORT}],
    }
    if settings.object_store is not None:
        container["env"] = settings.object_store.container_env()
    return container


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_SETTINGS_FILE)
    args = parser.parse_args(argv)
    try:
        settings = load_package_settings(args.config)
    except SettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    yaml.safe_dump(sidecar_container(settings), sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
