"""TF_CONFIG for one node of a TrainJob, from what its pod has.

Trainer v2's PlainML plugin injects nothing TensorFlow reads
(pkg/runtime/framework/plugins/plainml/plainml.go v2.1.0 L45-66: it sets the
pod count and copies the TrainJob's env), so each node builds TF_CONFIG itself:

* its JobSet, replicated job and Job index: the labels JobSet puts on the pod,
  through the downward API (the runtime's env, manifest.py);
* its own index: JOB_COMPLETION_INDEX, which the Job controller sets;
* the number of nodes and the port: the TrainJob's env, from the settings.

Every node is a `worker`; without a `chief` in the cluster, worker 0 is the
chief of multi_worker_mirrored and the one that writes the model
(trainer/run.py `is_chief`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubeflow.trainjob import naming

# The downward-API variables of the runtime's node container (manifest.py).
JOBSET_ENV = "TFX_JOBSET_NAME"
REPLICATED_JOB_ENV = "TFX_REPLICATED_JOB_NAME"
JOB_INDEX_ENV = "TFX_JOB_INDEX"
NAMESPACE_ENV = "TFX_NAMESPACE"
# The TrainJob's own env (manifest.py), from the settings.
NODES_ENV = "TFX_NUM_NODES"
PORT_ENV = "TFX_WORKER_PORT"


class TFConfigError(ValueError):
    """The pod lacks what TF_CONFIG is built from; the message names the variable."""


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise TFConfigError(
            f"{name} is not set: the node's pod does not come from the template's runtime "
            "(python -m kubeflow.compile --training-runtime; docs/training-on-several-nodes.md)"
        )
    return value


def _integer(env: Mapping[str, str], name: str, minimum: int) -> int:
    value = _required(env, name)
    if not value.isdigit() or int(value) < minimum:
        raise TFConfigError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    return int(value)


def tf_config(env: Mapping[str, str]) -> dict[str, Any]:
    """The node's TF_CONFIG: every node's address, and this node's index."""
    jobset = _required(env, JOBSET_ENV)
    replicated_job = _required(env, REPLICATED_JOB_ENV)
    if replicated_job != naming.NODE:
        raise TFConfigError(
            f"{REPLICATED_JOB_ENV}: the node runs in replicated job {replicated_job!r}; the "
            f"runtime's training nodes are replicated job {naming.NODE!r}"
        )
    job_index = _integer(env, JOB_INDEX_ENV, 0)
    namespace = _required(env, NAMESPACE_ENV)
    nodes = _integer(env, NODES_ENV, 1)
    port = _integer(env, PORT_ENV, 1)
    index = _integer(env, naming.COMPLETION_INDEX_ENV, 0)
    if index >= nodes:
        raise TFConfigError(
            f"{naming.COMPLETION_INDEX_ENV} {index} is not below {NODES_ENV} {nodes}"
        )
    host = naming.subdomain(jobset)
    workers = [
        f"{naming.pod_hostname(jobset, replicated_job, job_index, i)}.{host}.{namespace}.svc:{port}"
        for i in range(nodes)
    ]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}


def tf_config_json(env: Mapping[str, str]) -> str:
    return json.dumps(tf_config(env), sort_keys=True)
