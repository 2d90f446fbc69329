"""The fork's trainer/model.py as the machinery reads it: `build_model`, `loss_and_metrics`
and, optional, `optimizer` (trainer/fork DECLARED)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.fork import ForkInterfaceError, retired_compile_model, take_callable

if TYPE_CHECKING:
    import keras

    from contract.dataset.sections import LabelSpec
    from trainer.config import ModelConfig


def build_model(
    config: ModelConfig,
    label: LabelSpec,
    input_sizes: dict[str, int | None],
    *,
    dtype_policy: Any = "float32",
) -> keras.Model:
    from trainer import model

    build = take_callable(model, "build_model")
    return build(config, label, input_sizes, dtype_policy=dtype_policy)


def loss_and_metrics(label: LabelSpec) -> tuple[Any, list[Any]]:
    from trainer import model

    return take_callable(model, "loss_and_metrics")(label)


def template_optimizer(config: ModelConfig) -> keras.optimizers.Optimizer:
    """The template's optimizer, for a model file that names none: Adam at the learning rate."""
    import keras

    return keras.optimizers.Adam(learning_rate=config.learning_rate)


def optimizer(config: ModelConfig) -> keras.optimizers.Optimizer:
    from trainer import model

    if not hasattr(model, "optimizer") and hasattr(model, "compile_model"):
        # A model file from before the interface compiled the model itself; an optimizer
        # edited there would be dropped without a word, so the run stops and says so.
        raise ForkInterfaceError(retired_compile_model())
    return take_callable(model, "optimizer", template_optimizer)(config)
