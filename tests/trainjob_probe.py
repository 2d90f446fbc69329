"""A TrainJob node's container for the step's tests: TF_CONFIG as a node builds it, then a
few lines of work (no TFX), as tests/test_tfjob.py's replicas are.

    python -m tests.trainjob_probe            # env: SLEEP, FAIL_INDEX, TRAIN_DIR

With TRAIN_DIR set it trains a small Keras model under MultiWorkerMirroredStrategy
over the nodes' collective ops, and the chief (worker 0, as trainer/run.py
decides it) writes it to TRAIN_DIR/model; the others to scratch space.
"""

from __future__ import annotations

import json
import os
import sys
import time

from kubeflow.trainjob.node import set_tf_config


def train(out: str) -> None:
    import numpy as np
    import tensorflow as tf

    from trainer.run import is_chief

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    print(f"replicas_in_sync = {strategy.num_replicas_in_sync}", flush=True)
    with strategy.scope():
        # MEAN: an update in a replica is averaged across the nodes (an all-reduce).
        w = tf.Variable(tf.zeros((2, 1)), aggregation=tf.VariableAggregation.MEAN)
    rng = np.random.default_rng(int(json.loads(os.environ["TF_CONFIG"])["task"]["index"]))
    x = rng.normal(size=(16, 2)).astype("float32")
    y = x @ np.array([[1.0], [2.0]], dtype="float32")

    @tf.function
    def step():
        def replica_step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((tf.matmul(x, w) - y) ** 2)
            w.assign_sub(0.1 * tape.gradient(loss, w))
            return loss

        return strategy.reduce("MEAN", strategy.run(replica_step), axis=None)

    epochs = 20
    for _ in range(epochs):
        loss = float(step())
    print(f"epoch {epochs} loss {loss:.4f}", flush=True)
    if is_chief(os.environ["TF_CONFIG"]):
        os.makedirs(os.path.join(out, "model"), exist_ok=True)
        np.save(os.path.join(out, "model", "weights.npy"), w.numpy())
        print(f"chief wrote {out}/model", flush=True)
    else:
        print("not the chief: wrote nothing", flush=True)


def main() -> None:
    set_tf_config()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    workers = json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"]
    print(f"node {task['index']} of {len(workers)}", flush=True)
    if os.environ.get("TRAIN_DIR"):
        os.makedirs(os.environ["TRAIN_DIR"], exist_ok=True)
        train(os.environ["TRAIN_DIR"])
    if str(task["index"]) == os.environ.get("FAIL_INDEX"):
        print("node out of patience", flush=True)
        sys.exit(3)
    time.sleep(float(os.environ.get("SLEEP", "0.5")))
    print(f"finished {task['index']}", flush=True)


if __name__ == "__main__":
    main()
