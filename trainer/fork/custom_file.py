"""The fork's trainer/custom.py as the machinery reads it: `extra_features`, the function a
spec's `label.derive` names and, optional, `adjust_features` (trainer/fork DECLARED).
Transform's graph calls these, so serving applies them as training did."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contract.dataset.error import DatasetSpecError
from trainer.fork import FORK_FILES, take_callable


def extra_features(inputs: Mapping[str, Any]) -> dict[str, Any]:
    from trainer import custom

    return dict(take_callable(custom, "extra_features")(inputs))


def _as_computed(features: dict[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The template's default: the spec's features as the template computed them."""
    del inputs
    return features


def adjust_features(features: dict[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's features after the fork's `adjust_features`: each a key of `features`."""
    from trainer import custom

    adjusted = dict(take_callable(custom, "adjust_features", _as_computed)(dict(features), inputs))
    added = sorted(set(adjusted) - set(features))
    if added:
        raise DatasetSpecError(
            f"{FORK_FILES['trainer.custom']} adjust_features: {added[0]!r} is not one of the "
            "spec's features; it may replace or drop them (keys ending in _xf), and a new "
            "model input goes in extra_features"
        )
    return adjusted


def derived_label(name: str) -> Callable[[Mapping[str, Any]], Any]:
    """The function `label.derive` names."""
    from trainer import custom

    derive = getattr(custom, name, None)
    if name.startswith("_") or not callable(derive):
        raise DatasetSpecError(
            f"label.derive: {FORK_FILES['trainer.custom']} has no function {name!r}"
        )
    return derive
