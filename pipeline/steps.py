"""The DAG's steps, declared once: each step's id, outputs and roles.

A step is one node of the DAG (a TFX component with a stable `.with_id`).
`create_pipeline` (pipeline/pipeline.py) wires the steps declared here;
what else keys on a step reads its entry instead of keeping a list of its
own:

* `beam`: the step runs a Beam pipeline (TFX's BaseBeamComponent), so it
  takes per-step Beam arguments (`create_pipeline`'s
  `beam_pipeline_args_by_step`; Kubeflow's `beam:` settings);
* `cached`: False for a step that reads state outside the pipeline and so
  must run every time (both runners switch caching off for it);
* `retry`: whether Kubeflow retries the step when no setting says
  (kubeflow/settings/retries.py);
* `report`: which of its outputs fill which part of the run report (the
  fields of `ArtifactUris` and `RunOutputs`, components/report/), on both
  runners.

The steps only Kubeflow has are declared the same way in
kubeflow/pipeline_steps.py, which adds them to this DAG.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

RetryRole = Literal["by_default", "on_request", "never"]


@dataclass(frozen=True)
class Retry:
    """When Kubeflow retries a failed step.

    `by_default`: its failures are mostly infrastructure (an object store
    that timed out, a node that went away), so it retries unless the
    settings say otherwise. `on_request`: only where the `retries:` settings
    ask. `never`: a retry cannot cure its failures (`reason` says why), and
    the settings may not ask for one.
    """

    role: RetryRole
    reason: str = ""

    def __post_init__(self) -> None:
        if (self.role == "never") != bool(self.reason):
            raise ValueError(f"Retry({self.role!r}): a reason goes with 'never', and only there")

    @classmethod
    def never(cls, reason: str) -> Retry:
        return cls("never", reason)


BY_DEFAULT = Retry("by_default")
ON_REQUEST = Retry("on_request")


@dataclass(frozen=True)
class Step:
    """One step: its id, the output keys its component declares, and its roles (module doc).

    `report` maps a report field to the output key that fills it.
    """

    id: str
    outputs: tuple[str, ...]
    beam: bool = False
    cached: bool = True
    retry: Retry = ON_REQUEST
    report: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.report.values()) - set(self.outputs))
        if unknown:
            raise ValueError(f"{self.id}: reports {unknown}, which are not among its outputs")
        object.__setattr__(self, "report", MappingProxyType(dict(self.report)))


@dataclass(frozen=True)
class Steps:
    """Steps in the order the DAG adds them; ids and report fields are each unique."""

    steps: tuple[Step, ...]

    def __post_init__(self) -> None:
        for what, names in (
            ("step id", [s.id for s in self.steps]),
            ("report field", [f for s in self.steps for f in s.report]),
        ):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"each {what} names one step; {twice} name more")

    def __add__(self, other: Steps) -> Steps:
        return Steps(self.steps + other.steps)

    def __getitem__(self, step_id: str) -> Step:
        return {s.id: s for s in self.steps}[step_id]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.steps)

    @property
    def beam_ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.steps if s.beam)

    def beam_args_by_step(
        self, by_step: Mapping[str, Sequence[str]] | None
    ) -> dict[str, list[str]]:
        """Per-step Beam arguments, checked: ValueError for a step that runs no Beam."""
        args = {k: list(v) for k, v in (by_step or {}).items()}
        not_beam = sorted(set(args) - set(self.beam_ids))
        if not_beam:
            raise ValueError(
                f"beam_pipeline_args_by_step: {not_beam} run no Beam; "
                f"the Beam steps are {list(self.beam_ids)}"
            )
        return args

    @property
    def uncached_ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.steps if not s.cached)

    @property
    def retried_by_default(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.steps if s.retry.role == "by_default")

    @property
    def never_retried(self) -> Mapping[str, str]:
        """Step id -> why a retry cannot cure its failures."""
        return MappingProxyType(
            {s.id: s.retry.reason for s in self.steps if s.retry.role == "never"}
        )

    @property
    def report_outputs(self) -> Mapping[str, tuple[str, str]]:
        """Report field -> (step id, output key) that fills it."""
        return MappingProxyType(
            {name: (s.id, key) for s in self.steps for name, key in s.report.items()}
        )


# Stable step ids: metadata, caching and the Kubeflow spec all key on them.
EXAMPLE_GEN = "ExampleGen"
STATISTICS_GEN = "StatisticsGen"
SCHEMA_IMPORTER = "SchemaImporter"
EXAMPLE_VALIDATOR = "ExampleValidator"
DATA_GATE = "DataValidationGate"
DRIFT_GATE = "DataDriftGate"
TRANSFORM = "Transform"
TRAINER = "Trainer"
BASELINE = "LatestServedModel"
EVALUATOR = "Evaluator"
PUSHER = "Pusher"

# The steps every runner runs. By default the Beam steps and the Trainer
# retry on Kubeflow (their failures are mostly infrastructure; which of them
# Argo retries: docs/kubeflow-operations.md); the gates, which fail on data
# only, never may. The drift gate and the served-model lookup read the
# serving directory, so they run every time.
DAG_STEPS = Steps(
    (
        Step(
            EXAMPLE_GEN,
            ("examples", "parquet_examples"),
            beam=True,
            retry=BY_DEFAULT,
            report={"examples": "examples"},
        ),
        Step(
            STATISTICS_GEN,
            ("statistics",),
            beam=True,
            retry=BY_DEFAULT,
            report={"statistics": "statistics"},
        ),
        Step(SCHEMA_IMPORTER, ("schema",)),
        Step(EXAMPLE_VALIDATOR, ("anomalies",), report={"anomalies": "anomalies"}),
        Step(
            DATA_GATE,
            ("examples_checked",),
            retry=Retry.never(
                "it fails on the data's anomalies, which a retry reads again unchanged"
            ),
        ),
        Step(
            DRIFT_GATE,
            ("drift",),
            cached=False,
            retry=Retry.never(
                "it fails on the data's drift, which a retry measures again unchanged"
            ),
            report={"drift": "drift"},
        ),
        # transformed_examples only with `materialize_transform` (the default).
        Step(TRANSFORM, ("transform_graph", "transformed_examples"), beam=True, retry=BY_DEFAULT),
        Step(TRAINER, ("model", "model_run"), retry=BY_DEFAULT, report={"model_run": "model_run"}),
        Step(BASELINE, ("baseline_model",), cached=False, report={"baseline": "baseline_model"}),
        Step(
            EVALUATOR,
            ("evaluation", "blessing"),
            beam=True,
            retry=BY_DEFAULT,
            report={"evaluation": "evaluation", "blessing": "blessing"},
        ),
        Step(PUSHER, ("pushed_model",), report={"pushed": "pushed_model"}),
    )
)

# The scoring DAG (pipeline/scoring_pipeline.py): the same input steps, its own gate and
# the scorer. The scorer reads the serving directory and writes outside the
# pipeline, so it always runs; its commit makes a retry safe (a retried
# attempt replaces or keeps the partition, never adds to it).
SERVING_GATE = "ServingDataGate"
BATCH_SCORER = "BatchScorer"
SCORING_STEPS = Steps(
    (
        DAG_STEPS[EXAMPLE_GEN],
        DAG_STEPS[STATISTICS_GEN],
        DAG_STEPS[SCHEMA_IMPORTER],
        Step(
            SERVING_GATE,
            ("examples_checked",),
            retry=Retry.never(
                "it fails on the data's anomalies, which a retry reads again unchanged"
            ),
        ),
        Step(BATCH_SCORER, ("scores",), beam=True, cached=False, retry=BY_DEFAULT),
    )
)
