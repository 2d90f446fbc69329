"""The Trainer component, training on a TFJob: TFX's Trainer with the TFJob executor."""

from __future__ import annotations

from tfx.components import Trainer
from tfx.dsl.components.base import executor_spec

from kubeflow.tfjob.executor import Executor


class TFJobTrainer(Trainer):
    """TFX's Trainer (same inputs, outputs and `run_fn`) whose step trains through a TFJob.

    Its `custom_config` must hold the job's spec (spec.TFJobSpec.to_custom_config).
    """

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
