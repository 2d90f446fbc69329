"""The Trainer step's executor with training.engine trainjob: it trains through a TrainJob.

As the TFJob's (kubeflow/tfjob/executor.py, whose Do it shares): the nodes
run the stock Trainer's `run_fn` on the step's own inputs; the step checks
the model node 0 exported, so the Evaluator and the Pusher see an ordinary
Model artifact.
"""

from __future__ import annotations

from kubeflow.tfjob.executor import ClusterTrainerExecutor
from kubeflow.trainjob.cluster import Cluster
from kubeflow.trainjob.job import run_trainjob
from kubeflow.trainjob.manifest import trainjob_manifest
from kubeflow.trainjob.spec import TrainJobSpec


class Executor(ClusterTrainerExecutor):
    """Trains on a TrainJob of Kubeflow Trainer v2."""

    JOB, WRITER = "TrainJob", "node 0"
    SPEC = TrainJobSpec
    CLUSTER = Cluster
    MANIFEST = staticmethod(trainjob_manifest)
    RUN = staticmethod(run_trainjob)
