"""Typed pipeline configuration and its named variants.

One default (`PipelineConfig()`), and variants derived from it by changing a
few fields, so a GPU or Kubeflow setup cannot drift from the local one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from trainer.config import RuntimeConfig, TrainerConfig
from trainer.hyperparameters import FrozenHyperparameters


@dataclass(frozen=True)
class PipelineConfig:
    """Everything about the DAG that is neither a path (the runner's job) nor about the
    dataset (its spec, `trainer/dataset_spec.py`, names the pipeline and sets the blessing
    rules)."""

    train_steps: int = 200
    eval_steps: int = 20
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    enable_cache: bool = True

    def __post_init__(self) -> None:
        if self.train_steps <= 0:
            raise ValueError(f"train_steps must be positive, got {self.train_steps}")
        if self.eval_steps <= 0:
            raise ValueError(f"eval_steps must be positive, got {self.eval_steps}")

    def replace(self, **changes) -> PipelineConfig:
        return dataclasses.replace(self, **changes)

    def with_hyperparameters(self, frozen: FrozenHyperparameters | None) -> PipelineConfig:
        """The Trainer's model settings replaced by the tuner's frozen winner, if any."""
        if frozen is None:
            return self
        model = frozen.apply(self.trainer.model)
        return self.replace(trainer=dataclasses.replace(self.trainer, model=model))

    def with_runtime(self, **changes) -> PipelineConfig:
        runtime = dataclasses.replace(self.trainer.runtime, **changes)
        return self.replace(trainer=dataclasses.replace(self.trainer, runtime=runtime))


def local_cpu() -> PipelineConfig:
    """The default: trains on this machine's CPU."""
    return PipelineConfig().with_runtime(accelerator="cpu", precision="float32")


def gpu_1x() -> PipelineConfig:
    """One GPU, mixed precision chosen from its compute capability."""
    return PipelineConfig().with_runtime(accelerator="gpu", strategy="one_device")


def gpu_8x_amp() -> PipelineConfig:
    """One node of several GPUs: mirrored with NCCL, float16 with loss scaling, XLA."""
    return PipelineConfig(train_steps=2000).with_runtime(
        accelerator="gpu",
        strategy="mirrored",
        precision="mixed_float16",
        jit_compile=True,
        per_replica_batch_size=1024,
    )


def gpu_multi_node() -> PipelineConfig:
    """Several GPU nodes, one model: a Kubeflow TFJob's Chief and workers
    (kubeflow/pipeline.yaml, `training.engine: tfjob`), NCCL across them."""
    return gpu_8x_amp().with_runtime(strategy="multi_worker_mirrored", jit_compile=False)


VARIANTS = {
    "default": PipelineConfig,
    "local_cpu": local_cpu,
    "gpu_1x": gpu_1x,
    "gpu_8x_amp": gpu_8x_amp,
    "gpu_multi_node": gpu_multi_node,
}


def variant(name: str) -> PipelineConfig:
    try:
        return VARIANTS[name]()
    except KeyError:
        raise ValueError(
            f"unknown config variant {name!r}; choose from {sorted(VARIANTS)}"
        ) from None


__all__ = [
    "PipelineConfig",
    "RuntimeConfig",
    "TrainerConfig",
    "gpu_1x",
    "gpu_8x_amp",
    "gpu_multi_node",
    "local_cpu",
    "variant",
]
