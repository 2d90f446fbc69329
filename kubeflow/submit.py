"""Submits a compiled package to Kubeflow Pipelines, once or on a schedule.

    ./dev submit --host https://kfp.example.com --package build/pipeline.yaml \
        [--data-root gs://bucket/data/2026-11] [--train-steps 5000] [--schedule] \
        [--pipeline-root gs://bucket/tfx/root] [--model-version V (the scoring package)]

Runs in the current-KFP-SDK environment (kubeflow/kfp_sdk/), not the
project's: TFX 1.16 holds the project's kfp at 2.5, whose client cannot read
the resource fields today's clusters use. Nothing here imports TFX.

First it reads the backend's release from the KFP API and refuses one outside
the supported range (kubeflow/backend.py: older than 2.15.0, or 3.x); it
warns where the release cannot be read, where it is a 2.x newer than those
read, and on 2.17 and later, whose stock Argo settings retry no failed step.
Once: creates (or reuses) the experiment and starts a run.
--schedule: creates a recurring run from the `schedule` section of the
settings file (cron, experiment, max_concurrency, catchup); for the batch
scoring package (`python -m kubeflow.compile --scoring`), from its
`scoring_schedule` section.

Both carry the pipeline root in the run's runtime config: the package's own
`defaultPipelineRoot`, or `--pipeline-root`. The backend never reads the
spec's `defaultPipelineRoot`: its root DAG driver takes the runtime config's
root (the API server copies `runtime_config.pipeline_root` there:
backend/src/apiserver/server/api_converter.go:1074-1086 at 2.17.0), else
the `kfp-launcher` ConfigMap's `defaultPipelineRoot`, else
`minio://mlpipeline/v2/artifacts` (kubeflow/pipelines 2.15.0 to 2.17.0,
backend/src/v2/driver/root_dag.go: 2.17.0 lines 97 and 109-114,
`opts.RuntimeConfig.GetGcsOutputDirectory()` then `cfg.DefaultPipelineRoot()`;
backend/src/v2/config/env.go:38 and 86-92), and kfp.Client sends only the
`pipeline_root` it is given (kfp 2.17.0, kfp/client/client.py,
`_create_job_config`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kubeflow.kfp_api import (
    connect,
    is_scoring_package,
    is_tuning_package,
    package_spec,
    pipeline_root,
)
from kubeflow.run_parameters import (
    DATA_ROOT_PARAMETER,
    MODEL_VERSION_PARAMETER,
    TRAIN_ARGS_PARAMETER,
    train_args_value,
)
from kubeflow.settings import DEFAULT_SETTINGS_FILE, load_settings
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.object_store import ObjectStore, store_path
from kubeflow.step_ids import settings_step_ids
from kubeflow.tfx_spec import all_tasks


def run_arguments(
    data_root: str | None, train_steps: int | None, object_store: ObjectStore | None
) -> dict[str, str]:
    """Pipeline parameters for this run; unset ones keep the package's defaults.

    `object_store` is the one the package was compiled with: its steps know no other.
    """
    arguments = {}
    if data_root is not None:
        arguments[DATA_ROOT_PARAMETER] = store_path(data_root, "--data-root", object_store)
    if train_steps is not None:
        if train_steps <= 0:
            raise SettingsError(f"--train-steps: must be > 0, got {train_steps}")
        arguments[TRAIN_ARGS_PARAMETER] = train_args_value(train_steps)
    return arguments


def pinned_version(version: str, package: Path, scoring: bool) -> str:
    """`--model-version`: a version number, for the scoring package only."""
    if not scoring:
        raise SettingsError(
            f"--model-version: {package} is not the scoring package; only scoring runs pin "
            "a model version"
        )
    if not version.isdigit():
        raise SettingsError(
            f"--model-version: {version!r} is not a version number (a directory number "
            "under serving_model_dir)"
        )
    return version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Submit the compiled pipeline to KFP.")
    parser.add_argument(
        "--host", required=True, help="KFP API endpoint, e.g. https://kfp.example.com"
    )
    parser.add_argument(
        "--package", type=Path, required=True, help="from python -m kubeflow.compile"
    )
    parser.add_argument("--data-root", help="override the data_root parameter")
    parser.add_argument(
        "--pipeline-root", help="override the package's pipeline root (where artifacts go)"
    )
    parser.add_argument("--train-steps", type=int, help="override the training steps")
    parser.add_argument(
        "--model-version",
        help="the scoring package: score with this served version, not the served one",
    )
    parser.add_argument(
        "--experiment", help="experiment name (default: the settings' schedule one)"
    )
    parser.add_argument("--run-name", help="display name of the run or recurring run")
    parser.add_argument("--schedule", action="store_true", help="create a recurring run")
    parser.add_argument("--config", type=Path, default=DEFAULT_SETTINGS_FILE)
    parser.add_argument(
        "--namespace", help="the profile namespace on a multi-user KFP (default: kfp.namespace)"
    )
    args = parser.parse_args(argv)
    try:
        if not args.package.exists():
            raise SettingsError(f"--package: {args.package} does not exist")
        spec = package_spec(args.package)
        scoring = is_scoring_package(spec)
        if scoring and args.train_steps is not None:
            raise SettingsError(
                f"--train-steps: {args.package} is the scoring package, which trains nothing"
            )
        settings = load_settings(args.config, settings_step_ids() | set(all_tasks(spec)))
        arguments = run_arguments(args.data_root, args.train_steps, settings.object_store)
        if args.model_version is not None:
            arguments[MODEL_VERSION_PARAMETER] = pinned_version(
                args.model_version, args.package, scoring
            )
        root = pipeline_root(spec, args.pipeline_root, settings.object_store, args.package)
        section = "scoring_schedule" if scoring else "schedule"
        schedule = settings.scoring_schedule if scoring else settings.schedule
        if args.schedule and is_tuning_package(spec):
            raise SettingsError(
                f"--schedule: {args.package} is the tuning package, and scheduled runs never "
                "tune (docs/tuning.md): run it once, without --schedule"
            )
        if args.schedule and schedule is None:
            raise SettingsError(f"{section}: required in {args.config} for --schedule")
        connection = connect(args.host, args.namespace or settings.kfp.namespace)
    except SettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if connection is None:
        return 2
    client, namespace = connection.client, connection.namespace
    experiment_name = args.experiment or (schedule.experiment if schedule else "Default")
    name = args.run_name or args.package.stem
    if args.schedule and schedule is not None:
        experiment = client.create_experiment(experiment_name, namespace=namespace)
        recurring = client.create_recurring_run(
            experiment_id=experiment.experiment_id,
            job_name=name,
            cron_expression=schedule.cron,
            max_concurrency=schedule.max_concurrency,
            no_catchup=not schedule.catchup,
            pipeline_package_path=str(args.package),
            params=arguments,
            pipeline_root=root,
        )
        print(f"recurring run {recurring.recurring_run_id}: '{schedule.cron}' in {experiment_name}")
    else:
        result = client.create_run_from_pipeline_package(
            str(args.package),
            arguments=arguments,
            run_name=name,
            experiment_name=experiment_name,
            namespace=namespace,
            pipeline_root=root,
        )
        print(f"run {result.run_id} in {experiment_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
