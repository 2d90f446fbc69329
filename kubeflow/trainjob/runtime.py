"""Writes the Trainer v2 runtime the TrainJob engine references; a cluster admin applies it once.

    python -m kubeflow.trainjob.runtime --output runtime.yaml [--config kubeflow/pipeline.yaml]
        [--image REPO@sha256:DIGEST] [--namespace PROFILE]
    kubectl apply -f runtime.yaml

From `training.trainjob` (whichever engine is set): its name and kind
(`runtime`, `runtime_kind`), the nodes' placement, port and deadline, and
the image, pinned by digest as every step's is (a TrainJob replaces it with
its pipeline's own). A ClusterTrainingRuntime serves every profile; a
namespaced TrainingRuntime (`--namespace`) serves one. Neither can be
created by a profile's default-editor, which may only read runtimes.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import yaml

from kubeflow.trainjob.manifest import runtime_manifest

DIGEST = "@sha256:"


def main(argv: list[str] | None = None) -> int:
    from kubeflow.compile import DEFAULT_SETTINGS_FILE, load_package_settings, node_job_spec

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True, help="runtime manifest (.yaml)")
    parser.add_argument("--config", type=Path, default=DEFAULT_SETTINGS_FILE)
    parser.add_argument("--image", help="the image, REPO@sha256:DIGEST (default: the settings')")
    parser.add_argument("--namespace", help="the profile of a namespaced TrainingRuntime")
    args = parser.parse_args(argv)
    try:
        settings = load_package_settings(args.config)
        if args.image is not None:
            settings = dataclasses.replace(settings, image=args.image)
        if DIGEST not in settings.image:
            raise ValueError(
                f"image: {settings.image!r} is not pinned by digest; give --image "
                "REPO@sha256:DIGEST (what python -m kubeflow.release prints)"
            )
        spec = node_job_spec(settings)
        if spec.runtime_kind == "TrainingRuntime" and not args.namespace:
            raise ValueError(
                "training.trainjob.runtime_kind TrainingRuntime is namespaced: give --namespace"
            )
        manifest = runtime_manifest(spec, args.namespace)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args.output.write_text(yaml.safe_dump(manifest, sort_keys=False))
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    print(
        f"wrote {args.output} ({kind} {name}, {spec.nodes} nodes); "
        f"install: kubectl apply -f {args.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
