"""Strategy and precision selection from a hardware snapshot (no GPU needed)."""

from __future__ import annotations

import json

import pytest

from trainer.config import RuntimeConfig
from trainer.runtime import (
    GpuInfo,
    HardwareInfo,
    RuntimeConfigError,
    plan_runtime,
    workers_in_tf_config,
)

NO_GPU = HardwareInfo(gpus=())
T4 = GpuInfo("Tesla T4", (7, 5))
P100 = GpuInfo("Tesla P100", (6, 0))
A100 = GpuInfo("NVIDIA A100", (8, 0))


def plan(hardware: HardwareInfo, **config):
    return plan_runtime(RuntimeConfig(**config), hardware)


@pytest.mark.parametrize(
    ("hardware", "strategy", "precision", "use_gpus"),
    [
        (NO_GPU, "one_device", "float32", False),
        (HardwareInfo(gpus=(T4,)), "one_device", "mixed_float16", True),
        (HardwareInfo(gpus=(P100,)), "one_device", "float32", True),
        (HardwareInfo(gpus=(A100, A100)), "mirrored", "mixed_float16", True),
        # One pre-Volta card among several disables float16 for all of them.
        (HardwareInfo(gpus=(A100, P100)), "mirrored", "float32", True),
        (HardwareInfo(gpus=(A100,), num_workers=2), "multi_worker_mirrored", "mixed_float16", True),
        (HardwareInfo(gpus=(), num_workers=3), "multi_worker_mirrored", "float32", False),
        (HardwareInfo(gpus=(GpuInfo("unknown", None),)), "one_device", "float32", True),
    ],
)
def test_auto_rules(hardware, strategy, precision, use_gpus):
    chosen = plan(hardware)
    assert (chosen.strategy, chosen.precision, chosen.use_gpus) == (strategy, precision, use_gpus)


def test_every_choice_can_be_forced():
    chosen = plan(
        HardwareInfo(gpus=(A100, A100)),
        strategy="one_device",
        precision="mixed_bfloat16",
        jit_compile=True,
    )
    assert (chosen.strategy, chosen.precision, chosen.jit_compile) == (
        "one_device",
        "mixed_bfloat16",
        True,
    )


def test_accelerator_cpu_ignores_visible_gpus():
    chosen = plan(HardwareInfo(gpus=(A100, A100)), accelerator="cpu")
    assert (chosen.strategy, chosen.precision, chosen.use_gpus) == ("one_device", "float32", False)


def test_gpu_requested_but_none_visible_fails_with_the_likely_cause():
    with pytest.raises(RuntimeConfigError, match=r"sees no GPU.*CUDA/cuDNN"):
        plan(NO_GPU, accelerator="gpu")


def test_gpu_requested_falls_back_to_cpu_when_allowed():
    chosen = plan(NO_GPU, accelerator="gpu", allow_cpu_fallback=True)
    assert (chosen.strategy, chosen.use_gpus) == ("one_device", False)


@pytest.mark.parametrize(
    ("hardware", "config", "message"),
    [
        (NO_GPU, {"precision": "mixed_float16"}, "mixed_float16' needs a GPU"),
        (HardwareInfo(gpus=(), num_workers=2), {"strategy": "one_device"}, "cannot train on the 2"),
        (HardwareInfo(gpus=(A100,), num_workers=2), {"strategy": "mirrored"}, "single-host"),
        (HardwareInfo(gpus=(A100,)), {"strategy": "tpu"}, "'tpu' is not supported"),
    ],
)
def test_bad_combinations_are_rejected(hardware, config, message):
    with pytest.raises(RuntimeConfigError, match=message):
        plan(hardware, **config)


def test_workers_are_counted_from_tf_config():
    assert workers_in_tf_config(None) == 1
    assert workers_in_tf_config("") == 1
    cluster = {"chief": ["a:1"], "worker": ["b:1", "c:1"]}
    assert workers_in_tf_config(json.dumps({"cluster": cluster})) == 3
    with pytest.raises(RuntimeConfigError, match="TF_CONFIG is not valid JSON"):
        workers_in_tf_config("{nope")


def test_is_chief():
    from trainer.run import is_chief

    cluster = {"worker": ["a:1", "b:1"]}
    assert is_chief(None)
    assert is_chief(json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    assert not is_chief(json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}))
    with_chief = {"chief": ["c:1"], **cluster}
    assert is_chief(json.dumps({"cluster": with_chief, "task": {"type": "chief", "index": 0}}))
    assert not is_chief(json.dumps({"cluster": with_chief, "task": {"type": "worker", "index": 0}}))


@pytest.mark.parametrize(
    ("steps", "plan"),
    [
        (200, (4, 50)),
        (1000, (10, 100)),
        (203, (1, 203)),
        (60, (1, 60)),
        (1, (1, 1)),
        (150, (3, 50)),
    ],
)
def test_epoch_plan_runs_exactly_the_requested_steps(steps, plan):
    from trainer.run import epoch_plan

    epochs, per_epoch = epoch_plan(steps)
    assert (epochs, per_epoch) == plan
    assert epochs * per_epoch == steps
