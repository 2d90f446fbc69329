"""Compiles the pipeline for Kubeflow Pipelines v2.

    python -m kubeflow.compile --output pipeline.yaml [--config kubeflow/pipeline.yaml]
    python -m kubeflow.compile --scoring --output scoring.yaml    # the batch scoring package
    python -m kubeflow.compile --tuning --output tuning.yaml      # the tuning package
    python -m kubeflow.compile --training-runtime --output runtime.yaml --image REPO@sha256:D
                                    # the TrainJob's runtime, applied once per cluster

The DAG is the same `create_pipeline(...)` that runs locally. TFX's
KubeflowV2DagRunner writes the pipeline spec (schema 2.1.0); this module then
adds what TFX leaves out, in the form today's KFP SDK writes it:

* per-step CPU/memory/accelerator requests and limits on every container
  step, ExampleGen and the schema importer included;
* the Kubernetes platform section (node selectors, tolerations) that KFP reads,
  as `kfp.kubernetes.add_node_selector` / `add_toleration` produce it;
* defaults for the runtime parameters (`data_root`, `train_args`) and the
  pipeline root;
* caching switched off for steps that read or change state outside the
  pipeline (`cached=False` in the step registry, pipeline/steps.py and
  kubeflow/pipeline_steps.py: the input snapshot, the drift gate, the
  served-model lookup, the Deploy step);
* retries (`retryPolicy`) per step, from the `retries:` settings
  (kubeflow/settings/retries.py);
* with `training.engine: tfjob`, the Trainer as kubeflow/tfjob/'s
  TFJobTrainer, its job's spec in the step's `custom_config`
  (kubeflow/settings/training.py); with `trainjob`, as kubeflow/trainjob/'s
  TrainJobTrainer, likewise;
* the exit handler (kubeflow/steps/run_status/component.py), which TFX compiles around a
  `tfx-dag` sub-DAG, made valid for the open-source backend: the sub-DAG
  declares the runtime parameters its tasks read and the root task passes
  them in (`pass_parameters_into_sub_dags`), and the final status is a
  `TASK_FINAL_STATUS` parameter, as kfp's `dsl.ExitHandler` compiles;
* KFP's own artifact types (`system.HTML`, `system.Metrics`) written as kfp
  writes them, by schema title (`kfp_artifact_types`), so the KFP UI renders
  the report and charts the metrics;
* parameters passed between steps name their producer task as it is named
  (`fix_output_parameter_producers`);
* every container runs `kubeflow.step_entrypoint` (TFX's entrypoint with
  s3:// registered, on the executor input as the component declares it,
  told its declared outputs by `--declared_outputs`) and, with
  `object_store:` set, gets the store's environment: plain values in the
  container spec, the credentials secret as kfp-kubernetes'
  `use_secret_as_env` writes it in the platform section.

The output is a two-document YAML file (pipeline spec, platform spec), as
`kfp.compiler.Compiler` writes: upload it in the KFP UI or submit it with
`python -m kubeflow.submit`.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import difflib
import json
import posixpath
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from components.serving.rollout_record import rolled_out_record
from kubeflow import backend
from kubeflow.settings import DEFAULT_SETTINGS_FILE, KubeflowSettings, load_settings
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.object_store import ObjectStore, launcher_root
from kubeflow.settings.placement import Placement, quantity_value
from kubeflow.settings.retries import DEFAULT_RETRY, RetryRoles
from kubeflow.settings.training import check_training
from kubeflow.step_entrypoint import DECLARED_OUTPUTS_FLAG, TFX_ENTRYPOINT_MODULE
from kubeflow.step_ids import TUNE, settings_step_ids
from kubeflow.tfjob.spec import TFJobSpec
from kubeflow.tfx_spec import (
    all_tasks,
    dags,
    executor_labels,
    fix_output_parameter_producers,
    kfp_artifact_types,
    pass_parameters_into_sub_dags,
    type_final_status_parameters,
)
from kubeflow.trainjob.spec import TrainJobSpec
from pipeline.steps import DAG_STEPS, EXAMPLE_GEN, SCORING_STEPS, TRAINER, TRANSFORM

# The project checkout this module compiles from: schema_dir is relative to it.
PROJECT_ROOT = Path(__file__).resolve().parents[1]
TRAIN_ARGS_PARAMETER = "train_args"
DATA_ROOT_PARAMETER = "data_root"
# The scoring package's: where its partitions go (docs/batch-scoring.md).
SCORES_ROOT_PARAMETER = "scores_root"
# The scoring package's pin: a served version number, or "" for the served version.
MODEL_VERSION_PARAMETER = "model_version"
# What every container runs instead of TFX's entrypoint (see kubeflow/step_entrypoint.py).
STEP_COMMAND = ["python", "-m", "kubeflow.step_entrypoint"]
# Under the pipeline root: the tuning step's search directories (docs/tuning.md).
TUNING_DIR = "tuning"


def _cpu_number(quantity: str) -> float:
    """Cores, the unit of KFP's legacy numeric CPU fields (500m is 0.5)."""
    return float(quantity_value(quantity))


def _memory_gb(quantity: str) -> float:
    """Decimal gigabytes, the unit of KFP's legacy numeric memory fields."""
    return float(quantity_value(quantity) / 10**9)


def resource_spec(placement: Placement) -> dict[str, Any]:
    """The container `resources` block, field for field as kfp 2.x's compiler writes it."""
    resources = placement.resources
    spec: dict[str, Any] = {}
    for field, legacy, convert in (
        ("cpu_limit", "cpuLimit", _cpu_number),
        ("cpu_request", "cpuRequest", _cpu_number),
        ("memory_limit", "memoryLimit", _memory_gb),
        ("memory_request", "memoryRequest", _memory_gb),
    ):
        value = getattr(resources, field)
        if value is not None:
            spec[legacy] = convert(value)
            spec["resource" + legacy[0].upper() + legacy[1:]] = value
    if resources.gpu:
        spec["accelerator"] = {
            "count": str(resources.gpu),
            "resourceCount": str(resources.gpu),
            "resourceType": resources.accelerator,
            "type": resources.accelerator,
        }
    return spec


def kubernetes_executor_config(placement: Placement) -> dict[str, Any]:
    """One executor's entry in the platform spec, as kfp-kubernetes writes it."""
    config: dict[str, Any] = {}
    if placement.node_selector:
        config["nodeSelector"] = {"labels": dict(placement.node_selector)}
    if placement.tolerations:
        config["tolerations"] = [t.to_kubernetes() for t in placement.tolerations]
    return config


def environment_spec(object_store: ObjectStore | None) -> list[dict[str, str]]:
    """The container `env` block, as kfp's `set_env_variable` writes it (Kubernetes' own form)."""
    if object_store is None:
        return []
    return object_store.container_env(secret_refs=False)


def secret_as_env(object_store: ObjectStore | None) -> list[dict[str, Any]]:
    """The platform `secretAsEnv` entry, field for field as kfp-kubernetes' `use_secret_as_env`."""
    if object_store is None or object_store.credentials is None:
        return []
    credentials = object_store.credentials
    return [
        {
            "keyToEnv": [
                {"secretKey": key, "envVar": env} for key, env in credentials.key_to_env().items()
            ],
            # A missing secret must stop the pod, not start it without credentials.
            "optional": False,
            "secretName": credentials.secret,
            "secretNameParameter": {"runtimeValue": {"constant": credentials.secret}},
        }
    ]


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


def write_training_runtime(
    config: Path, output: Path, image: str | None, namespace: str | None
) -> int:
    """Writes `training.trainjob`'s runtime (kubeflow/trainjob/manifest.py), its image
    pinned by digest as every step's is; a TrainJob replaces it with its pipeline's own."""
    from kubeflow.trainjob.manifest import runtime_manifest

    try:
        settings = load_package_settings(config)
        if image is not None:
            settings = dataclasses.replace(settings, image=image)
        if "@sha256:" not in settings.image:
            raise ValueError(
                f"image: {settings.image!r} is not pinned by digest; give --image "
                "REPO@sha256:DIGEST (what python -m kubeflow.release prints)"
            )
        spec = node_job_spec(settings)
        if spec.runtime_kind == "TrainingRuntime" and not namespace:
            raise ValueError(
                "training.trainjob.runtime_kind TrainingRuntime is namespaced: give --namespace"
            )
        manifest = runtime_manifest(spec, namespace)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    output.write_text(yaml.safe_dump(manifest, sort_keys=False))
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    print(f"wrote {output} ({kind} {name}, {spec.nodes} nodes); install: kubectl apply -f {output}")
    return 0


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


def train_args_value(train_steps: int) -> str:
    """The `train_args` parameter for `train_steps` (TrainArgs as JSON)."""
    return json.dumps({"num_steps": train_steps})


def _tfx_pipeline_spec(tfx_pipeline, image: str, exit_handler=None) -> dict[str, Any]:
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2

    with tempfile.TemporaryDirectory() as tmp:
        runner = v2.KubeflowV2DagRunner(
            config=v2.KubeflowV2DagRunnerConfig(default_image=image, use_pipeline_spec_2_1=True),
            output_dir=tmp,
            output_filename="pipeline.json",
        )
        if exit_handler is not None:
            runner.set_exit_handler(exit_handler)
        runner.run(tfx_pipeline, write_out=True)
        return json.loads((Path(tmp) / "pipeline.json").read_text())["pipelineSpec"]


def complete_spec(
    spec: dict[str, Any],
    settings: KubeflowSettings,
    uncached: tuple[str, ...],
    deadlines: dict[str, int] | None = None,
    parameter_defaults: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Adds resources, parameter defaults, pipeline root and caching; returns (spec, platform).

    `deadlines`: seconds a step may run, where bounded; its retry window derives from it.
    `parameter_defaults`: the runtime parameters' defaults (None: the training
    package's, `data_root` and `train_args`).
    """
    deadlines = deadlines or {}
    spec = copy.deepcopy(spec)
    spec["defaultPipelineRoot"] = settings.pipeline_root
    parameters = spec["root"].setdefault("inputDefinitions", {}).setdefault("parameters", {})
    defaults = parameter_defaults or {
        DATA_ROOT_PARAMETER: settings.data_root,
        TRAIN_ARGS_PARAMETER: train_args_value(settings.train_steps),
    }
    for name, default in defaults.items():
        parameters[name]["defaultValue"] = default

    executors = spec["deploymentSpec"]["executors"]
    platform_executors = {}
    env = environment_spec(settings.object_store)
    secrets = secret_as_env(settings.object_store)
    tasks = all_tasks(spec)
    for task_id, label in executor_labels(spec).items():
        retry_policy = settings.retries.policy_for(task_id).spec(deadlines.get(task_id))
        if retry_policy:
            tasks[task_id]["retryPolicy"] = retry_policy
        container = executors[label].get("container")
        placement = settings.placement_for(task_id)
        if container is None:
            if task_id in settings.placements:
                raise ValueError(f"components.{task_id}: runs no container; it takes no resources")
            continue
        if container.get("command") != ["python", "-m", TFX_ENTRYPOINT_MODULE]:
            raise ValueError(
                f"{task_id}: TFX compiled the command {container.get('command')}, not its V2 "
                "entrypoint; kubeflow.step_entrypoint cannot stand in for it"
            )
        container["command"] = list(STEP_COMMAND)
        # The backend's driver adds outputs of its own (kubeflow/step_entrypoint.py).
        outputs = spec["components"][tasks[task_id]["componentRef"]["name"]].get(
            "outputDefinitions", {}
        )
        declared = json.dumps(sorted(outputs.get("artifacts", {})))
        container["args"] = [DECLARED_OUTPUTS_FLAG, declared, *container.get("args", [])]
        resources = resource_spec(placement)
        if resources:
            container["resources"] = resources
        if env:
            container["env"] = copy.deepcopy(env)
        kubernetes = kubernetes_executor_config(placement)
        if secrets:
            kubernetes["secretAsEnv"] = copy.deepcopy(secrets)
        if kubernetes:
            platform_executors[label] = kubernetes
    for task_id in uncached:
        if task_id in tasks:  # Deploy is there only with `serving:`
            tasks[task_id]["cachingOptions"] = {}
    for dag in dags(spec).values():
        fix_output_parameter_producers(dag["dag"]["tasks"])
    pass_parameters_into_sub_dags(spec)
    type_final_status_parameters(spec)
    kfp_artifact_types(spec)
    platform = {"platforms": {"kubernetes": {"deploymentSpec": {"executors": platform_executors}}}}
    return spec, platform


def compile_pipeline(settings: KubeflowSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    from kubeflow.pipeline_steps import KUBEFLOW_STEPS, create_run_status_step

    dag = build_tfx_pipeline(settings)
    tfx_spec = _tfx_pipeline_spec(dag, settings.image, create_run_status_step(dag))
    return complete_spec(tfx_spec, settings, KUBEFLOW_STEPS.uncached_ids, step_deadlines(settings))


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


def compile_scoring_pipeline(
    settings: KubeflowSettings, schema_dir: Path | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The scoring package: the scoring DAG, mended as the training package is, and its
    exit handler, the scoring report."""
    from kubeflow.pipeline_steps import create_scoring_report_step

    dag = build_scoring_pipeline(settings, schema_dir)
    return complete_spec(
        _tfx_pipeline_spec(dag, settings.image, create_scoring_report_step(dag)),
        settings,
        SCORING_STEPS.uncached_ids,
        parameter_defaults={
            DATA_ROOT_PARAMETER: settings.data_root,
            SCORES_ROOT_PARAMETER: scores_root(settings),
            MODEL_VERSION_PARAMETER: "",
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


def compile_tuning_pipeline(settings: KubeflowSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tuning package: the DAG up to Transform and Tune, mended as the training package is."""
    from kubeflow.pipeline_steps import KUBEFLOW_STEPS

    dag = build_tuning_pipeline(settings)
    return complete_spec(
        _tfx_pipeline_spec(dag, settings.image),
        settings,
        KUBEFLOW_STEPS.uncached_ids,
        {TUNE: settings.tuning.deadline_seconds},
        parameter_defaults={DATA_ROOT_PARAMETER: settings.data_root},
    )


def load_tuning_settings(path: Path) -> KubeflowSettings:
    """The settings read for the tuning package: `components:` and `retries:` may name Tune.

    Unnamed, Tune retries as DEFAULT_RETRY does, within its `tuning.deadline`: a retry
    resumes the search from its directory on the object store (docs/tuning.md).
    """
    settings = load_package_settings(path)
    if TUNE in settings.retries.components:
        return settings
    retries = dataclasses.replace(
        settings.retries, components={**settings.retries.components, TUNE: DEFAULT_RETRY}
    )
    return dataclasses.replace(settings, retries=retries)


def pipeline_step_ids() -> set[str]:
    """Every step of a Kubeflow run: the ids the settings may name."""
    from kubeflow.pipeline_steps import KUBEFLOW_STEPS

    return set(KUBEFLOW_STEPS.ids)


def pipeline_retry_roles() -> RetryRoles:
    from kubeflow.pipeline_steps import RETRY_ROLES

    return RETRY_ROLES


def load_package_settings(path: Path) -> KubeflowSettings:
    """The settings file every package reads: it may name the steps of any of the three
    (training, scoring, tuning), so that one kubeflow/pipeline.yaml serves them all; a
    package applies the entries of its own steps. An id no package has is refused."""
    roles = pipeline_retry_roles()
    return load_settings(
        path,
        settings_step_ids(),
        set(DAG_STEPS.beam_ids) | set(SCORING_STEPS.beam_ids),
        RetryRoles(
            retried_by_default=roles.retried_by_default
            | frozenset(SCORING_STEPS.retried_by_default),
            never_retried={**roles.never_retried, **SCORING_STEPS.never_retried},
        ),
    )


def load_scoring_settings(path: Path) -> KubeflowSettings:
    """The settings file read for the scoring package: its steps may be named too.

    The training package's settings name only training's steps, so the steps
    only scoring has and that retry by default (the scorer: its commit makes a
    retry safe, docs/batch-scoring.md) get DEFAULT_RETRY unless named.
    """
    settings = load_package_settings(path)
    scoring_only = set(SCORING_STEPS.retried_by_default) - pipeline_step_ids()
    unnamed = {s: DEFAULT_RETRY for s in scoring_only if s not in settings.retries.components}
    retries = dataclasses.replace(
        settings.retries, components={**settings.retries.components, **unnamed}
    )
    return dataclasses.replace(settings, retries=retries)


def store_paths(settings: KubeflowSettings, package: str) -> list[tuple[str, str, str]]:
    """Every store path the package's steps write or read: (setting, path, how it is derived)."""
    paths = [
        ("pipeline_root", settings.pipeline_root, ""),
        ("parameters.data_root", settings.data_root, ""),
        ("serving_model_dir", settings.serving_model_dir, ""),
    ]
    if settings.serving is not None:
        paths.append(("serving.storage_root", settings.serving.storage_root, ""))
    if package == "scoring":
        paths.append(
            ("serving_model_dir", scores_root(settings), " (the scores, beside serving_model_dir)")
        )
    if package == "tuning":
        search = posixpath.join(settings.pipeline_root, TUNING_DIR)
        paths.append(("pipeline_root", search, " (the tuning search, under pipeline_root)"))
    return paths


def check_store_paths(settings: KubeflowSettings, package: str) -> None:
    """Refuses a path the object store's credentials may not write, naming its setting
    (with the kubeflow-platform preset: outside the namespace's prefixes)."""
    store = settings.object_store
    if store is None:
        return
    for where, path, why in store_paths(settings, package):
        store.check_writable(where, path, why)


def pipeline_root_note(settings: KubeflowSettings) -> str:
    """Which root a run of the package really writes to (the backend never reads the spec's)."""
    store = settings.object_store
    namespace = store.namespace if store is not None else None
    launcher = launcher_root(namespace) if namespace else "minio://mlpipeline/v2/artifacts"
    where = (
        f"namespace {namespace}'s kfp-launcher ConfigMap's defaultPipelineRoot, {launcher}"
        if namespace
        else "the run namespace's kfp-launcher ConfigMap's defaultPipelineRoot (on the "
        "Kubeflow platform minio://mlpipeline/private-artifacts/NAMESPACE/v2/artifacts), "
        f"else {launcher}"
    )
    return (
        f"pipeline root {settings.pipeline_root}: the backend ignores the package's own, so a "
        "run gets it through its runtime config (./dev submit, ./dev release and the KFP UI's "
        f"Create run send it); a run started without one writes to {where}, which no "
        "TensorFlow or Beam step can read (minio://)"
    )


def write_package(path: Path, spec: dict[str, Any], platform: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    name = spec["pipelineInfo"]["name"]
    with path.open("w") as f:
        f.write(f"# PIPELINE DEFINITION\n# Name: {name}\n")
        yaml.safe_dump_all([spec, platform], f, sort_keys=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compile the pipeline for Kubeflow Pipelines v2.")
    parser.add_argument("--output", type=Path, required=True, help="pipeline package (.yaml)")
    parser.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_SETTINGS_FILE,
        help="Kubeflow settings (default: kubeflow/pipeline.yaml)",
    )
    parser.add_argument(
        "--scoring",
        action="store_true",
        help="compile the batch scoring package instead (docs/batch-scoring.md)",
    )
    parser.add_argument(
        "--tuning",
        action="store_true",
        help="compile the tuning package instead (docs/tuning.md)",
    )
    parser.add_argument(
        "--training-runtime",
        action="store_true",
        help="write the Trainer v2 runtime training.engine trainjob references instead, for a "
        "cluster admin to apply once (docs/training-on-several-nodes.md)",
    )
    parser.add_argument(
        "--namespace",
        help="with --training-runtime and runtime_kind TrainingRuntime: the profile it serves",
    )
    parser.add_argument(
        "--image",
        help="run every step in this image instead of the settings' `image:` (kubeflow.release "
        "gives the REPO@sha256:DIGEST it releases)",
    )
    args = parser.parse_args(argv)
    if args.scoring + args.tuning + args.training_runtime > 1:
        parser.error("--scoring, --tuning, --training-runtime: one at a time")
    if args.training_runtime:
        return write_training_runtime(args.config, args.output, args.image, args.namespace)
    try:
        if args.tuning:
            settings = load_tuning_settings(args.config)
        elif args.scoring:
            settings = load_scoring_settings(args.config)
        else:
            settings = load_package_settings(args.config)
        if args.image is not None:
            settings = dataclasses.replace(settings, image=args.image)
        check_store_paths(
            settings, "tuning" if args.tuning else "scoring" if args.scoring else "training"
        )
        if args.tuning:
            spec, platform = compile_tuning_pipeline(settings)
        elif args.scoring:
            spec, platform = compile_scoring_pipeline(settings)
        else:
            spec, platform = compile_pipeline(settings)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    write_package(args.output, spec, platform)
    print(f"wrote {args.output} ({len(executor_labels(spec))} steps, image {settings.image})")
    print(f"runs on {backend.requirement()}")
    print(pipeline_root_note(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
