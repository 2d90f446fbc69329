"""What the Kubeflow compile adds to `create_pipeline`'s DAG, through its hook.

`create_pipeline` (pipeline/pipeline.py) builds the DAG both runners share
and calls a `RunnerSteps` (pipeline/runner_steps.py) at three points. On
Kubeflow, `KubeflowSteps`:

* puts InputSnapshot first (kubeflow/steps/input_snapshot/component.py): open-source
  KFP never runs TFX's ExampleGen driver, so without it the cache key holds
  no trace of the data and a scheduled run reuses an earlier day's examples;
* with `training.engine: tfjob`, builds the Trainer as TFJobTrainer
  (kubeflow/tfjob/): the step hands training to a TFJob and waits;
  with `trainjob`, as TrainJobTrainer (kubeflow/trainjob/), to a TrainJob;
* with `serving:`, puts Deploy after the Pusher (kubeflow/steps/deploy/component.py):
  a pushed version goes to a KServe InferenceService through a canary;
* puts RunReport last (kubeflow/steps/run_report/component.py): nothing runs after a
  Kubeflow DAG, so a step writes the report the local runner writes itself.

`create_run_status_step` is the exit handler (kubeflow/steps/run_status/component.py),
which KFP runs after the DAG however it ended. This module also declares
the steps only Kubeflow has, in the shape of the DAG's own
(pipeline/steps.py); `KUBEFLOW_STEPS`, both together, is what the settings
may name, what retries by default or never, what runs every time, and what
fills the run reports.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from tfx.dsl.components.base.base_component import BaseComponent
from tfx.orchestration.data_types import RuntimeParameter
from tfx.orchestration.kubeflow.decorators import FinalStatusStr
from tfx.orchestration.pipeline import Pipeline

from components.example_gen.input_settings import input_config, input_window
from contract.dataset.spec import DatasetSpec
from kubeflow.settings.retries import RetryRoles
from kubeflow.settings.serving import Serving
from kubeflow.step_ids import DEPLOY, INPUT_SNAPSHOT, RUN_REPORT, RUN_STATUS, SCORING_REPORT
from kubeflow.steps.deploy.component import Deploy
from kubeflow.steps.input_snapshot.component import InputSnapshot
from kubeflow.steps.input_snapshot.executor import SNAPSHOT_KEY
from kubeflow.steps.run_report.component import RunReport
from kubeflow.steps.run_status.component import RunStatus
from kubeflow.steps.scoring_report.component import ScoringReport
from kubeflow.tfjob.component import TFJobTrainer
from kubeflow.tfjob.spec import TFJobSpec
from kubeflow.trainjob.component import TrainJobTrainer
from kubeflow.trainjob.spec import TrainJobSpec
from pipeline.runner_steps import DagSteps, FirstSteps, RunnerSteps
from pipeline.steps import BATCH_SCORER, DAG_STEPS, EXAMPLE_GEN, PUSHER, Retry, Step, Steps

# The input snapshot and Deploy read state outside the pipeline (the input
# data, the InferenceService), so they run every time.
KUBEFLOW_ONLY_STEPS = Steps(
    (
        Step(INPUT_SNAPSHOT, (SNAPSHOT_KEY,), cached=False),
        Step(
            DEPLOY,
            ("deployment",),
            cached=False,
            retry=Retry.never(
                "it rolls a failed version back, and a retry would roll the same version out again"
            ),
            report={"deployment": "deployment"},
        ),
        Step(RUN_REPORT, ("report", "metrics")),
        Step(RUN_STATUS, ("report",)),
    )
)
# Every step of a Kubeflow run: what the settings may name (`components:`,
# `retries.components:`).
KUBEFLOW_STEPS = DAG_STEPS + KUBEFLOW_ONLY_STEPS
RETRY_ROLES = RetryRoles(
    retried_by_default=frozenset(KUBEFLOW_STEPS.retried_by_default),
    never_retried=dict(KUBEFLOW_STEPS.never_retried),
)


def report_outputs(step_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Report field -> (step id, output key), for the steps among `step_ids`."""
    return {
        field: (step, key)
        for field, (step, key) in KUBEFLOW_STEPS.report_outputs.items()
        if step in step_ids
    }


@dataclass(frozen=True)
class KubeflowSteps(RunnerSteps):
    """The Kubeflow compile's additions to the DAG (see the module's docstring).

    `tfjob`: the Trainer's TFJob (training.engine tfjob), or None to train in
    the Trainer step's own pod. `serving`: the `serving:` settings, or None
    for no Deploy step. `hyperparameters`: the frozen file, as JSON, which
    the run report shows.
    """

    tfjob: TFJobSpec | None = None
    # The Trainer's TrainJob (training.engine trainjob), or None.
    trainjob: TrainJobSpec | None = None
    serving: Serving | None = None
    # The schema dir's frozen file for the run report (`frozen_json`); the
    # Trainer gets its values through `trainer_config` only.
    hyperparameters: str = "null"

    def before_example_gen(
        self, *, data_root: str | RuntimeParameter, dataset: DatasetSpec
    ) -> FirstSteps:
        snapshot = InputSnapshot(
            input_base=data_root,
            input_config=json_format.MessageToJson(
                input_config(dataset.input.pattern), sort_keys=True
            ),
            input_window=input_window(dataset.input.pattern, dataset.input.spans),
        ).with_id(INPUT_SNAPSHOT)
        return FirstSteps(
            steps=(snapshot,), input_snapshot=snapshot.outputs[SNAPSHOT_KEY].future()[0].value
        )

    def trainer(self, **trainer_args: Any) -> BaseComponent:
        if self.trainjob is not None:
            custom_config = dict(trainer_args.pop("custom_config", {}))
            return TrainJobTrainer(
                custom_config=custom_config | self.trainjob.to_custom_config(), **trainer_args
            )
        if self.tfjob is not None:
            custom_config = dict(trainer_args.pop("custom_config", {}))
            return TFJobTrainer(
                custom_config=custom_config | self.tfjob.to_custom_config(), **trainer_args
            )
        return super().trainer(**trainer_args)

    def after(self, dag: DagSteps) -> Sequence[BaseComponent]:
        steps: list[BaseComponent] = []
        if self.serving is not None:
            steps.append(
                Deploy(
                    pushed_model=dag[PUSHER].outputs["pushed_model"],
                    examples=dag[EXAMPLE_GEN].outputs["examples"],
                    serving=json.dumps(self.serving.to_json(), sort_keys=True),
                ).with_id(DEPLOY)
            )
        built = DagSteps(dag.pipeline_name, dag.built + tuple(steps))
        # RunReport names each input after the output key that fills it.
        report = RunReport(
            pipeline_name=built.pipeline_name,
            component_ids=json.dumps(list(built.ids)),
            hyperparameters=self.hyperparameters,
            **{key: built[step].outputs[key] for step, key in report_outputs(built.ids).values()},
        ).with_id(RUN_REPORT)
        return (*steps, report)


def create_run_status_step(pipeline: Pipeline) -> BaseComponent:
    """The exit handler for `pipeline` on Kubeflow: it writes the run's status report.

    KFP runs it after the DAG has ended, however it ended; it takes no
    artifacts, so it is handed the DAG's shape and finds what each step
    recorded (kubeflow/steps/run_status/component.py). Pass it to the Kubeflow V2
    runner's `set_exit_handler`; it is not one of the DAG's steps.
    """
    steps = dag_shape(pipeline)
    steps["outputs"] = {
        role: list(source) for role, source in report_outputs(steps["order"]).items()
    }
    return RunStatus(
        final_status=FinalStatusStr(),
        pipeline_name=pipeline.pipeline_info.pipeline_name,
        steps=json.dumps(steps, sort_keys=True),
        task_name=RUN_STATUS,
    ).with_id(RUN_STATUS)


def create_scoring_report_step(pipeline: Pipeline) -> BaseComponent:
    """The scoring package's exit handler (kubeflow/steps/scoring_report/component.py): the scoring
    report of every run, failed ones included. It takes the scorer's own parameters, so
    it looks for the model where the scorer did."""
    scorer = next(c for c in pipeline.components if c.id == BATCH_SCORER)
    # Not model_version: a runtime parameter, which TFX hands to the DAG's steps only.
    parameters = ("serving_model_dir", "rolled_out_record", "settings")
    return ScoringReport(
        final_status=FinalStatusStr(),
        pipeline_name=pipeline.pipeline_info.pipeline_name,
        steps=json.dumps(dag_shape(pipeline), sort_keys=True),
        task_name=SCORING_REPORT,
        **{name: scorer.exec_properties[name] for name in parameters},
    ).with_id(SCORING_REPORT)


def dag_shape(pipeline: Pipeline) -> dict[str, Any]:
    """The DAG's steps in order, and each one's upstream steps, for an exit handler."""
    return {
        "order": [c.id for c in pipeline.components],
        "upstream": {c.id: sorted(n.id for n in c.upstream_nodes) for c in pipeline.components},
    }
