"""Where the Trainer step trains: the `training:` section of kubeflow/pipeline.yaml.

`engine: pod` trains in the Trainer step's own pod (its `components.Trainer`
placement: one node, its GPUs under `mirrored`). `engine: tfjob` hands
training to a TFJob of Kubeflow's Training Operator: a Chief and `workers`
Workers, each on a node of its own (`training.tfjob` placement), training one
model under `multi_worker_mirrored` (kubeflow/tfjob/). `engine: trainjob`
hands it to a TrainJob of Kubeflow Trainer v2, what the Kubeflow platform
installs: `nodes` nodes (`training.trainjob` placement) on the template's
runtime (kubeflow/trainjob/).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contract.fields import field_names
from kubeflow.settings.fields import SettingsError, check, namespace_and_service_account
from kubeflow.settings.placement import Placement, parse_placement
from kubeflow.settings.retries import DURATION, duration_seconds
from kubeflow.tfjob.spec import CLEAN_POD_POLICIES, TFJobSpec
from kubeflow.trainjob.spec import RUNTIME_KINDS, TrainJobSpec

_DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

if TYPE_CHECKING:
    from trainer.config import RuntimeConfig

ENGINES = ("pod", "tfjob", "trainjob")
# The engines that train on several nodes, and the section that says how.
MULTI_NODE_ENGINES = ("tfjob", "trainjob")
# Strategies that train across the job's replicas (`auto` picks
# multi_worker_mirrored when TF_CONFIG names several workers).
MULTI_WORKER_STRATEGIES = ("auto", "multi_worker_mirrored")
# What each replica's container runs (kubeflow/tfjob/replica.py).
REPLICA_COMMAND = ("python", "-m", "kubeflow.tfjob.replica")
# What each TrainJob node's container runs (kubeflow/trainjob/node.py).
NODE_COMMAND = ("python", "-m", "kubeflow.trainjob.node")
DEFAULT_RUNTIME = "tfx-multi-worker"


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
        return TFJobSpec(
            image=image,
            command=REPLICA_COMMAND,
            workers=self.workers,
            working_dir=working_dir,
            **_pod_fields(self, env),
            backoff_limit=self.backoff_limit,
            clean_pod_policy=self.clean_pod_policy,
            ttl_seconds_after_finished=duration_seconds(self.ttl_after_finished),
        )


@dataclass(frozen=True)
class TrainJobSettings:
    """The TrainJob's nodes and the runtime it references. Durations as in `retries:`."""

    nodes: int = 2
    placement: Placement | None = None
    namespace: str | None = None
    service_account: str | None = None
    deadline: str = "24h"
    runtime: str = DEFAULT_RUNTIME
    runtime_kind: str = "ClusterTrainingRuntime"
    port: int = 2222

    def spec(
        self, *, image: str, working_dir: str, env: tuple[Mapping[str, Any], ...]
    ) -> TrainJobSpec:
        """The spec the Trainer step creates its job from, and the runtime is written from."""
        return TrainJobSpec(
            image=image,
            command=NODE_COMMAND,
            nodes=self.nodes,
            working_dir=working_dir,
            runtime=self.runtime,
            runtime_kind=self.runtime_kind,
            port=self.port,
            **_pod_fields(self, env),
        )


def _pod_fields(engine: TFJobSettings | TrainJobSettings, env) -> dict[str, Any]:
    """What both engines' pods take from their section: placement, env, namespace,
    service account and the deadline."""
    placement = engine.placement or Placement()
    return {
        "resources": placement.resources.to_kubernetes(),
        "node_selector": dict(placement.node_selector),
        "tolerations": tuple(t.to_kubernetes() for t in placement.tolerations),
        "env": env,
        "namespace": engine.namespace,
        "service_account": engine.service_account,
        "active_deadline_seconds": duration_seconds(engine.deadline),
    }


@dataclass(frozen=True)
class Training:
    engine: str = "pod"
    tfjob: TFJobSettings = field(default_factory=TFJobSettings)
    trainjob: TrainJobSettings = field(default_factory=TrainJobSettings)

    @property
    def deadline_setting(self) -> str:
        """The setting that bounds the Trainer step (engine tfjob or trainjob)."""
        return f"training.{self.engine}.deadline"

    def step_deadline(self) -> int | None:
        """Seconds the Trainer step may run, where the settings bound it: on a TFJob or a
        TrainJob, its deadline (the step waits for the job, and ends it past it)."""
        if self.engine == "tfjob":
            return duration_seconds(self.tfjob.deadline)
        if self.engine == "trainjob":
            return duration_seconds(self.trainjob.deadline)
        return None

    def nodes(self) -> int:
        """How many nodes train: the job's replicas, or 1 in the step's pod."""
        if self.engine == "tfjob":
            return 1 + self.tfjob.workers
        return self.trainjob.nodes if self.engine == "trainjob" else 1

    def node_placement(self) -> Placement | None:
        """Each node's placement on a multi-node engine."""
        section = self.tfjob if self.engine == "tfjob" else self.trainjob
        return section.placement


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
    """Refuses what cannot work with a TFJob or a TrainJob, before anything is compiled.

    `trainer`: the Trainer step's own placement (`components.<trainer_id>`).
    """
    engine = training.engine
    if engine not in MULTI_NODE_ENGINES:
        return
    job = "TFJob" if engine == "tfjob" else "TrainJob"
    nodes = "replicas" if engine == "tfjob" else "nodes"
    variant = f"config_variant {config_variant}"
    if runtime.strategy not in MULTI_WORKER_STRATEGIES:
        raise TrainingSettingsError(
            f"training.engine: {engine} trains on {training.nodes()} {nodes} under "
            f"multi_worker_mirrored, but {variant} sets runtime.strategy {runtime.strategy!r}, "
            "which trains on one; use a variant with strategy auto or multi_worker_mirrored "
            "(gpu_multi_node)"
        )
    step = trainer.resources
    if step.gpu:
        raise TrainingSettingsError(
            f"components.{trainer_id}.resources.gpu: with training.engine {engine} the step's "
            f"own pod only creates the {job} and waits; give the {nodes} their GPUs in "
            f"training.{engine}.resources"
        )
    placement = training.node_placement()
    replica = placement.resources if placement else None
    if (
        runtime.accelerator == "gpu"
        and not runtime.allow_cpu_fallback
        and not (replica and replica.gpu)
    ):
        raise TrainingSettingsError(
            f"training.{engine}.resources.gpu: {variant} trains on GPUs (runtime.accelerator "
            f"'gpu'), but the {nodes} request none"
        )


def parse_training(values: Any) -> Training:
    """The `training:` section; `training.tfjob` and `training.trainjob` are checked
    whichever engine is chosen."""
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
    durations = {name: _duration(raw, name, where) for name in ("deadline", "ttl_after_finished")}
    names = namespace_and_service_account(raw, where)
    placement = _placement(raw, where)
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
        trainjob=parse_trainjob(values.get("trainjob")),
    )


def _duration(raw: Mapping[str, Any], name: str, where: str) -> str:
    value = raw.get(name, "24h")
    if not isinstance(value, str) or not DURATION.match(value) or not duration_seconds(value):
        raise SettingsError(f"{where}.{name}: {value!r} is not a duration above zero (30m, 6h, 1d)")
    return value


def _placement(raw: Mapping[str, Any], where: str) -> Placement:
    # The nodes' placement is written inline, beside the job's own fields.
    return parse_placement(
        {k: raw[k] for k in ("resources", "node_selector", "tolerations") if k in raw}, where
    )


def _integer(raw: Mapping[str, Any], name: str, default: int, low: int, high: int, why: str):
    value = raw.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise SettingsError(f"{name}: must be an integer from {low} to {high}{why}, got {value!r}")
    return value


def parse_trainjob(values: Any) -> TrainJobSettings:
    """`training.trainjob`: the TrainJob's nodes, runtime, port, deadline and placement."""
    where = "training.trainjob"
    raw = check.typed(values or {}, dict, where)
    own = [name for name in field_names(TrainJobSettings) if name != "placement"]
    check.no_unknown(raw, [*own, *field_names(Placement)], where)
    try:
        nodes = _integer(raw, "nodes", 2, 2, 99, " (one node: use training.engine pod)")
        port = _integer(raw, "port", 2222, 1, 65535, "")
    except SettingsError as err:
        raise SettingsError(f"{where}.{err}") from None
    runtime = raw.get("runtime", DEFAULT_RUNTIME)
    if not isinstance(runtime, str) or not _DNS_1123.match(runtime):
        raise SettingsError(
            f"{where}.runtime: {runtime!r} is not a runtime name (a DNS-1123 subdomain)"
        )
    kind = check.choice(
        raw.get("runtime_kind", "ClusterTrainingRuntime"), RUNTIME_KINDS, f"{where}.runtime_kind"
    )
    names = namespace_and_service_account(raw, where)
    return TrainJobSettings(
        nodes=nodes,
        placement=_placement(raw, where),
        namespace=names["namespace"],
        service_account=names["service_account"],
        deadline=_duration(raw, "deadline", where),
        runtime=runtime,
        runtime_kind=kind,
        port=port,
    )
