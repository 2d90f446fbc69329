"""`PipelineConfig`: everything about the DAG that is neither a path nor about the dataset.

The template's class; the fork's pipeline/config.py names the variants built from
it (`VARIANTS`), read through trainer/fork/config_file.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from trainer.config import RuntimeConfig, TrainerConfig
from trainer.fork.search_space_file import hyperparameters_class
from trainer.hyperparameters import FrozenHyperparameters


def _trainer_config() -> TrainerConfig:
    # The model's settings are the fork's class (trainer/search_space.py `Hyperparameters`),
    # so a field a fork adds has its default in every variant.
    return TrainerConfig(model=hyperparameters_class()())


@dataclass(frozen=True)
class PipelineConfig:
    """Everything about the DAG that is neither a path (the runner's job) nor about the
    dataset (its spec, `contract/dataset/spec.py`, names the pipeline and sets the blessing
    rules)."""

    train_steps: int = 200
    eval_steps: int = 20
    trainer: TrainerConfig = field(default_factory=_trainer_config)
    enable_cache: bool = True

    def __post_init__(self) -> None:
        if self.train_steps <= 0:
            raise ValueError(f"train_steps must be positive, got {self.train_steps}")
        if self.eval_steps <= 0:
            raise ValueError(f"eval_steps must be positive, got {self.eval_steps}")

    def replace(self, **changes) -> PipelineConfig:
        return dataclasses.replace(self, **changes)

    def with_hyperparameters(self, frozen: FrozenHyperparameters | None) -> PipelineConfig:
        """The Trainer's model settings replaced by the tuner's frozen winner, if any."""
        if frozen is None:
            return self
        model = frozen.apply(self.trainer.model)
        return self.replace(trainer=dataclasses.replace(self.trainer, model=model))

    def with_runtime(self, **changes) -> PipelineConfig:
        runtime = dataclasses.replace(self.trainer.runtime, **changes)
        return self.replace(trainer=dataclasses.replace(self.trainer, runtime=runtime))

    def with_model(self, **changes) -> PipelineConfig:
        """The model's settings with `changes` (a variant's layer sizes, say)."""
        model = dataclasses.replace(self.trainer.model, **changes)
        return self.replace(trainer=dataclasses.replace(self.trainer, model=model))


__all__ = ["PipelineConfig", "RuntimeConfig", "TrainerConfig"]
