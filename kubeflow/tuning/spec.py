"""The Tune step's spec: what `kubeflow.compile --tuning` fixes from the `tuning:` settings."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


class TuningSpecError(ValueError):
    """The Tune step's spec is missing or malformed."""


@dataclass(frozen=True)
class TuningSpec:
    """image, working_dir: the worker pods' (the pipeline image, where it holds the project).
    workers: worker pods beside the chief (the step's own pod).
    max_trials, steps_per_trial, eval_steps, deadline_seconds: the search's budget.
    search_root: where search directories go (under the pipeline root, on the object store).
    accept_partial: output the winner of a search the deadline cut short (else the step fails).
    resources, node_selector, tolerations, env, namespace, service_account: each worker pod's.
    """

    image: str
    working_dir: str
    workers: int
    max_trials: int
    steps_per_trial: int
    eval_steps: int
    deadline_seconds: int
    search_root: str
    accept_partial: bool = False
    resources: Mapping[str, Any] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    env: tuple[Mapping[str, Any], ...] = ()
    namespace: str | None = None
    service_account: str | None = None

    def __post_init__(self) -> None:
        for name in ("workers", "max_trials", "steps_per_trial", "eval_steps", "deadline_seconds"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TuningSpecError(f"{name}: must be an integer >= 1, got {value!r}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TuningSpec:
        values = json.loads(text)
        values["tolerations"] = tuple(values.get("tolerations", ()))
        values["env"] = tuple(values.get("env", ()))
        try:
            return cls(**values)
        except TypeError as err:
            raise TuningSpecError(f"the Tune step's spec: {err}") from None
