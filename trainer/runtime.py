"""Strategy and precision: chosen from the hardware, overridable from configuration.

The choice is split into pure functions over a `HardwareInfo` snapshot (tested
without any GPU) and a thin `resolve_runtime` that reads the real hardware,
applies the choice and logs it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass

import keras
import tensorflow as tf

from trainer.config import RuntimeConfig

logger = logging.getLogger(__name__)

# Tensor cores that make float16 pay off start at Volta (7.0).
MIN_FLOAT16_COMPUTE_CAPABILITY = (7, 0)


class RuntimeConfigError(ValueError):
    """The requested strategy/precision cannot work on this hardware."""


@dataclass(frozen=True)
class GpuInfo:
    name: str
    compute_capability: tuple[int, int] | None


@dataclass(frozen=True)
class HardwareInfo:
    """What training can see: GPUs and the workers TF_CONFIG names."""

    gpus: tuple[GpuInfo, ...]
    num_workers: int = 1

    def describe(self) -> str:
        if self.gpus:
            gpus = ", ".join(
                f"{g.name} (compute capability "
                f"{'.'.join(map(str, g.compute_capability)) if g.compute_capability else '?'})"
                for g in self.gpus
            )
        else:
            gpus = "none"
        return f"GPUs: {gpus}; workers: {self.num_workers}"


@dataclass(frozen=True)
class RuntimePlan:
    """The resolved choice: what `resolve_runtime` builds and what gets logged."""

    strategy: str
    precision: str
    use_gpus: bool
    jit_compile: bool


def workers_in_tf_config(tf_config: str | None) -> int:
    """Number of workers (chief included) that a TF_CONFIG value names."""
    if not tf_config:
        return 1
    try:
        cluster = json.loads(tf_config).get("cluster", {})
    except (json.JSONDecodeError, AttributeError) as err:
        raise RuntimeConfigError(f"TF_CONFIG is not valid JSON: {err}") from err
    return max(1, len(cluster.get("chief", [])) + len(cluster.get("worker", [])))


def plan_runtime(config: RuntimeConfig, hardware: HardwareInfo) -> RuntimePlan:
    """Resolves every `auto` in `config` against `hardware`; raises on impossible requests."""
    gpus = hardware.gpus
    if config.accelerator == "cpu":
        gpus = ()
    elif config.accelerator == "gpu" and not gpus:
        if not config.allow_cpu_fallback:
            raise RuntimeConfigError(
                "runtime.accelerator is 'gpu' but TensorFlow sees no GPU. The usual cause is a "
                "CUDA/cuDNN version that does not match this TensorFlow build "
                f"({tf.__version__}, built for CUDA {_build_info('cuda_version')}, "
                f"cuDNN {_build_info('cudnn_version')}); check `nvidia-smi` and the image. "
                "Set runtime.allow_cpu_fallback to train on CPU instead."
            )
        logger.warning("No GPU visible; falling back to CPU as runtime.allow_cpu_fallback allows.")

    strategy = config.strategy
    if strategy == "tpu":
        raise RuntimeConfigError(
            "runtime.strategy 'tpu' is not supported by this template: TFX 1.16's Kubeflow "
            "runner schedules GPU/CPU pods only. Use one_device, mirrored or multi_worker_mirrored."
        )
    if strategy == "auto":
        if hardware.num_workers > 1:
            strategy = "multi_worker_mirrored"
        elif len(gpus) > 1:
            strategy = "mirrored"
        else:
            strategy = "one_device"
    elif strategy == "one_device" and hardware.num_workers > 1:
        raise RuntimeConfigError(
            f"runtime.strategy 'one_device' cannot train on the {hardware.num_workers} workers "
            "TF_CONFIG names; use multi_worker_mirrored or auto"
        )
    elif strategy == "mirrored" and hardware.num_workers > 1:
        raise RuntimeConfigError(
            f"runtime.strategy 'mirrored' is single-host but TF_CONFIG names "
            f"{hardware.num_workers} workers; use multi_worker_mirrored or auto"
        )

    precision = config.precision
    if precision == "auto":
        capable = bool(gpus) and all(
            g.compute_capability is not None
            and g.compute_capability >= MIN_FLOAT16_COMPUTE_CAPABILITY
            for g in gpus
        )
        precision = "mixed_float16" if capable else "float32"
    elif precision == "mixed_float16" and not gpus:
        raise RuntimeConfigError(
            "runtime.precision 'mixed_float16' needs a GPU (float16 on CPU is slower than "
            "float32); use mixed_bfloat16 or float32 on CPU"
        )

    return RuntimePlan(
        strategy=strategy,
        precision=precision,
        use_gpus=bool(gpus),
        jit_compile=config.jit_compile,
    )


def _build_info(key: str) -> str:
    return str(tf.sysconfig.get_build_info().get(key, "n/a"))


def detect_hardware(config: RuntimeConfig) -> HardwareInfo:
    """Reads the visible devices; applies memory growth before anything touches the GPUs.

    Only physical-device queries here: they leave the TensorFlow context
    uninitialized, which MultiWorkerMirroredStrategy requires at creation.
    """
    physical_gpus = tf.config.list_physical_devices("GPU")
    if config.gpu_memory_growth:
        for gpu in physical_gpus:
            # RuntimeError: already initialized by an earlier run in this process.
            with contextlib.suppress(RuntimeError):
                tf.config.experimental.set_memory_growth(gpu, True)
    gpus = []
    for gpu in physical_gpus:
        details = tf.config.experimental.get_device_details(gpu)
        gpus.append(
            GpuInfo(
                name=details.get("device_name", gpu.name),
                compute_capability=details.get("compute_capability"),
            )
        )
    return HardwareInfo(
        gpus=tuple(gpus),
        num_workers=workers_in_tf_config(os.environ.get("TF_CONFIG")),
    )


def build_strategy(plan: RuntimePlan) -> tf.distribute.Strategy:
    """The tf.distribute strategy a plan names."""
    if plan.strategy == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if plan.use_gpus else "/cpu:0")
    if plan.strategy == "mirrored":
        if plan.use_gpus:
            return tf.distribute.MirroredStrategy(cross_device_ops=tf.distribute.NcclAllReduce())
        # Several logical CPUs (tests, or a deliberately split host).
        cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(
            devices=cpus, cross_device_ops=tf.distribute.ReductionToOneDevice()
        )
    if plan.strategy == "multi_worker_mirrored":
        implementation = (
            tf.distribute.experimental.CommunicationImplementation.NCCL
            if plan.use_gpus
            else tf.distribute.experimental.CommunicationImplementation.RING
        )
        return tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=implementation
            )
        )
    raise RuntimeConfigError(f"unknown strategy {plan.strategy!r}")


def dtype_policy(plan: RuntimePlan) -> keras.DTypePolicy:
    return keras.DTypePolicy(plan.precision)


@dataclass(frozen=True)
class Runtime:
    plan: RuntimePlan
    hardware: HardwareInfo
    strategy: tf.distribute.Strategy
    global_batch_size: int

    @property
    def policy(self) -> keras.DTypePolicy:
        return dtype_policy(self.plan)

    def summary(self) -> dict[str, object]:
        return {
            "hardware": self.hardware.describe(),
            "strategy": f"{self.plan.strategy} ({type(self.strategy).__name__})",
            "devices": ", ".join(self.strategy.extended.worker_devices),
            "replicas_in_sync": self.strategy.num_replicas_in_sync,
            "precision": self.plan.precision,
            "jit_compile": self.plan.jit_compile,
            "global_batch_size": self.global_batch_size,
        }


def resolve_runtime(config: RuntimeConfig) -> Runtime:
    """Detects hardware, plans, builds the strategy and logs what was chosen.

    Call it before any other TensorFlow work in the process (see detect_hardware).
    """
    if config.accelerator == "cpu":
        tf.config.set_visible_devices([], "GPU")
    hardware = detect_hardware(config)
    plan = plan_runtime(config, hardware)
    strategy = build_strategy(plan)
    runtime = Runtime(
        plan=plan,
        hardware=hardware,
        strategy=strategy,
        global_batch_size=config.per_replica_batch_size * strategy.num_replicas_in_sync,
    )
    for key, value in runtime.summary().items():
        logger.info("trainer runtime: %s = %s", key, value)
    return runtime
