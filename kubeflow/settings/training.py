"""Where the Trainer step trains: the `training:` section of kubeflow/pipeline.yaml.

`engine: pod` trains in the Trainer step's own pod (its `components.Trainer`
placement: one node, its GPUs under `mirrored`). `engine: tfjob` hands
training to a TFJob of Kubeflow's Training Operator: a Chief and `workers`
Workers, each on a node of its own (`training.tfjob` placement), training one
model under `multi_worker_mirrored` (kubeflow/tfjob/).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubeflow.settings.fields import SettingsError, check, namespace_and_service_account
from kubeflow.settings.placement import Placement, parse_placement
from kubeflow.settings.retries import DURATION, duration_seconds
from kubeflow.tfjob.spec import CLEAN_POD_POLICIES, TFJobSpec
from trainer.fields import field_names

if TYPE_CHECKING:
    from trainer.config import RuntimeConfig

ENGINES = ("pod", "tfjob")
# Strategies that train across the job's replicas (`auto` picks
# multi_worker_mirrored when TF_CONFIG names several workers).
MULTI_WORKER_STRATEGIES = ("auto", "multi_worker_mirrored")
# What each replica's container runs (kubeflow/tfjob/replica.py).
REPLICA_COMMAND = ("python", "-m", "kubeflow.tfjob.replica")


@dataclass(frozen=True)
class TFJobSettings:
    """The TFJob's replicas and run policy. Durations as in `retries:` (30m, 6h, 1d)."""

    workers: int = 1
    placement: Placement | None = None
    namespace: str | None = None
    service_account: str | None = None
    deadline: str = "24h"
    backoff_limit: int = 0
    clean_pod_policy: str = "Running"
    ttl_after_finished: str = "24h"

    def spec(
        self, *, image: str, working_dir: str, env: tuple[Mapping[str, Any], ...]
    ) -> TFJobSpec:
        """The spec the Trainer step creates its job from."""
        placement = self.placement or Placement()
        return TFJobSpec(
            image=image,
            command=REPLICA_COMMAND,
            workers=self.workers,
            working_dir=working_dir,
            resources=placement.resources.to_kubernetes(),
            node_selector=dict(placement.node_selector),
            tolerations=tuple(t.to_kubernetes() for t in placement.tolerations),
            env=env,
            namespace=self.namespace,
            service_account=self.service_account,
            active_deadline_seconds=duration_seconds(self.deadline),
            backoff_limit=self.backoff_limit,
            clean_pod_policy=self.clean_pod_policy,
            ttl_seconds_after_finished=duration_seconds(self.ttl_after_finished),
        )


@dataclass(frozen=True)
class Training:
    engine: str = "pod"
    tfjob: TFJobSettings = field(default_factory=TFJobSettings)

    def step_deadline(self) -> int | None:
        """Seconds the Trainer step may run, where the settings bound it: on a TFJob, its
        deadline (the step waits for the job, which the operator fails past it)."""
        return duration_seconds(self.tfjob.deadline) if self.engine == "tfjob" else None


class TrainingSettingsError(ValueError):
    """A combination of settings that cannot train; the message names the fields."""


def check_training(
    training: Training,
    runtime: RuntimeConfig,
    *,
    config_variant: str,
    trainer: Placement,
    trainer_id: str,
) -> None:
    """Refuses what cannot work with a TFJob, before anything is compiled.

    `trainer`: the Trainer step's own placement (`components.<trainer_id>`).
    """
    if training.engine != "tfjob":
        return
    tfjob = training.tfjob
    variant = f"config_variant {config_variant}"
    if runtime.strategy not in MULTI_WORKER_STRATEGIES:
        raise TrainingSettingsError(
            f"training.engine: tfjob trains on {1 + tfjob.workers} replicas under "
            f"multi_worker_mirrored, but {variant} sets runtime.strategy {runtime.strategy!r}, "
            "which trains on one; use a variant with strategy auto or multi_worker_mirrored "
            "(gpu_multi_node)"
        )
    step = trainer.resources
    if step.gpu:
        raise TrainingSettingsError(
            f"components.{trainer_id}.resources.gpu: with training.engine tfjob the step's own "
            "pod only creates the TFJob and waits; give the replicas their GPUs in "
            "training.tfjob.resources"
        )
    replica = tfjob.placement.resources if tfjob.placement else None
    if (
        runtime.accelerator == "gpu"
        and not runtime.allow_cpu_fallback
        and not (replica and replica.gpu)
    ):
        raise TrainingSettingsError(
            f"training.tfjob.resources.gpu: {variant} trains on GPUs (runtime.accelerator "
            "'gpu'), but the replicas request none"
        )


def parse_training(values: Any) -> Training:
    """The `training:` section; `training.tfjob` is checked whichever engine is chosen."""
    where = "training"
    values = check.typed(values or {}, dict, where)
    check.no_unknown(values, field_names(Training), where)
    engine = check.choice(values.get("engine", "pod"), ENGINES, f"{where}.engine")
    where = "training.tfjob"
    raw = check.typed(values.get("tfjob") or {}, dict, where)
    # The replicas' placement is written inline, beside the job's own fields.
    own = [name for name in field_names(TFJobSettings) if name != "placement"]
    check.no_unknown(raw, [*own, *field_names(Placement)], where)
    workers = raw.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise SettingsError(
            f"{where}.workers: must be an integer >= 1 (Workers beside the Chief), got "
            f"{workers!r}; one replica is no multi-node job: use training.engine pod"
        )
    backoff_limit = raw.get("backoff_limit", 0)
    if not isinstance(backoff_limit, int) or isinstance(backoff_limit, bool) or backoff_limit < 0:
        raise SettingsError(
            f"{where}.backoff_limit: must be an integer >= 0, got {backoff_limit!r}"
        )
    policy = raw.get("clean_pod_policy", "Running")
    if policy not in CLEAN_POD_POLICIES:
        raise SettingsError(
            f"{where}.clean_pod_policy: must be None, Running or All (quote None), got {policy!r}"
        )
    durations = {}
    for name, default in (("deadline", "24h"), ("ttl_after_finished", "24h")):
        value = raw.get(name, default)
        if not isinstance(value, str) or not DURATION.match(value) or not duration_seconds(value):
            raise SettingsError(
                f"{where}.{name}: {value!r} is not a duration above zero (30m, 6h, 1d)"
            )
        durations[name] = value
    names = namespace_and_service_account(raw, where)
    placement = parse_placement(
        {k: raw[k] for k in ("resources", "node_selector", "tolerations") if k in raw}, where
    )
    return Training(
        engine=engine,
        tfjob=TFJobSettings(
            workers=workers,
            placement=placement,
            namespace=names["namespace"],
            service_account=names["service_account"],
            deadline=durations["deadline"],
            backoff_limit=backoff_limit,
            clean_pod_policy=policy,
            ttl_after_finished=durations["ttl_after_finished"],
        ),
    )
