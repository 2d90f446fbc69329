"""What the compile adds to the spec TFX's KubeflowV2DagRunner writes, from the settings.

TFX writes the pipeline spec (schema 2.1.0); `complete_spec` then adds what TFX
leaves out, in the form today's KFP SDK writes it:

* per-step CPU/memory/accelerator requests and limits on every container
  step, ExampleGen and the schema importer included;
* the Kubernetes platform section (node selectors, tolerations) that KFP reads,
  as `kfp.kubernetes.add_node_selector` / `add_toleration` produce it;
* defaults for the runtime parameters (kubeflow/run_parameters.py: `data_root`,
  `train_args`) and the pipeline root;
* caching switched off for steps that read or change state outside the
  pipeline (`cached=False` in the step registry, pipeline/steps.py and
  kubeflow/pipeline_steps.py: the input snapshot, the drift gate, the
  served-model lookup, the Deploy step);
* retries (`retryPolicy`) per step, from the `retries:` settings
  (kubeflow/settings/retries.py);
* the exit handler (kubeflow/steps/run_status/component.py), which TFX compiles around a
  `tfx-dag` sub-DAG, made valid for the open-source backend: the sub-DAG
  declares the runtime parameters its tasks read and the root task passes
  them in (`pass_parameters_into_sub_dags`), and the final status is a
  `TASK_FINAL_STATUS` parameter, as kfp's `dsl.ExitHandler` compiles;
* KFP's own artifact types (`system.HTML`, `system.Metrics`) written as kfp
  writes them, by schema title (`kfp_artifact_types`), so the KFP UI renders
  the report and charts the metrics;
* parameters passed between steps name their producer task as it is named
  (`fix_output_parameter_producers`);
* every container runs `kubeflow.step_entrypoint` (TFX's entrypoint with
  s3:// registered, on the executor input as the component declares it,
  told its declared outputs by `--declared_outputs`) and, with
  `object_store:` set, gets the store's environment: plain values in the
  container spec, the credentials secret as kfp-kubernetes'
  `use_secret_as_env` writes it in the platform section.

The mends of what TFX writes itself are kubeflow/tfx_spec.py's.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubeflow.run_parameters import DATA_ROOT_PARAMETER, TRAIN_ARGS_PARAMETER, train_args_value
from kubeflow.settings import KubeflowSettings
from kubeflow.settings.object_store import ObjectStore
from kubeflow.settings.placement import Placement, quantity_value
from kubeflow.step_entrypoint import DECLARED_OUTPUTS_FLAG, TFX_ENTRYPOINT_MODULE
from kubeflow.tfx_spec import (
    all_tasks,
    dags,
    executor_labels,
    fix_output_parameter_producers,
    kfp_artifact_types,
    pass_parameters_into_sub_dags,
    type_final_status_parameters,
)

# What every container runs instead of TFX's entrypoint (see kubeflow/step_entrypoint.py).
STEP_COMMAND = ["python", "-m", "kubeflow.step_entrypoint"]


def _cpu_number(quantity: str) -> float:
    """Cores, the unit of KFP's legacy numeric CPU fields (500m is 0.5)."""
    return float(quantity_value(quantity))


def _memory_gb(quantity: str) -> float:
    """Decimal gigabytes, the unit of KFP's legacy numeric memory fields."""
    return float(quantity_value(quantity) / 10**9)


def resource_spec(placement: Placement) -> dict[str, Any]:
    """The container `resources` block, field for field as kfp 2.x's compiler writes it."""
    resources = placement.resources
    spec: dict[str, Any] = {}
    for field, legacy, convert in (
        ("cpu_limit", "cpuLimit", _cpu_number),
        ("cpu_request", "cpuRequest", _cpu_number),
        ("memory_limit", "memoryLimit", _memory_gb),
        ("memory_request", "memoryRequest", _memory_gb),
    ):
        value = getattr(resources, field)
        if value is not None:
            spec[legacy] = convert(value)
            spec["resource" + legacy[0].upper() + legacy[1:]] = value
    if resources.gpu:
        spec["accelerator"] = {
            "count": str(resources.gpu),
            "resourceCount": str(resources.gpu),
            "resourceType": resources.accelerator,
            "type": resources.accelerator,
        }
    return spec


def kubernetes_executor_config(placement: Placement) -> dict[str, Any]:
    """One executor's entry in the platform spec, as kfp-kubernetes writes it."""
    config: dict[str, Any] = {}
    if placement.node_selector:
        config["nodeSelector"] = {"labels": dict(placement.node_selector)}
    if placement.tolerations:
        config["tolerations"] = [t.to_kubernetes() for t in placement.tolerations]
    return config


def environment_spec(object_store: ObjectStore | None) -> list[dict[str, str]]:
    """The container `env` block, as kfp's `set_env_variable` writes it (Kubernetes' own form)."""
    if object_store is None:
        return []
    return object_store.container_env(secret_refs=False)


def secret_as_env(object_store: ObjectStore | None) -> list[dict[str, Any]]:
    """The platform `secretAsEnv` entry, field for field as kfp-kubernetes' `use_secret_as_env`."""
    if object_store is None or object_store.credentials is None:
        return []
    credentials = object_store.credentials
    return [
        {
            "keyToEnv": [
                {"secretKey": key, "envVar": env} for key, env in credentials.key_to_env().items()
            ],
            # A missing secret must stop the pod, not start it without credentials.
            "optional": False,
            "secretName": credentials.secret,
            "secretNameParameter": {"runtimeValue": {"constant": credentials.secret}},
        }
    ]


def complete_spec(
    spec: dict[str, Any],
    settings: KubeflowSettings,
    uncached: tuple[str, ...],
    deadlines: dict[str, int] | None = None,
    parameter_defaults: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Adds resources, parameter defaults, pipeline root and caching; returns (spec, platform).

    `deadlines`: seconds a step may run, where bounded; its retry window derives from it.
    `parameter_defaults`: the runtime parameters' defaults (None: the training
    package's, `data_root` and `train_args`).
    """
    deadlines = deadlines or {}
    spec = copy.deepcopy(spec)
    spec["defaultPipelineRoot"] = settings.pipeline_root
    parameters = spec["root"].setdefault("inputDefinitions", {}).setdefault("parameters", {})
    defaults = parameter_defaults or {
        DATA_ROOT_PARAMETER: settings.data_root,
        TRAIN_ARGS_PARAMETER: train_args_value(settings.train_steps),
    }
    for name, default in defaults.items():
        parameters[name]["defaultValue"] = default

    executors = spec["deploymentSpec"]["executors"]
    platform_executors = {}
    env = environment_spec(settings.object_store)
    secrets = secret_as_env(settings.object_store)
    tasks = all_tasks(spec)
    for task_id, label in executor_labels(spec).items():
        retry_policy = settings.retries.policy_for(task_id).spec(deadlines.get(task_id))
        if retry_policy:
            tasks[task_id]["retryPolicy"] = retry_policy
        container = executors[label].get("container")
        placement = settings.placement_for(task_id)
        if container is None:
            if task_id in settings.placements:
                raise ValueError(f"components.{task_id}: runs no container; it takes no resources")
            continue
        if container.get("command") != ["python", "-m", TFX_ENTRYPOINT_MODULE]:
            raise ValueError(
                f"{task_id}: TFX compiled the command {container.get('command')}, not its V2 "
                "entrypoint; kubeflow.step_entrypoint cannot stand in for it"
            )
        container["command"] = list(STEP_COMMAND)
        # The backend's driver adds outputs of its own (kubeflow/step_entrypoint.py).
        outputs = spec["components"][tasks[task_id]["componentRef"]["name"]].get(
            "outputDefinitions", {}
        )
        declared = json.dumps(sorted(outputs.get("artifacts", {})))
        container["args"] = [DECLARED_OUTPUTS_FLAG, declared, *container.get("args", [])]
        resources = resource_spec(placement)
        if resources:
            container["resources"] = resources
        if env:
            container["env"] = copy.deepcopy(env)
        kubernetes = kubernetes_executor_config(placement)
        if secrets:
            kubernetes["secretAsEnv"] = copy.deepcopy(secrets)
        if kubernetes:
            platform_executors[label] = kubernetes
    for task_id in uncached:
        if task_id in tasks:  # Deploy is there only with `serving:`
            tasks[task_id]["cachingOptions"] = {}
    for dag in dags(spec).values():
        fix_output_parameter_producers(dag["dag"]["tasks"])
    pass_parameters_into_sub_dags(spec)
    type_final_status_parameters(spec)
    kfp_artifact_types(spec)
    platform = {"platforms": {"kubernetes": {"deploymentSpec": {"executors": platform_executors}}}}
    return spec, platform
