"""The Trainer step's executor with training.engine tfjob: it trains through a TFJob.

It follows TFX's own Vertex AI trainer extension: the step submits a job
whose replicas run the stock Trainer's `run_fn` on the step's own inputs,
then waits. Here the job is a TFJob on the same cluster, and the step
checks the model the Chief exported before it ends as the stock Trainer
does, so the Evaluator and the Pusher see an ordinary Model artifact.
"""

from __future__ import annotations

import json
from typing import Any

from absl import logging
from tfx import types
from tfx.components.trainer import executor as trainer_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import json_utils

from kubeflow.tfjob.cluster import Cluster
from kubeflow.tfjob.job import DEADLINE_GRACE_SECONDS, Timing, run_tfjob
from kubeflow.tfjob.manifest import (
    MODEL_URI_ANNOTATION,
    job_name,
    run_labels,
    tfjob_manifest,
)
from kubeflow.tfjob.spec import TFJobSpec

INPUTS_FLAG, OUTPUTS_FLAG, EXEC_PROPERTIES_FLAG = "--inputs", "--outputs", "--exec-properties"


def replica_args(
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
) -> list[str]:
    """The step's inputs, outputs and properties, for each replica to rebuild the same fn_args."""
    return [
        INPUTS_FLAG, artifact_utils.jsonify_artifact_dict(input_dict),
        OUTPUTS_FLAG, artifact_utils.jsonify_artifact_dict(output_dict),
        EXEC_PROPERTIES_FLAG, json.dumps(exec_properties, sort_keys=True),
    ]  # fmt: skip


def run_id(model_uri: str) -> str | None:
    """The pipeline run's id: the name of the run's directory above the Trainer's outputs."""
    from kubeflow.steps.step_records import run_directory

    # The Trainer's node id (pipeline.TRAINER; pipeline/ is the layer above this one).
    directory = run_directory(model_uri, "Trainer")
    return directory.rstrip("/").rsplit("/", 1)[-1] if directory else None


class ClusterTrainerExecutor(trainer_executor.GenericExecutor):
    """Trains on a multi-node job of the image's own Trainer code (a TFJob here, a TrainJob
    in kubeflow/trainjob/executor.py); the Model output as the stock one's."""

    # What the job is and which of its nodes exports the model, for the messages.
    JOB, WRITER = "TFJob", "Chief"

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        custom_config = json_utils.loads(
            exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null"
        )
        # Resolves (and checks) what the nodes will: run_fn, the splits, the output paths.
        fn_args = self._GetFnArgs(input_dict, output_dict, exec_properties)
        model_uri = artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_KEY])
        name = self.train_on_cluster(
            custom_config,
            model_uri=model_uri,
            args=replica_args(input_dict, output_dict, exec_properties),
            labels=run_labels(run_id(model_uri)),
            annotations={MODEL_URI_ANNOTATION: model_uri},
        )
        exported = f"{fn_args.serving_model_dir}/saved_model.pb"
        if not fileio.exists(exported):
            raise RuntimeError(
                f"{self.JOB} {name} succeeded, but its {self.WRITER} exported no model "
                f"at {fn_args.serving_model_dir}: the nodes must reach the pipeline root "
                "(an object store every pod can write to)"
            )
        logging.info(
            "Training complete on %s %s. Model written to %s. ModelRun written to %s",
            self.JOB,
            name,
            fn_args.serving_model_dir,
            fn_args.model_run_dir,
        )

    # The engine's spec (from the step's custom_config), API client, manifest and wait loop.
    SPEC: Any
    CLUSTER: Any
    MANIFEST: Any
    RUN: Any

    def train_on_cluster(self, custom_config, *, model_uri, args, labels, annotations) -> str:
        """Creates the job, waits for it to succeed (or raises); returns its name."""
        spec = self.SPEC.from_custom_config(custom_config)
        cluster = self.CLUSTER.from_environment()
        manifest = self.MANIFEST(
            spec,
            name=job_name(model_uri),
            namespace=spec.namespace or cluster.default_namespace,
            args=args,
            labels=labels,
            annotations=annotations,
        )
        timing = Timing(wait_seconds=spec.active_deadline_seconds + DEADLINE_GRACE_SECONDS)
        self.RUN(cluster, manifest, timing=timing)
        return manifest["metadata"]["name"]


class Executor(ClusterTrainerExecutor):
    """Trains on a TFJob."""

    SPEC = TFJobSpec
    CLUSTER = Cluster
    MANIFEST = staticmethod(tfjob_manifest)
    RUN = staticmethod(run_tfjob)
