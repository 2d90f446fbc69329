"""What each node of the Trainer's TrainJob runs (training.engine trainjob).

    python -m kubeflow.trainjob.node --inputs JSON --outputs JSON --exec-properties JSON

It sets TF_CONFIG from what the pod has (tf_config.py), then trains as a
TFJob's replica does (kubeflow/tfjob/replica.py): the same `fn_args`, the
same `run_fn`, under `multi_worker_mirrored`; node 0 writes the model.
"""

from __future__ import annotations

import os
import sys

from kubeflow.trainjob.tf_config import TFConfigError, tf_config_json


def set_tf_config() -> None:
    """TF_CONFIG from the pod's env; a pod that lacks what it needs exits with one line."""
    try:
        os.environ["TF_CONFIG"] = tf_config_json(os.environ)
    except TFConfigError as err:
        sys.stderr.write(f"error: {err}\n")
        sys.exit(2)
    print(f"TF_CONFIG {os.environ['TF_CONFIG']}", flush=True)


def main(argv: list[str] | None = None) -> None:
    set_tf_config()
    # TFX and TensorFlow load only now: a pod that cannot build TF_CONFIG says so at once.
    from kubeflow.tfjob import replica

    replica.main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
