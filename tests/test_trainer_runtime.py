"""The real trainer under each strategy and precision, on real Transform output, on CPU."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from schemas import load_schema_dir
from tests.conftest import REPO_ROOT, big_tipper_labels
from tests.raw_examples import serialize_rows
from trainer.config import ModelConfig, RuntimeConfig, TrainerConfig
from trainer.export import SERVING_SIGNATURE
from trainer.model_support import PROBABILITIES_OUTPUT
from trainer.run import EXAMPLES_KEY, examples_kind, train_and_export

pytestmark = pytest.mark.slow

TRAIN_STEPS = 40
# No dropout: replicas draw different dropout masks, which would make
# "scores like a single-device model" a statement about noise.
BASE = TrainerConfig(
    model=ModelConfig(hidden_units=(32, 16), dropout=0.0),
    runtime=RuntimeConfig(
        strategy="one_device",
        accelerator="cpu",
        precision="float32",
        per_replica_batch_size=64,
        shuffle_buffer_size=500,
        deterministic_input=True,
    ),
)
MULTI_PROCESS_TIMEOUT_S = 300
TAXI = load_schema_dir().spec


def with_runtime(config: TrainerConfig, **changes) -> TrainerConfig:
    return dataclasses.replace(config, runtime=dataclasses.replace(config.runtime, **changes))


def score(export_dir: Path, data) -> np.ndarray:
    serve = tf.saved_model.load(str(export_dir)).signatures[SERVING_SIGNATURE]
    serialized = serialize_rows(
        data["raw_rows"], data["schema"], drop=TAXI.serving_excluded_columns()
    )
    out = serve(examples=tf.constant(serialized))[PROBABILITIES_OUTPUT]
    assert out.dtype == tf.float32
    return out.numpy()[:, 0]


def accuracy(scores: np.ndarray, data) -> float:
    return float(np.mean((scores > 0.5) == big_tipper_labels(data["raw_rows"])))


def ranking(scores: np.ndarray, data) -> float:
    """The chance a big tipper scores above a row that is not, ties counted half (the
    ROC curve's area): 0.5 for scores that know nothing of the label."""
    labels = big_tipper_labels(data["raw_rows"])
    above = scores[labels][:, None] - scores[~labels][None, :]
    return float(np.mean(above > 0) + np.mean(above == 0) / 2)


def train_here(
    tmp_path: Path, data, config: TrainerConfig, name: str, *, raw_examples: bool = False
) -> Path:
    export_dir = tmp_path / name / "serving"
    prefix = "raw_" if raw_examples else ""
    train_and_export(
        config=config,
        spec=TAXI,
        train_files=[data[f"{prefix}train_files"]],
        eval_files=[data[f"{prefix}eval_files"]],
        transform_output=data["transform_output"],
        serving_model_dir=str(export_dir),
        model_run_dir=str(tmp_path / name / "run"),
        train_steps=TRAIN_STEPS,
        eval_steps=2,
        raw_examples=raw_examples,
    )
    return export_dir


def process_command(
    tmp_path: Path, data, config: TrainerConfig, name: str, *, raw_examples: bool = False, **extra
) -> list[str]:
    command = [sys.executable, "-m", "tests.trainer_process"]
    command += ["--transform-output", data["transform_output"]]
    prefix = "raw_" if raw_examples else ""
    command += ["--train-files", data[f"{prefix}train_files"]]
    command += ["--eval-files", data[f"{prefix}eval_files"]]
    if raw_examples:
        command += ["--raw-examples"]
    command += ["--export-dir", str(tmp_path / name / "serving")]
    command += ["--run-dir", str(tmp_path / name / "run")]
    command += ["--trainer-config", json.dumps(dataclasses.asdict(config))]
    command += ["--train-steps", str(TRAIN_STEPS)]
    for flag, value in extra.items():
        command += [f"--{flag.replace('_', '-')}", str(value)]
    return command


def run_processes(commands_and_envs, timeout=MULTI_PROCESS_TIMEOUT_S):
    """Starts every process, waits for all; kills the rest if one fails or time runs out."""
    procs = [
        subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for cmd, env in commands_and_envs
    ]
    try:
        outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, out in zip(procs, outputs, strict=True):
        # Show the traceback, not the tensors an error message may dump after it.
        assert p.returncode == 0, out[out.find("Traceback") :][:4000]
    return outputs


def two_worker_jobs(tmp_path: Path, data, config: TrainerConfig, **options) -> list:
    """Two trainer processes as the workers of one MultiWorkerMirroredStrategy (TF_CONFIG
    on loopback ports); `options` as process_command's."""
    import portpicker

    ports = [portpicker.pick_unused_port() for _ in range(2)]
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    jobs = []
    for index in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        command = process_command(tmp_path, data, config, f"worker{index}", **options)
        jobs.append((command, {"TF_CONFIG": tf_config}))
    return jobs


@pytest.fixture(scope="module")
def single_device(tmp_path_factory, taxi_trainer_inputs):
    """The reference: one device, float32, 64 examples per step, trained in a fresh process
    on the transformed examples. Every test that compares with BASE reads it: the
    training is seeded, so a model trained here in this process would score the same."""
    tmp = tmp_path_factory.mktemp("single")
    run_processes([(process_command(tmp, taxi_trainer_inputs, BASE, "single"), {})])
    return score(tmp / "single" / "serving", taxi_trainer_inputs)


def test_single_device_model_learns(single_device, taxi_trainer_inputs):
    assert accuracy(single_device, taxi_trainer_inputs) >= 0.8


def test_mirrored_over_two_logical_cpus_scores_like_one_device(
    tmp_path, taxi_trainer_inputs, single_device
):
    # Same global batch: 2 replicas x 32 == 1 x 64, so the math is the same.
    config = with_runtime(BASE, strategy="mirrored", per_replica_batch_size=32)
    outputs = run_processes(
        [(process_command(tmp_path, taxi_trainer_inputs, config, "mirrored", logical_cpus=2), {})]
    )
    assert "replicas_in_sync = 2" in outputs[0]
    mirrored = score(tmp_path / "mirrored" / "serving", taxi_trainer_inputs)
    np.testing.assert_allclose(mirrored, single_device, atol=0.01)


def test_two_workers_train_one_model_and_the_chief_exports_it(
    tmp_path, taxi_trainer_inputs, single_device
):
    config = with_runtime(BASE, strategy="auto", per_replica_batch_size=32)
    # ExampleGen's examples: each worker's input pipeline applies the Transform
    # graph (a Trainer wired without materialization).
    outputs = run_processes(
        two_worker_jobs(tmp_path, taxi_trainer_inputs, config, raw_examples=True)
    )
    for out in outputs:
        assert "strategy = multi_worker_mirrored" in out
        assert "replicas_in_sync = 2" in out
        assert "global_batch_size = 64" in out
    assert (tmp_path / "worker0" / "serving" / "saved_model.pb").exists()
    assert not (tmp_path / "worker1" / "serving").exists()
    # The worker writes nothing where every replica of a TFJob shares one model_run_dir.
    assert not (tmp_path / "worker1" / "run").exists()
    assert (tmp_path / "worker0" / "run" / "trainer_config.json").exists()
    # Each worker reads its own half of the records, so the example order
    # differs from the single-device run: same quality, not the same numbers.
    multi = score(tmp_path / "worker0" / "serving", taxi_trainer_inputs)
    assert (
        abs(accuracy(multi, taxi_trainer_inputs) - accuracy(single_device, taxi_trainer_inputs))
        < 0.05
    )
    assert np.mean(np.abs(multi - single_device)) < 0.1


def test_two_workers_train_with_the_forks_own_loss(tmp_path, taxi_trainer_inputs, single_device):
    """A fork's loss in trainer/model.py holds under MultiWorkerMirroredStrategy, whose
    custom loop trains where Keras' fit cannot: heavily smoothed labels (0.05 and 0.95)
    keep nearly every probability near 0.5, where plain cross-entropy spreads them."""
    config = with_runtime(BASE, strategy="auto", per_replica_batch_size=32)
    outputs = run_processes(
        two_worker_jobs(tmp_path, taxi_trainer_inputs, config, label_smoothing=0.9)
    )
    assert all("strategy = multi_worker_mirrored" in out for out in outputs)
    scores = score(tmp_path / "worker0" / "serving", taxi_trainer_inputs)
    smoothed = np.abs(scores - 0.5)
    stock = np.abs(single_device - 0.5)  # what the stock loss learns from the same rows
    # Smoothed toward 0.45 and 0.55: nearly every probability stays close to 0.5 (an
    # outlying row may still saturate in 40 steps); the stock loss spreads them.
    assert np.percentile(smoothed, 99) < 0.15 and np.mean(smoothed) < 0.1
    assert np.mean(stock) > 0.25
    # Near 0.5 is also what an untrained model gives; this one ranks the rows by the label
    # about as well as the stock loss does, which scores knowing nothing of it cannot.
    learnt, stock_learnt = (ranking(s, taxi_trainer_inputs) for s in (scores, single_device))
    assert learnt > stock_learnt - 0.05, (learnt, stock_learnt)


def test_mixed_bfloat16_on_cpu_exports_float32(tmp_path, taxi_trainer_inputs, caplog):
    config = with_runtime(BASE, precision="mixed_bfloat16")
    with caplog.at_level(logging.INFO, logger="trainer"):
        export_dir = train_here(tmp_path, taxi_trainer_inputs, config, "bf16")
    assert "trainer runtime: precision = mixed_bfloat16" in caplog.text
    dtypes = tf.train.load_checkpoint(str(export_dir / "variables" / "variables"))
    float_dtypes = {d for d in dtypes.get_variable_to_dtype_map().values() if d.is_floating}
    assert float_dtypes == {tf.float32}
    scores = score(export_dir, taxi_trainer_inputs)
    assert accuracy(scores, taxi_trainer_inputs) >= 0.8


def test_raw_examples_through_the_graph_train_the_model_transformed_ones_do(
    tmp_path, taxi_trainer_inputs, single_device
):
    transformed = single_device
    raw = score(
        train_here(tmp_path, taxi_trainer_inputs, BASE, "raw", raw_examples=True),
        taxi_trainer_inputs,
    )
    # The same rows, order and seed; the graph computes what Transform wrote.
    np.testing.assert_allclose(raw, transformed, atol=0.02)
    assert accuracy(raw, taxi_trainer_inputs) >= 0.8


def test_the_trainer_refuses_an_unknown_kind_of_examples():
    assert examples_kind(None) == "transformed"
    assert examples_kind({EXAMPLES_KEY: "raw"}) == "raw"
    with pytest.raises(ValueError, match=r"custom_config\['trainer_examples'\].*'parsed'"):
        examples_kind({EXAMPLES_KEY: "parsed"})


def test_jit_compile_scores_like_without(tmp_path, taxi_trainer_inputs, single_device):
    plain = single_device
    jit = score(
        train_here(tmp_path, taxi_trainer_inputs, with_runtime(BASE, jit_compile=True), "jit"),
        taxi_trainer_inputs,
    )
    np.testing.assert_allclose(jit, plain, atol=0.02)


def test_run_directory_has_tensorboard_logs_profile_and_resolved_config(
    tmp_path, taxi_trainer_inputs
):
    config = with_runtime(BASE, profile_steps=(2, 3))
    train_here(tmp_path, taxi_trainer_inputs, config, "tb")
    run_dir = tmp_path / "tb" / "run"
    assert list(run_dir.glob("train/events.out.tfevents.*"))
    assert list(run_dir.glob("train/plugins/profile/*"))
    resolved = json.loads((run_dir / "trainer_config.json").read_text())
    assert resolved["resolved_runtime"]["strategy"].startswith("one_device")
    assert resolved["runtime"]["profile_steps"] == [2, 3]
    exported = json.loads(
        (tmp_path / "tb" / "serving" / "assets.extra" / "trainer_config.json").read_text()
    )
    assert exported == resolved


@pytest.mark.gpu
def test_mixed_float16_on_gpu_exports_float32_that_runs_on_cpu(tmp_path, taxi_trainer_inputs):
    config = with_runtime(BASE, accelerator="gpu", precision="mixed_float16")
    export_dir = train_here(tmp_path, taxi_trainer_inputs, config, "fp16")
    with tf.device("/cpu:0"):
        scores = score(export_dir, taxi_trainer_inputs)
    assert accuracy(scores, taxi_trainer_inputs) >= 0.8


@pytest.mark.gpu
def test_mirrored_nccl_on_all_gpus(tmp_path, taxi_trainer_inputs):
    if len(tf.config.list_physical_devices("GPU")) < 2:
        pytest.skip("NCCL all-reduce needs at least two GPUs")
    config = with_runtime(BASE, accelerator="gpu", strategy="mirrored")
    export_dir = train_here(tmp_path, taxi_trainer_inputs, config, "nccl")
    assert accuracy(score(export_dir, taxi_trainer_inputs), taxi_trainer_inputs) >= 0.8
