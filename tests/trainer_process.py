"""Runs `train_and_export` in a fresh process, for tests that need one.

A fresh process is needed when a test must configure devices before
TensorFlow initializes them (logical CPUs for MirroredStrategy) or run
several workers (MultiWorkerMirroredStrategy with TF_CONFIG).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transform-output", required=True)
    parser.add_argument("--train-files", required=True)
    parser.add_argument("--eval-files", required=True)
    parser.add_argument("--export-dir", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--trainer-config", required=True, help="TrainerConfig as JSON")
    parser.add_argument("--train-steps", type=int, required=True)
    parser.add_argument("--logical-cpus", type=int, default=0)
    parser.add_argument(
        "--raw-examples", action="store_true", help="the files hold ExampleGen's examples"
    )
    parser.add_argument("--schema-dir", help="dataset (default: the embedded taxi task)")
    parser.add_argument(
        "--label-smoothing",
        type=float,
        help="train with binary cross-entropy smoothed this much, as a fork's own "
        "`loss_and_metrics` in trainer/model.py would",
    )
    args = parser.parse_args(argv)
    # The parent test reads the trainer's start-up log (strategy, precision, batch).
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    import tensorflow as tf

    if args.logical_cpus:
        (cpu,) = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * args.logical_cpus
        )

    from schemas import DEFAULT_SCHEMA_DIR, load_schema_dir
    from trainer.config import TrainerConfig

    if args.label_smoothing is not None:
        import keras

        from trainer import model

        stock = model.loss_and_metrics

        def smoothed(label):
            _, metrics = stock(label)
            return keras.losses.BinaryCrossentropy(label_smoothing=args.label_smoothing), metrics

        # What a fork's edit of trainer/model.py does, in place before anything
        # imports the function from there.
        model.loss_and_metrics = smoothed

    from trainer.run import train_and_export

    metrics = train_and_export(
        config=TrainerConfig.from_dict(json.loads(args.trainer_config)),
        spec=load_schema_dir(args.schema_dir or DEFAULT_SCHEMA_DIR).spec,
        train_files=[args.train_files],
        eval_files=[args.eval_files],
        transform_output=args.transform_output,
        serving_model_dir=args.export_dir,
        model_run_dir=args.run_dir,
        train_steps=args.train_steps,
        eval_steps=2,
        raw_examples=args.raw_examples,
    )
    print(json.dumps(metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
