"""Typed pipeline configuration and its named variants.

One default (`PipelineConfig()`), and variants derived from it by changing a
few fields, so a GPU or Kubeflow setup cannot drift from the local one.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from trainer.config import RuntimeConfig, TrainerConfig

# Share of "big tippers" in the sample is 22.5%: always answering "no" scores
# 0.775. A model is only worth serving if it beats that clearly.
DEFAULT_MIN_BINARY_ACCURACY = 0.8
PIPELINE_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")


@dataclass(frozen=True)
class EvaluationConfig:
    """Blessing rules the Evaluator applies before anything is pushed.

    Attributes:
      min_binary_accuracy: absolute floor on eval accuracy.
      max_accuracy_drop: how much accuracy may fall below the baseline (the
        latest blessed model) and still be blessed. A small tolerance keeps a
        retrain on the same data from flapping on run-to-run noise.
      slice_features: raw columns to report metrics for, slice by slice.
    """

    min_binary_accuracy: float = DEFAULT_MIN_BINARY_ACCURACY
    max_accuracy_drop: float = 0.01
    slice_features: tuple[str, ...] = ("payment_type",)

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_binary_accuracy <= 1.0:
            raise ValueError(
                f"evaluation.min_binary_accuracy must be in [0, 1], got {self.min_binary_accuracy}"
            )
        if not 0.0 <= self.max_accuracy_drop <= 1.0:
            raise ValueError(
                f"evaluation.max_accuracy_drop must be in [0, 1], got {self.max_accuracy_drop}"
            )


@dataclass(frozen=True)
class PipelineConfig:
    """Everything about the DAG that is not a path (paths are the runner's job)."""

    pipeline_name: str = "taxi-big-tipper"
    train_steps: int = 200
    eval_steps: int = 20
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    enable_cache: bool = True

    def __post_init__(self) -> None:
        if not PIPELINE_NAME_PATTERN.fullmatch(self.pipeline_name):
            raise ValueError(
                f"pipeline_name {self.pipeline_name!r} must match {PIPELINE_NAME_PATTERN.pattern} "
                "(Kubeflow Pipelines' rule, applied locally too so both runs share one name)"
            )
        if self.train_steps <= 0:
            raise ValueError(f"train_steps must be positive, got {self.train_steps}")
        if self.eval_steps <= 0:
            raise ValueError(f"eval_steps must be positive, got {self.eval_steps}")

    def replace(self, **changes) -> PipelineConfig:
        return dataclasses.replace(self, **changes)

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


VARIANTS = {
    "default": PipelineConfig,
    "local_cpu": local_cpu,
    "gpu_1x": gpu_1x,
    "gpu_8x_amp": gpu_8x_amp,
}


def variant(name: str) -> PipelineConfig:
    try:
        return VARIANTS[name]()
    except KeyError:
        raise ValueError(
            f"unknown config variant {name!r}; choose from {sorted(VARIANTS)}"
        ) from None


__all__ = [
    "EvaluationConfig",
    "PipelineConfig",
    "RuntimeConfig",
    "TrainerConfig",
    "gpu_1x",
    "gpu_8x_amp",
    "local_cpu",
    "variant",
]
