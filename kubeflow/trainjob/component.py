"""The Trainer component, training on a TrainJob: TFX's Trainer with the TrainJob executor."""

from __future__ import annotations

from tfx.components import Trainer
from tfx.dsl.components.base import executor_spec

from kubeflow.trainjob.executor import Executor


class TrainJobTrainer(Trainer):
    """TFX's Trainer (same inputs, outputs and `run_fn`) whose step trains through a TrainJob.

    Its `custom_config` must hold the job's spec (spec.TrainJobSpec.to_custom_config).
    """

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
