"""The runtime parameters a package's runs take, by the names the compile gives them.

The compile declares them (kubeflow/package_dags.py) and writes their defaults
into the spec (kubeflow/spec_completion.py); `kubeflow.submit` passes a run's
values for them, and what submit and `kubeflow.release` share tells the scoring
package by its `scores_root` (kubeflow/kfp_api.py). Nothing here imports TFX.
"""

from __future__ import annotations

import json

TRAIN_ARGS_PARAMETER = "train_args"
DATA_ROOT_PARAMETER = "data_root"
# The scoring package's: where its partitions go (docs/batch-scoring.md).
SCORES_ROOT_PARAMETER = "scores_root"
# The scoring package's pin: a served version number, or "" for the served version.
MODEL_VERSION_PARAMETER = "model_version"


def train_args_value(train_steps: int) -> str:
    """The `train_args` parameter for `train_steps` (TrainArgs as JSON)."""
    return json.dumps({"num_steps": train_steps})
