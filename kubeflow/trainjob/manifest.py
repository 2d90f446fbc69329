"""The TrainJob the Trainer step creates, and the runtime it references, as Trainer v2 takes them.

Only fields both supported releases serve in the same form are set: v2.2.0
replaced the TrainJob's `labels`, `annotations` and `podTemplateOverrides`
(v2.1.0 pkg/apis/trainer/v1alpha1/trainjob_types.go L113-127) with
`runtimePatches`, so a pod's placement and its labels live in the runtime,
and the TrainJob sets only `runtimeRef` and `trainer` (image, command, args,
env, numNodes, resourcesPerNode: trainjob_types.go v2.1.0 L228-264).

What Trainer and JobSet make of them: a JobSet named as the TrainJob, whose
replicated job `node` (the one labelled as the trainer's ancestor, container
`node`) runs one Indexed Job of `numNodes` pods; the TrainJob's image,
command, args, env and resources replace the runtime container's
(builder.go v2.1.0 L113-170). naming.py has the names they get.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from kubeflow.tfjob.manifest import placed_pod_spec
from kubeflow.trainjob import naming
from kubeflow.trainjob.spec import TrainJobSpec
from kubeflow.trainjob.tf_config import (
    JOB_INDEX_ENV,
    JOBSET_ENV,
    NAMESPACE_ENV,
    NODES_ENV,
    PORT_ENV,
    REPLICATED_JOB_ENV,
)

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
PLURAL = "trainjobs"
KIND = "TrainJob"
RUNTIME_PLURALS = {"ClusterTrainingRuntime": "clustertrainingruntimes",
                   "TrainingRuntime": "trainingruntimes"}  # fmt: skip
CONTAINER_NAME = naming.NODE
PORT_NAME = "tf-worker"
# The label the Kubeflow platform's Istio reads before it injects a sidecar: its
# injection webhooks select pods by `sidecar.istio.io/inject NotIn ["false"]`
# (kubeflow/manifests v1.11.0 common/istio/istio-install/base/install.yaml L3327,
# L3360, L3397, L3430; 26.03 L3640, L3673, L3710, L3743), so a pod labelled "false"
# never reaches the injector. A sidecar would sit between the nodes' collective ops
# and keep a finished node's pod running, so its Job never completes.
POD_LABELS = {"sidecar.istio.io/inject": "false"}
# Trainer's label naming a runtime's framework, as its own runtimes carry it
# (manifests/base/runtimes/*.yaml, v2.1.0).
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


# The node container's downward-API env: what tf_config.py builds TF_CONFIG from.
DOWNWARD_ENV = (
    _field_env(JOBSET_ENV, f"metadata.labels['{naming.JOBSET_NAME_LABEL}']"),
    _field_env(REPLICATED_JOB_ENV, f"metadata.labels['{naming.REPLICATED_JOB_LABEL}']"),
    _field_env(JOB_INDEX_ENV, f"metadata.labels['{naming.JOB_INDEX_LABEL}']"),
    _field_env(NAMESPACE_ENV, "metadata.namespace"),
)


def runtime_manifest(spec: TrainJobSpec, namespace: str | None = None) -> dict[str, Any]:
    """The runtime: no ML policy (Trainer runs it through PlainML), one replicated job `node`.

    A pod that fails fails its Job at once (backoffLimit 0, restartPolicy Never:
    under multi_worker_mirrored a lost node fails its peers' collectives, and
    the Trainer step's own retry runs a fresh job), and so the JobSet and the
    TrainJob. `namespace`: a namespaced TrainingRuntime's.
    """
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": spec.image,
        "command": list(spec.command),
        "workingDir": spec.working_dir,
        "ports": [{"name": PORT_NAME, "containerPort": spec.port}],
        "env": [dict(e) for e in DOWNWARD_ENV],
    }
    # Each node's resources come from the TrainJob (resourcesPerNode).
    placement = dataclasses.replace(spec, resources={})
    metadata: dict[str, Any] = {"name": spec.runtime, "labels": {FRAMEWORK_LABEL: "tensorflow"}}
    if spec.runtime_kind == "TrainingRuntime":
        if not namespace:
            raise ValueError("a TrainingRuntime is namespaced: give the profile's namespace")
        metadata["namespace"] = namespace
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": spec.runtime_kind,
        "metadata": metadata,
        "spec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": naming.NODE,
                            "template": {
                                "metadata": {
                                    "labels": {naming.ANCESTOR_LABEL: naming.ANCESTOR_TRAINER}
                                },
                                "spec": {
                                    "parallelism": spec.nodes,
                                    "completions": spec.nodes,
                                    "backoffLimit": 0,
                                    "activeDeadlineSeconds": spec.active_deadline_seconds,
                                    "template": {
                                        "metadata": {"labels": dict(POD_LABELS)},
                                        "spec": placed_pod_spec(
                                            placement, container, restartPolicy="Never"
                                        ),
                                    },
                                },
                            },
                        }
                    ]
                }
            }
        },
    }


def trainjob_manifest(
    spec: TrainJobSpec,
    *,
    name: str,
    namespace: str,
    args: Sequence[str],
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The TrainJob: `spec.nodes` nodes of the runtime, running `spec.command` + `args`."""
    problem = naming.name_problem(name, spec.nodes)
    if problem:
        raise ValueError(problem)
    env = [
        {"name": NODES_ENV, "value": str(spec.nodes)},
        {"name": PORT_ENV, "value": str(spec.port)},
        *(dict(e) for e in spec.env),
    ]
    trainer: dict[str, Any] = {
        "image": spec.image,
        "command": list(spec.command),
        "args": list(args),
        "env": env,
        "numNodes": spec.nodes,
    }
    if spec.resources:
        trainer["resourcesPerNode"] = {k: dict(v) for k, v in spec.resources.items()}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "runtimeRef": {"name": spec.runtime, "apiGroup": GROUP, "kind": spec.runtime_kind},
            "trainer": trainer,
        },
    }


def node_addresses(manifest: Mapping[str, Any], port: int) -> list[str]:
    """Every node's address as TF_CONFIG names it, node 0 first."""
    name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    nodes = manifest["spec"]["trainer"]["numNodes"]
    return [naming.node_address(name, namespace, i, port) for i in range(nodes)]
