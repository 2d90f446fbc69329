"""Training throughput per precision policy, and the input pipeline alone.

    ./dev exec python -m benchmarks.trainer_throughput
    KERAS_BACKEND=jax python -m benchmarks.trainer_throughput   # model part only

Model part: the real model (trainer/model.py) trains on synthetic batches
shaped like Transform's output, on whatever device Keras uses; steady-state
examples/s is timed after a warm-up, for float32 and every mixed policy the
device supports (mixed_float16 needs a GPU). The input part (TensorFlow only)
times trainer/data.py over TFRecords of the same shape, with no model.
Ratios are against float32, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from contract.dataset.names import LABEL_KEY
from contract.dataset.parse import load_spec
from trainer.model_support import random_model_inputs

# The embedded taxi task's model (read as a plain file: no TensorFlow needed here).
TAXI_SPEC_FILE = Path(__file__).resolve().parents[1] / "schemas" / "chicago_taxi" / "dataset.yaml"


def taxi_inputs(num_examples: int):
    spec = load_spec(TAXI_SPEC_FILE)
    return random_model_inputs(spec.model_input_sizes(), spec.label, num_examples)


def device_description() -> tuple[str, bool]:
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return f"jax: {device.device_kind}", device.platform == "gpu"
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
            return f"tensorflow: {name}", True
        return "tensorflow: CPU", False
    return backend, False


def model_throughput(
    precision: str, batch_size: int, steps: int, warmup_steps: int, hidden_units: tuple[int, ...]
) -> float:
    import keras

    from trainer.fork.model_file import build_model
    from trainer.fork.search_space_file import hyperparameters_class
    from trainer.model_support import compile_model

    keras.utils.set_random_seed(0)
    spec = load_spec(TAXI_SPEC_FILE)
    config = hyperparameters_class()(hidden_units=hidden_units)
    model = build_model(config, spec.label, spec.model_input_sizes(), dtype_policy=precision)
    compile_model(
        model,
        config,
        spec.label,
        precision=precision,
        jit_compile=keras.backend.backend() == "jax",
    )
    inputs, labels = taxi_inputs(batch_size * steps)
    warm = {k: v[: batch_size * warmup_steps] for k, v in inputs.items()}
    model.fit(warm, labels[: batch_size * warmup_steps], batch_size=batch_size, epochs=1, verbose=0)
    start = time.perf_counter()
    model.fit(inputs, labels, batch_size=batch_size, epochs=1, verbose=0, shuffle=False)
    return batch_size * steps / (time.perf_counter() - start)


def input_pipeline_throughput(batch_size: int, steps: int, *, cache: bool) -> float:
    import tensorflow as tf

    from trainer.data import make_dataset

    inputs, labels = taxi_inputs(batch_size * 8)
    spec = {
        name: tf.io.FixedLenFeature([], tf.float32 if values.dtype == np.float32 else tf.int64)
        for name, values in inputs.items()
    }
    spec[LABEL_KEY] = tf.io.FixedLenFeature([], tf.int64)
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for shard in range(4):
            path = os.path.join(tmp, f"part-{shard}.gz")
            with tf.io.TFRecordWriter(path, options="GZIP") as writer:
                for i in range(shard, batch_size * 8, 4):
                    feature = {
                        name: (
                            tf.train.Feature(float_list=tf.train.FloatList(value=[values[i]]))
                            if values.dtype == np.float32
                            else tf.train.Feature(int64_list=tf.train.Int64List(value=[values[i]]))
                        )
                        for name, values in inputs.items()
                    }
                    feature[LABEL_KEY] = tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[int(labels[i])])
                    )
                    writer.write(
                        tf.train.Example(
                            features=tf.train.Features(feature=feature)
                        ).SerializeToString()
                    )
            files.append(path)
        dataset = make_dataset(
            files, spec, LABEL_KEY, batch_size, training=True, cache=cache, seed=0
        )
        iterator = iter(dataset)
        for _ in range(5):
            next(iterator)
        start = time.perf_counter()
        for _ in range(steps):
            next(iterator)
        return batch_size * steps / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument(
        "--wide",
        type=lambda s: tuple(int(u) for u in s.split(",")),
        default=(1024, 1024, 512),
        help="hidden units of a wider variant, where tensor cores have work to do",
    )
    args = parser.parse_args(argv)

    import keras

    device, has_gpu = device_description()
    precisions = ["float32", "mixed_bfloat16"] + (["mixed_float16"] if has_gpu else [])
    from trainer.config import ModelConfig

    rows = []
    default_float32 = 0.0
    for label, hidden in (("default model", ModelConfig().hidden_units), ("wide model", args.wide)):
        results = {
            p: model_throughput(p, args.batch_size, args.steps, args.warmup_steps, hidden)
            for p in precisions
        }
        name = f"{label} ({'x'.join(map(str, hidden))})"
        for precision, rate in results.items():
            ratio = f"{rate / results['float32']:.2f}x"
            rows.append((f"{name}, {precision}", f"{rate:,.0f}", ratio))
        if not has_gpu:
            rows.append((f"{name}, mixed_float16", "n/a (needs a GPU)", ""))
        default_float32 = default_float32 or results["float32"]
    if keras.backend.backend() == "tensorflow":
        for cache in (False, True):
            rate = input_pipeline_throughput(args.batch_size, args.steps, cache=cache)
            what = f"input pipeline alone, {'cached' if cache else 'read + parse'}"
            rows.append((what, f"{rate:,.0f}", f"{rate / default_float32:.2f}x"))
    print(
        f"device: {device}; batch {args.batch_size}; "
        f"{args.steps} timed steps after {args.warmup_steps} warm-up"
    )
    header = ("what", "examples/s", "vs float32 (input: vs default model float32)")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
