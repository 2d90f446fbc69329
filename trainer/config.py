"""Typed trainer configuration, carried from the pipeline into `run_fn`.

The pipeline serializes a `TrainerConfig` into the Trainer's `custom_config`
(plain JSON, so it survives Kubeflow compilation); `run_fn` rebuilds it with
`TrainerConfig.from_custom_config`, rejecting unknown or mistyped fields.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

StrategyName = Literal["auto", "one_device", "mirrored", "multi_worker_mirrored", "tpu"]
PrecisionName = Literal["auto", "float32", "mixed_float16", "mixed_bfloat16"]
AcceleratorName = Literal["auto", "gpu", "cpu"]

CUSTOM_CONFIG_KEY = "trainer_config"


@dataclass(frozen=True)
class RuntimeConfig:
    """How training uses the hardware. Every `auto` is resolved at start-up and logged.

    Attributes:
      strategy: tf.distribute strategy. `auto`: several workers in TF_CONFIG ->
        multi_worker_mirrored; several GPUs -> mirrored (NCCL); else one_device.
      precision: Keras dtype policy. `auto`: mixed_float16 when every visible GPU
        has compute capability >= 7.0, else float32.
      accelerator: `gpu` fails when no GPU is visible (unless
        `allow_cpu_fallback`); `cpu` hides GPUs; `auto` uses what is there.
      allow_cpu_fallback: with accelerator=`gpu`, train on CPU instead of failing.
      jit_compile: compile the train step with XLA.
      gpu_memory_growth: allocate GPU memory on demand instead of all at once,
        so several processes (or TF and a data loader) can share one GPU.
      per_replica_batch_size: examples per device per step; the global batch is
        this times the replicas in sync.
      cache_dataset: keep decoded training records in memory after the first pass.
      deterministic_input: read and batch records in a reproducible order (same
        seed, same batches) at some cost in input throughput.
      shuffle_buffer_size: examples held for shuffling the training stream.
      profile_steps: (first, last) train steps to trace with the TensorFlow
        profiler into TensorBoard, or None for no trace.
    """

    strategy: StrategyName = "auto"
    precision: PrecisionName = "auto"
    accelerator: AcceleratorName = "auto"
    allow_cpu_fallback: bool = False
    jit_compile: bool = False
    gpu_memory_growth: bool = True
    per_replica_batch_size: int = 256
    cache_dataset: bool = True
    deterministic_input: bool = False
    shuffle_buffer_size: int = 10_000
    profile_steps: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        _check_choice("runtime.strategy", self.strategy, StrategyName)
        _check_choice("runtime.precision", self.precision, PrecisionName)
        _check_choice("runtime.accelerator", self.accelerator, AcceleratorName)
        _check_positive("runtime.per_replica_batch_size", self.per_replica_batch_size)
        _check_positive("runtime.shuffle_buffer_size", self.shuffle_buffer_size)
        if self.profile_steps is not None:
            first, last = self.profile_steps
            if not 0 < first <= last:
                raise ValueError(
                    f"runtime.profile_steps must be (first, last) with 0 < first <= last, "
                    f"got {self.profile_steps!r}"
                )
            object.__setattr__(self, "profile_steps", (int(first), int(last)))


@dataclass(frozen=True)
class ModelConfig:
    """Model shape and optimizer settings."""

    hidden_units: tuple[int, ...] = (128, 64)
    embedding_dim: int = 8
    learning_rate: float = 0.003
    dropout: float = 0.1

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden_units", tuple(int(u) for u in self.hidden_units))
        if not self.hidden_units or any(u <= 0 for u in self.hidden_units):
            raise ValueError(f"model.hidden_units must be positive sizes, got {self.hidden_units}")
        _check_positive("model.embedding_dim", self.embedding_dim)
        if not self.learning_rate > 0:
            raise ValueError(f"model.learning_rate must be > 0, got {self.learning_rate}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"model.dropout must be in [0, 1), got {self.dropout}")


@dataclass(frozen=True)
class TrainerConfig:
    """Everything `run_fn` needs beyond what TFX passes in `fn_args`."""

    model: ModelConfig = field(default_factory=ModelConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    seed: int = 42

    def to_custom_config(self) -> dict[str, Any]:
        """The dict to hand to the Trainer's `custom_config`."""
        return {CUSTOM_CONFIG_KEY: json.dumps(dataclasses.asdict(self), sort_keys=True)}

    @classmethod
    def from_custom_config(
        cls, custom_config: dict[str, Any] | None, model_class: type[ModelConfig] = ModelConfig
    ) -> TrainerConfig:
        """`model_class`: the model settings' class, the fork's `Hyperparameters`
        (trainer/fork/search_space_file.py), which may add fields to ModelConfig's."""
        if not custom_config or CUSTOM_CONFIG_KEY not in custom_config:
            return cls(model=model_class())
        return cls.from_dict(json.loads(custom_config[CUSTOM_CONFIG_KEY]), model_class)

    @classmethod
    def from_dict(
        cls, values: dict[str, Any], model_class: type[ModelConfig] = ModelConfig
    ) -> TrainerConfig:
        values = dict(values)
        _reject_unknown("trainer config", values, cls)
        model = values.pop("model", {})
        runtime = values.pop("runtime", {})
        _reject_unknown("model", model, model_class)
        _reject_unknown("runtime", runtime, RuntimeConfig)
        if runtime.get("profile_steps") is not None:
            runtime = {**runtime, "profile_steps": tuple(runtime["profile_steps"])}
        model = {k: tuple(v) if isinstance(v, list) else v for k, v in model.items()}
        return cls(model=model_class(**model), runtime=RuntimeConfig(**runtime), **values)


def _check_choice(name: str, value: object, literal: object) -> None:
    choices = get_args(literal)
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _reject_unknown(what: str, values: dict[str, Any], cls: type) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown {what} field(s): {', '.join(unknown)}; known: {sorted(known)}")
