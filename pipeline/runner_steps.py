"""The hook through which a runner adds its own steps to `create_pipeline`'s DAG.

`create_pipeline` builds the DAG every runner shares. A runner that needs
more passes a `RunnerSteps`, whose methods `create_pipeline` calls at three
points while it builds:

* `before_example_gen`: steps that run first, and what ExampleGen is told of
  them (Kubeflow: an input snapshot, since its cache key has no trace of the
  data);
* `trainer`: the Trainer component, from the stock Trainer's arguments
  (Kubeflow: a Trainer whose step trains on a TFJob);
* `after`: steps that read what the DAG's steps produce (Kubeflow: the run
  report, written by a last step because nothing runs after a Kubeflow DAG).

The base class adds nothing: that is the local runner's DAG. Kubeflow's
additions are `kubeflow.pipeline_steps.KubeflowSteps`; nothing in `pipeline/`
imports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfx.components import Trainer
from tfx.dsl.components.base.base_component import BaseComponent
from tfx.orchestration.data_types import RuntimeParameter

from contract.dataset.spec import DatasetSpec


@dataclass(frozen=True)
class FirstSteps:
    """What `RunnerSteps.before_example_gen` returns.

    `steps` run before ExampleGen; `input_snapshot` (a placeholder for one of
    their outputs, or None) becomes ExampleGen's `input_snapshot` parameter.
    """

    steps: tuple[BaseComponent, ...] = ()
    input_snapshot: Any = None


@dataclass(frozen=True)
class DagSteps:
    """The DAG's steps as built, handed to `RunnerSteps.after`: wire new steps to their outputs.

    `built` is every step built so far, in the order they were added (the
    runner's first steps included); `dag[step_id]` is one of them.
    `pipeline_name` is the DAG's name.
    """

    pipeline_name: str
    built: tuple[BaseComponent, ...]

    def __getitem__(self, step_id: str) -> BaseComponent:
        return {step.id: step for step in self.built}[step_id]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(step.id for step in self.built)


class RunnerSteps:
    """What a runner adds to the DAG. This base adds nothing (the local runner's DAG)."""

    def before_example_gen(
        self, *, data_root: str | RuntimeParameter, dataset: DatasetSpec
    ) -> FirstSteps:
        return FirstSteps()

    def trainer(self, **trainer_args: Any) -> BaseComponent:
        """The Trainer component; `trainer_args` are the stock Trainer's keyword arguments."""
        return Trainer(**trainer_args)

    def after(self, dag: DagSteps) -> Sequence[BaseComponent]:
        return ()
