"""The TFX DAG each package compiles, built from the Kubeflow settings.

The training package's DAG is the same `create_pipeline(...)` that runs
locally, with runtime parameters (kubeflow/run_parameters.py) for what changes
between scheduled runs and the Kubeflow-only steps (`KubeflowSteps`,
kubeflow/pipeline_steps.py); with `training.engine: tfjob` the Trainer is
kubeflow/tfjob/'s TFJobTrainer, its job's spec in the step's `custom_config`
(kubeflow/settings/training.py), and with `trainjob` kubeflow/trainjob/'s
TrainJobTrainer, likewise. The scoring package's is `create_scoring_pipeline(...)`;
the tuning package's is the training DAG's steps up to Transform, then Tune.

What would fail only at run time is refused here, before a package is written:
a Beam option this Beam does not know, a retry window that cannot hold one retry
of its step's deadline, a fork file that does not parse.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import posixpath
from pathlib import Path

from components.serving.rollout_record import rolled_out_record
from kubeflow.run_parameters import (
    DATA_ROOT_PARAMETER,
    MODEL_VERSION_PARAMETER,
    SCORES_ROOT_PARAMETER,
    TRAIN_ARGS_PARAMETER,
    train_args_value,
)
from kubeflow.settings import KubeflowSettings
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.training import check_training
from kubeflow.step_ids import TUNE
from kubeflow.tfjob.spec import TFJobSpec
from kubeflow.trainjob.spec import TrainJobSpec
from pipeline.steps import DAG_STEPS, EXAMPLE_GEN, SCORING_STEPS, TRAINER, TRANSFORM

# The project checkout the DAGs are built from: schema_dir is relative to it.
PROJECT_ROOT = Path(__file__).resolve().parents[1]
# Under the pipeline root: the tuning step's search directories (docs/tuning.md).
TUNING_DIR = "tuning"


def beam_args_for(settings: KubeflowSettings, step_id: str) -> list[str]:
    """The Beam step's engine arguments; with an S3 store, what its workers need to reach it."""
    from pipeline.object_store import BEAM_PLUGIN_MODULE

    engine = settings.beam_for(step_id)
    args = engine.pipeline_args(settings.image)
    if settings.object_store is not None:
        args.append(f"--beam_plugins={BEAM_PLUGIN_MODULE}")
        if engine.engine != "direct":
            # Workers outside the step's pod build their S3 client from the
            # pipeline options; an option set by hand wins.
            for name, value in settings.object_store.beam_options().items():
                if name not in engine.options:
                    args.append(f"--{name}={value}")
    return args


def build_tfx_pipeline(settings: KubeflowSettings):
    """The local DAG, with runtime parameters for what changes between scheduled runs."""
    from tfx.orchestration.data_types import RuntimeParameter

    from kubeflow.pipeline_steps import KubeflowSteps
    from pipeline.pipeline import create_pipeline
    from schemas import load_schema_dir
    from trainer.fork import check_fork_files
    from trainer.fork.config_file import variant
    from trainer.hyperparameters import frozen_json

    check_beam_options(settings)
    check_fork_files()  # before a package that could not run is written
    config = variant(settings.config_variant)
    check_training(
        settings.training,
        config.trainer.runtime,
        config_variant=settings.config_variant,
        trainer=settings.placement_for(TRAINER),
        trainer_id=TRAINER,
    )
    check_retry_windows(settings, step_deadlines(settings))
    # The spec is read (and checked against its schema) here; the schema file is
    # read at run time, from the image.
    schema_dir = load_schema_dir(PROJECT_ROOT / settings.schema_dir)
    frozen = schema_dir.hyperparameters
    return create_pipeline(
        dataset=schema_dir.spec,
        pipeline_root=settings.pipeline_root,
        data_root=RuntimeParameter(name=DATA_ROOT_PARAMETER, ptype=str, default=settings.data_root),
        schema_path=image_schema_path(settings),
        serving_model_dir=settings.serving_model_dir,
        train_steps=RuntimeParameter(
            name=TRAIN_ARGS_PARAMETER,
            ptype=str,
            default=train_args_value(settings.train_steps),
        ),
        eval_steps=config.eval_steps,
        # The tuner's frozen winner is compiled in; a scheduled run never tunes (docs/tuning.md).
        # The Trainer gets its values, the run report the whole file.
        trainer_config=config.with_hyperparameters(frozen).trainer,
        enable_cache=config.enable_cache,
        # Each Beam step gets exactly its engine's arguments (`beam:` settings).
        beam_pipeline_args=(),
        beam_pipeline_args_by_step={
            step: beam_args_for(settings, step) for step in DAG_STEPS.beam_ids
        },
        # With KServe, the served version is the one its rollout recorded: the baseline,
        # the drift gate and the Pusher read it (components/serving/served_version.py).
        rolled_out_record=(
            rolled_out_record(settings.serving.storage_root) if settings.serving else None
        ),
        # An input snapshot first, the Trainer on a TFJob where set, the run report last.
        runner_steps=KubeflowSteps(
            tfjob=tfjob_spec(settings),
            trainjob=trainjob_spec(settings),
            serving=settings.serving,
            hyperparameters=frozen_json(frozen),
        ),
    )


def step_deadlines(settings: KubeflowSettings) -> dict[str, int]:
    """Seconds each step may run, for the steps whose settings bound it."""
    trainer = settings.training.step_deadline()
    return {} if trainer is None else {TRAINER: trainer}


def check_retry_windows(settings: KubeflowSettings, deadlines: dict[str, int]) -> None:
    """Refuses a retry window that cannot hold one retry of its step's deadline."""
    for step, deadline in deadlines.items():
        problem = settings.retries.policy_for(step).window_problem(deadline)
        if problem:
            entry = f"components.{step}" if step in settings.retries.components else "defaults"
            raise SettingsError(
                f"retries.{entry}.retry_window: {problem}; {step}'s deadline is "
                f"{settings.training.deadline_setting} "
                f"{getattr(settings.training, settings.training.engine).deadline}"
            )


def tfjob_spec(settings: KubeflowSettings) -> TFJobSpec | None:
    """The Trainer's TFJob with training.engine tfjob: replicas run the pipeline image."""
    if settings.training.engine != "tfjob":
        return None
    store = settings.object_store
    return settings.training.tfjob.spec(
        image=settings.image,
        working_dir=settings.project_root_in_image,
        # The replicas read and write the artifacts the steps do.
        env=tuple(store.container_env()) if store is not None else (),
    )


def trainjob_spec(settings: KubeflowSettings) -> TrainJobSpec | None:
    """The Trainer's TrainJob with training.engine trainjob: nodes run the pipeline image."""
    if settings.training.engine != "trainjob":
        return None
    return node_job_spec(settings)


def node_job_spec(settings: KubeflowSettings) -> TrainJobSpec:
    """`training.trainjob` as the TrainJob and its runtime take it, whichever engine is set
    (python -m kubeflow.compile --training-runtime writes the runtime from it)."""
    store = settings.object_store
    return settings.training.trainjob.spec(
        image=settings.image,
        working_dir=settings.project_root_in_image,
        # The nodes read and write the artifacts the steps do.
        env=tuple(store.container_env()) if store is not None else (),
    )


def image_schema_path(settings: KubeflowSettings) -> str:
    """The schema file's path inside the pipeline image."""
    from contract.dataset.spec import SCHEMA_FILE_NAME

    return f"{settings.project_root_in_image}/{settings.schema_dir}/{SCHEMA_FILE_NAME}"


def known_beam_options() -> set[str]:
    """Every pipeline option this Beam version defines, by its flag name."""
    from apache_beam.options.pipeline_options import PipelineOptions

    parser = argparse.ArgumentParser(add_help=False)
    pending = list(PipelineOptions.__subclasses__())
    seen = set()
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        pending += cls.__subclasses__()
        # Two option classes may declare the same flag; one is enough.
        with contextlib.suppress(argparse.ArgumentError):
            cls._add_argparse_args(parser)
    return {option.lstrip("-") for action in parser._actions for option in action.option_strings}


def check_beam_options(settings: KubeflowSettings) -> None:
    """Fails on a Beam option this Beam does not know, naming the setting that holds it."""
    known = known_beam_options()
    engines = [("beam.defaults", settings.default_beam)] + [
        (f"beam.components.{step}", engine) for step, engine in sorted(settings.beam.items())
    ]
    for where, engine in engines:
        for name in engine.options:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise SettingsError(
                    f"{where}.options.{name}: not a pipeline option of apache-beam "
                    f"{_beam_version()}{hint}"
                )


def _beam_version() -> str:
    import apache_beam

    return apache_beam.__version__


def scores_root(settings: KubeflowSettings) -> str:
    """The scoring package's default output: `scores/` beside the serving directory."""
    return posixpath.join(posixpath.dirname(settings.serving_model_dir.rstrip("/")), "scores")


def build_scoring_pipeline(settings: KubeflowSettings, schema_dir: Path | None = None):
    """The local scoring DAG, with runtime parameters for the data, the scores' root and
    a pinned model version.

    `schema_dir`: the dataset directory (default: the settings' `schema_dir`);
    its spec's `keys:` are the id columns every score carries. With `serving:`
    (the Deploy step), the scorer scores what the KServe rollout last rolled
    out, from the Deploy step's record under `serving.storage_root`.
    """
    from tfx.orchestration.data_types import RuntimeParameter

    from components.scoring.executor import ScoringSettings
    from pipeline.scoring_pipeline import create_scoring_pipeline
    from schemas import load_schema_dir

    check_beam_options(settings)
    loaded = load_schema_dir(schema_dir or PROJECT_ROOT / settings.schema_dir)
    if not loaded.spec.keys:
        raise SettingsError(
            f"{loaded.spec_file}: keys: the scoring package needs the id columns each score "
            "carries; list them under keys:"
        )
    return create_scoring_pipeline(
        dataset=loaded.spec,
        pipeline_root=settings.pipeline_root,
        data_root=RuntimeParameter(name=DATA_ROOT_PARAMETER, ptype=str, default=settings.data_root),
        schema_path=image_schema_path(settings),
        serving_model_dir=settings.serving_model_dir,
        output_dir=RuntimeParameter(
            name=SCORES_ROOT_PARAMETER, ptype=str, default=scores_root(settings)
        ),
        settings=ScoringSettings(keys=loaded.spec.keys),
        model_version=RuntimeParameter(name=MODEL_VERSION_PARAMETER, ptype=str, default=""),
        rolled_out_record=(
            rolled_out_record(settings.serving.storage_root) if settings.serving else None
        ),
        beam_pipeline_args_by_step={
            step: beam_args_for(settings, step) for step in SCORING_STEPS.beam_ids
        },
    )


def tuning_spec(settings: KubeflowSettings):
    """The Tune step's spec: the `tuning:` settings, the image, the store's environment."""
    from kubeflow.tuning.spec import TuningSpec
    from trainer.fork.config_file import variant

    tuning, store = settings.tuning, settings.object_store
    return TuningSpec(
        image=settings.image,
        working_dir=settings.project_root_in_image,
        workers=tuning.workers,
        max_trials=tuning.max_trials,
        steps_per_trial=tuning.steps_per_trial,
        eval_steps=variant(settings.config_variant).eval_steps,
        deadline_seconds=tuning.deadline_seconds,
        search_root=posixpath.join(settings.pipeline_root, TUNING_DIR),
        accept_partial=tuning.accept_partial,
        resources=tuning.placement.resources.to_kubernetes(),
        node_selector=dict(tuning.placement.node_selector),
        tolerations=tuple(t.to_kubernetes() for t in tuning.placement.tolerations),
        # The workers read Transform's output and write the search's state on the store.
        env=tuple(store.container_env()) if store is not None else (),
        namespace=tuning.namespace,
        service_account=tuning.service_account,
    )


def build_tuning_pipeline(settings: KubeflowSettings):
    """The training DAG's steps up to Transform, unchanged (so KFP's cache serves a training
    run's), then Tune, given the Trainer's own configuration."""
    from tfx.dsl.context_managers import dsl_context_registry

    training = build_tfx_pipeline(settings)
    by_id = {c.id: c for c in training.components}
    kept, pending = set(), [by_id[TRANSFORM]]
    while pending:
        node = pending.pop()
        if node.id not in kept:
            kept.add(node.id)
            pending.extend(node.upstream_nodes)
    steps = [c for c in training.components if c.id in kept]
    for step in steps:
        # Edges to the steps left out, which the compiler would otherwise follow.
        step._downstream_nodes = {n for n in step.downstream_nodes if n.id in kept}
    trainer_config = by_id[TRAINER].exec_properties["custom_config"]
    # TFX knows a pipeline's nodes from the DSL registry they were built in: Tune joins theirs.
    with dsl_context_registry.use_registry(training.dsl_context_registry):
        return _with_tune(training, steps, by_id, trainer_config, settings)


def _with_tune(training, steps, by_id, trainer_config, settings: KubeflowSettings):
    from tfx.orchestration.pipeline import Pipeline

    from kubeflow.tuning.component import Tune

    tune = Tune(
        examples=by_id[EXAMPLE_GEN].outputs["examples"],
        transformed_examples=by_id[TRANSFORM].outputs["transformed_examples"],
        transform_graph=by_id[TRANSFORM].outputs["transform_graph"],
        tuning=tuning_spec(settings).to_json(),
        trainer_config=trainer_config
        if isinstance(trainer_config, str)
        else json.dumps(trainer_config, sort_keys=True),
    ).with_id(TUNE)
    return Pipeline(
        pipeline_name=training.pipeline_info.pipeline_name,
        pipeline_root=training.pipeline_info.pipeline_root,
        components=[*steps, tune],
        enable_cache=training.enable_cache,
        beam_pipeline_args=training.beam_pipeline_args,
    )
