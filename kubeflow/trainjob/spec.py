"""What the compile fixes about the TrainJob and its runtime: the Trainer step reads it from
its `custom_config`, and `python -m kubeflow.compile --training-runtime` writes the runtime from it.

Kubernetes fields are held in Kubernetes' own form, as kubeflow/tfjob/spec.py's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# The Trainer's custom_config key that holds this spec as JSON.
CUSTOM_CONFIG_KEY = "trainjob"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")


class TrainJobSpecError(ValueError):
    """The Trainer's TrainJob spec is missing or malformed."""


@dataclass(frozen=True)
class TrainJobSpec:
    """One TrainJob of `nodes` alike nodes, on the runtime `runtime`.

    image: the pipeline image (every node runs the project from it).
    command: what each node's container runs; the step adds its inputs as args.
    nodes: the TrainJob's numNodes; node 0 is multi_worker_mirrored's chief.
    working_dir: where the image holds the project (the runtime's container).
    resources: each node's resourcesPerNode, Kubernetes' form.
    node_selector, tolerations, service_account: the runtime's pod template
      (Trainer v2.1.0 and v2.2.0 override a pod's placement with different
      TrainJob fields, so the TrainJob leaves it to the runtime).
    env: each node's container env (the object store's, its secret refs).
    namespace: where the job goes; None: the step's own namespace.
    runtime, runtime_kind: the runtime the TrainJob references.
    port: where each node's collective ops listen.
    active_deadline_seconds: the step's wait, and the runtime's Job deadline.
    """

    image: str
    command: tuple[str, ...]
    nodes: int
    working_dir: str
    runtime: str
    runtime_kind: str = "ClusterTrainingRuntime"
    port: int = 2222
    resources: Mapping[str, Any] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    env: tuple[Mapping[str, Any], ...] = ()
    namespace: str | None = None
    service_account: str | None = None
    active_deadline_seconds: int = 86_400

    def __post_init__(self) -> None:
        if not self.image or not self.command:
            raise TrainJobSpecError("image and command: required (the nodes' container)")
        if self.nodes < 2:
            raise TrainJobSpecError(
                f"nodes: must be >= 2, got {self.nodes} (one node trains in the Trainer step's "
                "own pod: use the pod engine)"
            )
        if self.runtime_kind not in RUNTIME_KINDS:
            raise TrainJobSpecError(
                f"runtime_kind: must be one of {RUNTIME_KINDS}, got {self.runtime_kind!r}"
            )
        if not 0 < self.port < 65536:
            raise TrainJobSpecError(f"port: must be 1-65535, got {self.port}")
        if self.active_deadline_seconds <= 0:
            raise TrainJobSpecError(
                f"active_deadline_seconds: must be > 0, got {self.active_deadline_seconds}"
            )

    def to_custom_config(self) -> dict[str, str]:
        return {CUSTOM_CONFIG_KEY: json.dumps(asdict(self), sort_keys=True)}

    @classmethod
    def from_custom_config(cls, custom_config: Mapping[str, Any] | None) -> TrainJobSpec:
        if not custom_config or CUSTOM_CONFIG_KEY not in custom_config:
            raise TrainJobSpecError(
                f"custom_config has no {CUSTOM_CONFIG_KEY!r}: the TrainJob Trainer executor runs "
                "only in a pipeline compiled with training.engine trainjob (kubeflow/compile.py)"
            )
        values = json.loads(custom_config[CUSTOM_CONFIG_KEY])
        for name in ("command", "tolerations", "env"):
            values[name] = tuple(values.get(name, ()))
        try:
            return cls(**values)
        except TypeError as err:
            raise TrainJobSpecError(f"custom_config[{CUSTOM_CONFIG_KEY!r}]: {err}") from None
