"""Compiles the pipeline for Kubeflow Pipelines v2.

    python -m kubeflow.compile --output pipeline.yaml [--config kubeflow/pipeline.yaml]
    python -m kubeflow.compile --scoring --output scoring.yaml    # the batch scoring package
    python -m kubeflow.compile --tuning --output tuning.yaml      # the tuning package
    python -m kubeflow.compile --training-runtime --output runtime.yaml --image REPO@sha256:D
                                    # the TrainJob's runtime, applied once per cluster

The DAG is the same `create_pipeline(...)` that runs locally, built for each
package from the settings (kubeflow/package_dags.py, the settings as
kubeflow/package_settings.py reads them). TFX's KubeflowV2DagRunner writes
the pipeline spec (schema 2.1.0); kubeflow/spec_completion.py then adds what
TFX leaves out (resources, the platform section, parameter defaults, caching,
retries, the step command, the object store's environment), in the form
today's KFP SDK writes it, and mends what the open-source backend reads
otherwise (kubeflow/tfx_spec.py).

The output is a two-document YAML file (pipeline spec, platform spec), as
`kfp.compiler.Compiler` writes: upload it in the KFP UI or submit it with
`python -m kubeflow.submit`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from kubeflow import backend
from kubeflow.package_dags import (
    build_scoring_pipeline,
    build_tfx_pipeline,
    build_tuning_pipeline,
    node_job_spec,
    scores_root,
    step_deadlines,
)
from kubeflow.package_settings import (
    check_store_paths,
    load_package_settings,
    load_scoring_settings,
    load_tuning_settings,
)
from kubeflow.run_parameters import (
    DATA_ROOT_PARAMETER,
    MODEL_VERSION_PARAMETER,
    SCORES_ROOT_PARAMETER,
)
from kubeflow.settings import DEFAULT_SETTINGS_FILE, KubeflowSettings
from kubeflow.settings.object_store import launcher_root
from kubeflow.spec_completion import complete_spec
from kubeflow.step_ids import TUNE
from kubeflow.tfx_spec import executor_labels
from pipeline.steps import SCORING_STEPS


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


def compile_pipeline(settings: KubeflowSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    from kubeflow.pipeline_steps import KUBEFLOW_STEPS, create_run_status_step

    dag = build_tfx_pipeline(settings)
    tfx_spec = _tfx_pipeline_spec(dag, settings.image, create_run_status_step(dag))
    return complete_spec(tfx_spec, settings, KUBEFLOW_STEPS.uncached_ids, step_deadlines(settings))


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
