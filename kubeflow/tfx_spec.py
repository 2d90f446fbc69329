"""What TFX's Kubeflow V2 compiler writes that open-source KFP reads otherwise, mended.

The compiled spec is TFX's (`KubeflowV2DagRunner`); these functions walk its
DAGs and correct it where the open-source backend's driver would fail a
task or the KFP UI would not show an artifact. Each is checked against what
today's kfp SDK compiles (tests/test_kubeflow_sdk_check.py) or by executing
the spec (tests/test_kubeflow_executed.py).
"""

from __future__ import annotations

from typing import Any

import yaml


def dags(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every DAG of the spec by component name ("root" for the root): tasks and inputs."""
    found = {"root": spec["root"]}
    found.update({name: c for name, c in spec.get("components", {}).items() if "dag" in c})
    return found


def all_tasks(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every task of every DAG by task name (TFX names tasks by node id, unique in a pipeline)."""
    return {name: task for dag in dags(spec).values() for name, task in dag["dag"]["tasks"].items()}


def executor_labels(spec: dict[str, Any]) -> dict[str, str]:
    """Task (component) id -> executor label, for tasks that run something."""
    labels = {}
    for task_id, task in all_tasks(spec).items():
        component = spec["components"][task["componentRef"]["name"]]
        if "executorLabel" in component:
            labels[task_id] = component["executorLabel"]
    return labels


def pass_parameters_into_sub_dags(spec: dict[str, Any]) -> None:
    """Declares on each sub-DAG the pipeline parameters its tasks read, and passes them in.

    A task's `componentInputParameter` names an input of the DAG it is in.
    TFX's compiler moves the tasks into `tfx-dag` when there is an exit
    handler, but leaves their parameters pointing at the root's inputs. KFP's
    backend resolves them against `tfx-dag`'s own inputs and would fail the
    task; kfp's `dsl.ExitHandler` declares them on the sub-DAG instead.
    """
    root_parameters = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    callers = {task["componentRef"]["name"]: task for task in spec["root"]["dag"]["tasks"].values()}
    for name, dag in dags(spec).items():
        if name == "root":
            continue
        used = {
            parameter["componentInputParameter"]
            for task in dag["dag"]["tasks"].values()
            for parameter in task.get("inputs", {}).get("parameters", {}).values()
            if "componentInputParameter" in parameter
        }
        declared = dag.setdefault("inputDefinitions", {}).setdefault("parameters", {})
        caller = callers[name]
        for parameter in sorted(used):
            if parameter not in root_parameters:
                raise ValueError(
                    f"{name}: a task reads the parameter {parameter!r}, which the pipeline "
                    "does not have"
                )
            declared[parameter] = {"parameterType": root_parameters[parameter]["parameterType"]}
            caller.setdefault("inputs", {}).setdefault("parameters", {})[parameter] = {
                "componentInputParameter": parameter
            }


def type_final_status_parameters(spec: dict[str, Any]) -> None:
    """Declares an exit handler's final status as kfp's compiler does (`TASK_FINAL_STATUS`).

    TFX declares the `FinalStatusStr` parameter a STRING; KFP's backend hands
    the status over as a struct and its driver refuses it for a STRING input.
    """
    for task in all_tasks(spec).values():
        for name, parameter in task.get("inputs", {}).get("parameters", {}).items():
            if "taskFinalStatus" in parameter:
                component = spec["components"][task["componentRef"]["name"]]
                component["inputDefinitions"]["parameters"][name] = {
                    "isOptional": True,
                    "parameterType": "TASK_FINAL_STATUS",
                }


def kfp_artifact_types(spec: dict[str, Any]) -> None:
    """Writes our TFX classes for KFP's system types by schema title, as kfp does.

    TFX compiles a custom artifact type as an `instanceSchema` titled with its
    TYPE_NAME (kubeflow/steps/kfp_artifacts.py); kfp's `dsl.HTML` compiles as
    `schemaTitle: system.HTML` with a schema version.
    """
    from kubeflow.steps.kfp_artifacts import SCHEMA_VERSION, SYSTEM_TYPE_NAMES

    for component in spec["components"].values():
        for side in ("inputDefinitions", "outputDefinitions"):
            for artifact in component.get(side, {}).get("artifacts", {}).values():
                schema = artifact["artifactType"].get("instanceSchema")
                title = yaml.safe_load(schema).get("title") if schema else None
                if title in SYSTEM_TYPE_NAMES:
                    artifact["artifactType"] = {
                        "schemaTitle": title,
                        "schemaVersion": SCHEMA_VERSION,
                    }


def fix_output_parameter_producers(tasks: dict[str, Any]) -> None:
    """Points each `taskOutputParameter` at the task that exists.

    TFX 1.16's V2 step builder names the producer of a parameter passed with
    `channel.future()[0].value` `<node id>_task`, but names the task itself
    `<node id>` (its own golden file, expected_two_step_pipeline_with_dynamic_
    execution_properties.pbtxt, has both). KFP's driver looks the producer up
    by task name and would fail the consumer.
    """
    for task_id, task in tasks.items():
        for name, parameter in task.get("inputs", {}).get("parameters", {}).items():
            output = parameter.get("taskOutputParameter")
            if output is None or output["producerTask"] in tasks:
                continue
            producer = output["producerTask"].removesuffix("_task")
            if producer not in tasks:
                raise ValueError(
                    f"{task_id}: parameter {name} comes from task {output['producerTask']!r}, "
                    "which is not in the pipeline"
                )
            output["producerTask"] = producer
