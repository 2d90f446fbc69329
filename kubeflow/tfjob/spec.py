"""What the compile fixes about the TFJob: the Trainer step reads it from its `custom_config`.

Kubernetes fields are held in Kubernetes' own form (a container's
`resources`, a pod's `nodeSelector` and `tolerations`, `env` entries with
`value` or `valueFrom.secretKeyRef`), so the manifest copies them as they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# The Trainer's custom_config key that holds this spec as JSON.
CUSTOM_CONFIG_KEY = "tfjob"
CLEAN_POD_POLICIES = ("None", "Running", "All")


class TFJobSpecError(ValueError):
    """The Trainer's TFJob spec is missing or malformed."""


@dataclass(frozen=True)
class TFJobSpec:
    """One TFJob: a Chief and `workers` Workers, all alike.

    image: the pipeline image (every replica runs the project from it).
    command: what each replica's container runs; the step adds its inputs as args.
    workers: Worker replicas beside the Chief; the Chief trains too.
    working_dir: where the image holds the project.
    resources, node_selector, tolerations: each replica's pod, Kubernetes' form.
    env: each replica's container env (the object store's, its secret refs).
    namespace: where the job goes; None: the step's own namespace.
    service_account: the replicas' pods' service account; None: the namespace's default.
    active_deadline_seconds, backoff_limit, clean_pod_policy,
    ttl_seconds_after_finished: the job's runPolicy.
    """

    image: str
    command: tuple[str, ...]
    workers: int
    working_dir: str
    resources: Mapping[str, Any] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    env: tuple[Mapping[str, Any], ...] = ()
    namespace: str | None = None
    service_account: str | None = None
    active_deadline_seconds: int = 86_400
    backoff_limit: int = 0
    clean_pod_policy: str = "Running"
    ttl_seconds_after_finished: int = 86_400

    def __post_init__(self) -> None:
        if not self.image or not self.command:
            raise TFJobSpecError("image and command: required (the replicas' container)")
        if self.workers < 1:
            raise TFJobSpecError(
                f"workers: must be >= 1, got {self.workers} (a Chief alone gets no TF_CONFIG "
                "from the operator and trains on one node: use the pod engine)"
            )
        if self.clean_pod_policy not in CLEAN_POD_POLICIES:
            raise TFJobSpecError(
                f"clean_pod_policy: must be one of {CLEAN_POD_POLICIES}, "
                f"got {self.clean_pod_policy!r}"
            )
        for name in ("active_deadline_seconds", "ttl_seconds_after_finished"):
            if getattr(self, name) <= 0:
                raise TFJobSpecError(f"{name}: must be > 0, got {getattr(self, name)}")
        if self.backoff_limit < 0:
            raise TFJobSpecError(f"backoff_limit: must be >= 0, got {self.backoff_limit}")

    @property
    def replicas(self) -> int:
        return 1 + self.workers

    def to_custom_config(self) -> dict[str, str]:
        return {CUSTOM_CONFIG_KEY: json.dumps(asdict(self), sort_keys=True)}

    @classmethod
    def from_custom_config(cls, custom_config: Mapping[str, Any] | None) -> TFJobSpec:
        if not custom_config or CUSTOM_CONFIG_KEY not in custom_config:
            raise TFJobSpecError(
                f"custom_config has no {CUSTOM_CONFIG_KEY!r}: the TFJob Trainer executor runs "
                "only in a pipeline compiled with training.engine tfjob (kubeflow/compile.py)"
            )
        values = json.loads(custom_config[CUSTOM_CONFIG_KEY])
        values["command"] = tuple(values.get("command", ()))
        values["tolerations"] = tuple(values.get("tolerations", ()))
        values["env"] = tuple(values.get("env", ()))
        try:
            return cls(**values)
        except TypeError as err:
            raise TFJobSpecError(f"custom_config[{CUSTOM_CONFIG_KEY!r}]: {err}") from None
