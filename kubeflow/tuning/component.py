"""The Tune step: a KerasTuner search whose workers are pods; its output, the frozen file.

Inputs: ExampleGen's examples (their fingerprint keys the search's
directory, and the provenance), Transform's transformed examples (train
split to fit, eval split to score) and graph. Output: a HyperParameters
artifact holding `hyperparameters.yaml`, the file the fork downloads and
commits into its schema directory (docs/tuning.md).
"""

import hashlib
import json

from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts

HYPERPARAMETERS_KEY = "hyperparameters"


def search_directory(search_root: str, data_fingerprint: str, space_digest: str) -> str:
    """Where one search keeps its oracle: the same for a retried step on the same data and
    space, so the retry resumes; another directory when either changed."""
    key = hashlib.sha256(f"{data_fingerprint}\n{space_digest}".encode()).hexdigest()[:16]
    return f"{search_root.rstrip('/')}/{key}"


def pod_ip() -> str:
    """This pod's IP: Kubernetes maps the pod's hostname to it in /etc/hosts."""
    import socket

    return socket.gethostbyname(socket.gethostname())


@component
def Tune(
    examples: InputArtifact[standard_artifacts.Examples],
    transformed_examples: InputArtifact[standard_artifacts.Examples],
    transform_graph: InputArtifact[standard_artifacts.TransformGraph],
    hyperparameters: OutputArtifact[standard_artifacts.HyperParameters],
    tuning: Parameter[str],
    trainer_config: Parameter[str],
):
    """Serves KerasTuner's oracle here while worker pods run the trials; writes the winner."""
    import datetime
    import time

    from absl import logging
    from tfx.dsl.io import fileio

    from contract.dataset.parse import spec_from_custom_config
    from kubeflow.tuning.pods import PodCluster, pod_launcher, search_name
    from kubeflow.tuning.spec import TuningSpec
    from pipeline.fingerprint import code_fingerprint
    from pipeline.local.tune import search_provenance, trial_table
    from trainer.config import TrainerConfig
    from trainer.fork.search_space_file import hyperparameters_class, search_space
    from trainer.hyperparameters import (
        HYPERPARAMETERS_FILE_NAME,
        FrozenHyperparameters,
        frozen_text,
    )
    from trainer.run import InputFiles
    from trainer.tuning import SearchSettings, search

    spec = TuningSpec.from_json(tuning)
    custom_config = json.loads(trainer_config)
    config = TrainerConfig.from_custom_config(custom_config, hyperparameters_class())
    dataset = spec_from_custom_config(custom_config)
    properties = {
        key: examples.get_custom_property(key) for key in examples.mlmd_artifact.custom_properties
    }
    fingerprint = str(properties.get("input_fingerprint") or examples.uri)
    directory = search_directory(spec.search_root, fingerprint, code_fingerprint(search_space()))
    logging.info("Search directory: %s", directory)
    cluster = PodCluster.from_environment()
    namespace = spec.namespace or cluster.default_namespace
    result = search(
        config=config,
        spec=dataset,
        files=InputFiles(
            train=[f"{transformed_examples.uri}/Split-train/*"],
            eval=[f"{transformed_examples.uri}/Split-eval/*"],
            transform_output=transform_graph.uri,
            raw_examples=False,
        ),
        settings=SearchSettings(
            directory=directory,
            max_trials=spec.max_trials,
            steps_per_trial=spec.steps_per_trial,
            eval_steps=spec.eval_steps,
            seed=config.seed,
            deadline=time.time() + spec.deadline_seconds,
        ),
        parallel=spec.workers,
        launch=pod_launcher(
            cluster,
            spec,
            name=search_name(hyperparameters.uri),
            namespace=namespace,
            log=logging.info,
        ),
        bind="0.0.0.0",
        advertise=pod_ip(),
    )
    logging.info("Trials:\n%s", trial_table(result))
    if result.best is None:
        raise RuntimeError(
            f"no trial completed within tuning.deadline; the search's state is in {directory}: "
            "run the package again on the same data to resume it"
        )
    if result.partial and not spec.accept_partial:
        raise RuntimeError(
            f"the search is partial ({len(result.completed)} of {spec.max_trials} trials within "
            f"tuning.deadline); nothing was output. Its state is in {directory}: a retry of this "
            "step, or the package run again on the same data, resumes it; or set "
            "tuning.accept_partial: true to output its best trial"
        )
    read_at = datetime.datetime.fromtimestamp(
        examples.mlmd_artifact.create_time_since_epoch / 1000, datetime.timezone.utc
    )
    frozen = FrozenHyperparameters(
        result.best.model,
        search_provenance(
            result,
            pipeline=dataset.name,
            max_trials=spec.max_trials,
            steps_per_trial=spec.steps_per_trial,
            properties=properties,
            examples_uri=examples.uri,
            read_at=read_at,
        ),
    )
    fileio.makedirs(hyperparameters.uri)
    with fileio.open(f"{hyperparameters.uri}/{HYPERPARAMETERS_FILE_NAME}", "w") as f:
        f.write(frozen_text(frozen))
    hyperparameters.set_int_custom_property("partial", int(result.partial))
    logging.info(
        "Winner: trial %s%s; written to %s/%s", result.best.trial_id,
        " (partial: cut off by tuning.deadline)" if result.partial else "",
        hyperparameters.uri, HYPERPARAMETERS_FILE_NAME,
    )  # fmt: skip
