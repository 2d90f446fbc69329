"""The fork's trainer/search_space.py as the machinery reads it: `search_space` and,
optional, `Hyperparameters`, the model's settings with the fork's own fields
(trainer/fork DECLARED)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from trainer.config import ModelConfig
from trainer.fork import FORK_FILES, ForkInterfaceError, take, take_callable


def search_space() -> Callable[[Any], ModelConfig]:
    from trainer import search_space as space

    return take_callable(space, "search_space")


def hyperparameters_class() -> type[ModelConfig]:
    """The class of the model's settings: the fork's `Hyperparameters`, or ModelConfig for a
    search-space file that declares none (a fork made before the hook)."""
    from trainer import search_space as space

    found = take(space, "Hyperparameters", ModelConfig)
    if not (isinstance(found, type) and issubclass(found, ModelConfig)):
        raise ForkInterfaceError(
            f"{FORK_FILES['trainer.search_space']}: Hyperparameters must be a class extending "
            f"trainer.config.ModelConfig, got {found!r}"
        )
    if not dataclasses.is_dataclass(found) or not found.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise ForkInterfaceError(
            f"{FORK_FILES['trainer.search_space']}: Hyperparameters must be decorated "
            "@dataclass(frozen=True), as ModelConfig is"
        )
    return found
