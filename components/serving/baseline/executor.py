"""The Evaluator's baseline, the model currently served: the work of the LatestServedModel step.

components/serving/baseline/component.py declares the step for TFX (local runs, TFX's
compiler); on Kubeflow its pod runs `copy_latest_served` through
kubeflow/light_step.py, without TFX's entrypoint, TensorFlow or TFMA
(docs/kubeflow.md, "What a step loads"). Files on local paths and s3:// go
through components/store_files.py.
"""

from __future__ import annotations

import os

from absl import logging

from components import store_files
from components.artifact_names import HAS_MODEL_PROPERTY, SERVED_PATH_PROPERTY
from components.artifact_views import OutputArtifact
from components.serving.served_version import served_version

SERVED_VERSION_PROPERTY = "served_version"
# Where the Evaluator looks for a SavedModel inside a Model artifact.
SERVING_SUBDIR = "Format-Serving"


def copy_latest_served(
    serving_model_dir: str, baseline_model: OutputArtifact, rolled_out_record: str = ""
) -> None:
    """Copies the version served under `serving_model_dir` (served_version.py's answer,
    with the KServe rollout's record where `rolled_out_record` names one) into
    `baseline_model` (`has_model` 1, its version and path), or marks it empty
    (`has_model` 0)."""
    version = served_version(serving_model_dir, rolled_out_record or None)
    if version is None:
        logging.info("Nothing served under %s yet: no baseline.", serving_model_dir)
        baseline_model.set_int_custom_property(HAS_MODEL_PROPERTY, 0)
        return
    served_path = os.path.join(serving_model_dir, version)
    store_files.copy_dir(served_path, os.path.join(baseline_model.uri, SERVING_SUBDIR))
    baseline_model.set_int_custom_property(HAS_MODEL_PROPERTY, 1)
    baseline_model.set_string_custom_property(SERVED_VERSION_PROPERTY, version)
    baseline_model.set_string_custom_property(SERVED_PATH_PROPERTY, served_path)
    logging.info("Baseline: served version %s (%s).", version, served_path)
