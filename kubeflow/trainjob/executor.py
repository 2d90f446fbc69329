"""The Trainer step's executor with training.engine trainjob: it trains through a TrainJob.

As the TFJob's (kubeflow/tfjob/executor.py, whose Do it shares): the nodes
run the stock Trainer's `run_fn` on the step's own inputs; the step checks
the model node 0 exported, so the Evaluator and the Pusher see an ordinary
Model artifact.
"""

from __future__ import annotations

from kubeflow.tfjob.executor import ClusterTrainerExecutor
from kubeflow.tfjob.manifest import job_name
from kubeflow.training_job import DEADLINE_GRACE_SECONDS, Timing
from kubeflow.trainjob.cluster import Cluster
from kubeflow.trainjob.job import run_trainjob
from kubeflow.trainjob.manifest import trainjob_manifest
from kubeflow.trainjob.spec import TrainJobSpec


class Executor(ClusterTrainerExecutor):
    """Trains on a TrainJob of Kubeflow Trainer v2."""

    JOB, WRITER = "TrainJob", "node 0"

    def train_on_cluster(self, custom_config, *, model_uri, args, labels, annotations) -> str:
        spec = TrainJobSpec.from_custom_config(custom_config)
        cluster = Cluster.from_environment()
        manifest = trainjob_manifest(
            spec,
            name=job_name(model_uri),
            namespace=spec.namespace or cluster.default_namespace,
            args=args,
            labels=labels,
            annotations=annotations,
        )
        timing = Timing(wait_seconds=spec.active_deadline_seconds + DEADLINE_GRACE_SECONDS)
        run_trainjob(cluster, manifest, timing=timing)
        return manifest["metadata"]["name"]
