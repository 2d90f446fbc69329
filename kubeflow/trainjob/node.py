"""What each node of the Trainer's TrainJob runs (training.engine trainjob).

    python -m kubeflow.trainjob.node --inputs JSON --outputs JSON --exec-properties JSON

It sets TF_CONFIG from what the pod has (tf_config.py), then trains as a
TFJob's replica does (kubeflow/tfjob/replica.py): the same `fn_args`, the
same `run_fn`, under `multi_worker_mirrored`; node 0 writes the model.
"""

from __future__ import annotations

import os
import sys

from kubeflow.tfjob import replica
from kubeflow.trainjob.tf_config import TFConfigError, tf_config_json


def main(argv: list[str] | None = None) -> None:
    try:
        os.environ["TF_CONFIG"] = tf_config_json(os.environ)
    except TFConfigError as err:
        sys.stderr.write(f"error: {err}\n")
        sys.exit(2)
    print(f"TF_CONFIG {os.environ['TF_CONFIG']}", flush=True)
    replica.main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
