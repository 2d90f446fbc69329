"""What the Kubeflow compile adds to `create_pipeline`'s DAG, through its hook.

`create_pipeline` (pipeline/pipeline.py) builds the DAG both runners share
and calls a `RunnerSteps` (pipeline/runner_steps.py) at three points. On
Kubeflow, `KubeflowSteps`:

* puts InputSnapshot first (kubeflow/steps/input_snapshot.py): open-source
  KFP never runs TFX's ExampleGen driver, so without it the cache key holds
  no trace of the data and a scheduled run reuses an earlier day's examples;
* with `training.engine: tfjob`, builds the Trainer as TFJobTrainer
  (kubeflow/tfjob/): the step hands training to a TFJob and waits;
* with `serving:`, puts Deploy after the Pusher (kubeflow/steps/deploy.py):
  a pushed version goes to a KServe InferenceService through a canary;
* puts RunReport last (kubeflow/steps/run_report.py): nothing runs after a
  Kubeflow DAG, so a step writes the report the local runner writes itself.

`create_run_status_step` is the exit handler (kubeflow/steps/run_status.py),
which KFP runs after the DAG however it ended. This module also holds the
Kubeflow policies that name the DAG's steps: which never retry, which retry
by default, and which run every time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from google.protobuf import json_format
from tfx.dsl.components.base.base_component import BaseComponent
from tfx.orchestration.data_types import RuntimeParameter
from tfx.orchestration.kubeflow.decorators import FinalStatusStr
from tfx.orchestration.pipeline import Pipeline

from components.example_gen import input_config, input_window
from kubeflow.settings.retries import RetryRoles
from kubeflow.settings.serving import Serving
from kubeflow.steps.deploy import Deploy
from kubeflow.steps.input_snapshot import SNAPSHOT_KEY, InputSnapshot
from kubeflow.steps.run_report import RunReport
from kubeflow.steps.run_status import RunStatus
from kubeflow.tfjob.component import TFJobTrainer
from kubeflow.tfjob.spec import TFJobSpec
from pipeline import pipeline as dag
from pipeline.runner_steps import DagNodes, FirstSteps, RunnerSteps
from trainer.dataset import DatasetSpec

# Stable ids of the steps only Kubeflow has.
INPUT_SNAPSHOT = "InputSnapshot"
RUN_REPORT = "RunReport"
DEPLOY = "Deploy"
# The exit handler: not one of the DAG's nodes, but a task of the spec's root.
RUN_STATUS = "RunStatus"
KUBEFLOW_STEP_IDS = (INPUT_SNAPSHOT, DEPLOY, RUN_REPORT, RUN_STATUS)
# Every step the settings may name (`components:`, `retries.components:`).
STEP_IDS = (*dag.COMPONENT_IDS, *KUBEFLOW_STEP_IDS)

# Steps that read state outside the pipeline and so must run every time: the
# input data, the InferenceService, and what the shared DAG already marks (the
# serving directory).
UNCACHED_STEPS = (INPUT_SNAPSHOT, DEPLOY, *dag.UNCACHED_NODES)

# Retries (kubeflow/settings/retries.py). By default the steps whose failures
# are mostly infrastructure (an object store that timed out, a node that went
# away; which of them Argo retries: docs/kubeflow-operations.md) retry; the
# gates, which fail on data only, never may.
RETRIED_BY_DEFAULT = (*dag.BEAM_COMPONENT_IDS, dag.TRAINER)
NEVER_RETRIED = MappingProxyType(
    {
        dag.DATA_GATE: "it fails on the data's anomalies, which a retry reads again unchanged",
        dag.DRIFT_GATE: "it fails on the data's drift, which a retry measures again unchanged",
        DEPLOY: "it rolls a failed version back, and a retry would roll the same version out again",
    }
)
RETRY_ROLES = RetryRoles(
    retried_by_default=frozenset(RETRIED_BY_DEFAULT), never_retried=dict(NEVER_RETRIED)
)

# Which output of which node fills each part of a run report
# (the fields of ArtifactUris and RunOutputs, components/report/), for the exit handler.
REPORT_OUTPUTS = MappingProxyType(
    {
        "examples": (dag.EXAMPLE_GEN, "examples"),
        "statistics": (dag.STATISTICS_GEN, "statistics"),
        "anomalies": (dag.EXAMPLE_VALIDATOR, "anomalies"),
        "drift": (dag.DRIFT_GATE, "drift"),
        "model_run": (dag.TRAINER, "model_run"),
        "evaluation": (dag.EVALUATOR, "evaluation"),
        "blessing": (dag.EVALUATOR, "blessing"),
        "baseline": (dag.BASELINE, "baseline_model"),
        "pushed": (dag.PUSHER, "pushed_model"),
    }
)


@dataclass(frozen=True)
class KubeflowSteps(RunnerSteps):
    """The Kubeflow compile's additions to the DAG (see the module's docstring).

    `tfjob`: the Trainer's TFJob (training.engine tfjob), or None to train in
    the Trainer step's own pod. `serving`: the `serving:` settings, or None
    for no Deploy step.
    """

    tfjob: TFJobSpec | None = None
    serving: Serving | None = None

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
        if self.tfjob is None:
            return super().trainer(**trainer_args)
        custom_config = dict(trainer_args.pop("custom_config", {}))
        return TFJobTrainer(
            custom_config=custom_config | self.tfjob.to_custom_config(), **trainer_args
        )

    def after(self, nodes: DagNodes) -> Sequence[BaseComponent]:
        steps: list[BaseComponent] = []
        deployment = None
        if self.serving is not None:
            deploy = Deploy(
                pushed_model=nodes.pusher.outputs["pushed_model"],
                examples=nodes.example_gen.outputs["examples"],
                serving=json.dumps(self.serving.to_json(), sort_keys=True),
            ).with_id(DEPLOY)
            steps.append(deploy)
            deployment = deploy.outputs["deployment"]
        report = RunReport(
            examples=nodes.example_gen.outputs["examples"],
            statistics=nodes.statistics_gen.outputs["statistics"],
            drift=nodes.drift_gate.outputs["drift"],
            anomalies=nodes.example_validator.outputs["anomalies"],
            model_run=nodes.trainer.outputs["model_run"],
            evaluation=nodes.evaluator.outputs["evaluation"],
            blessing=nodes.evaluator.outputs["blessing"],
            baseline_model=nodes.baseline.outputs["baseline_model"],
            pushed_model=nodes.pusher.outputs["pushed_model"],
            pipeline_name=nodes.pipeline_name,
            component_ids=json.dumps([c.id for c in nodes.components] + [s.id for s in steps]),
            deployment=deployment,
        ).with_id(RUN_REPORT)
        return (*steps, report)


def create_run_status_step(pipeline: Pipeline) -> BaseComponent:
    """The exit handler for `pipeline` on Kubeflow: it writes the run's status report.

    KFP runs it after the DAG has ended, however it ended; it takes no
    artifacts, so it is handed the DAG's shape and finds what each step
    recorded (kubeflow/steps/run_status.py). Pass it to the Kubeflow V2
    runner's `set_exit_handler`; it is not one of the DAG's nodes.
    """
    steps = {
        "order": [c.id for c in pipeline.components],
        "upstream": {c.id: sorted(n.id for n in c.upstream_nodes) for c in pipeline.components},
        "outputs": {role: list(source) for role, source in REPORT_OUTPUTS.items()},
    }
    return RunStatus(
        final_status=FinalStatusStr(),
        pipeline_name=pipeline.pipeline_info.pipeline_name,
        steps=json.dumps(steps, sort_keys=True),
        task_name=RUN_STATUS,
    ).with_id(RUN_STATUS)
