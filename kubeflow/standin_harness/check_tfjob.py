"""Checks TFJob manifests against the Training Operator's own TFJob models (release-1.9 SDK).

    uv run --project kubeflow/kfp_sdk --locked python kubeflow/standin_harness/check_tfjob.py \
        MANIFEST.json [MANIFEST.json ...]

`kubeflow-training` 1.9.x holds the TFJob's OpenAPI models, generated from
the operator's Go types (the ones its CRD schema comes from), with the
Kubernetes core types (PodTemplateSpec, Container, ...) from the kubernetes
client. A manifest is read into those models and written back: a field the
models do not have is dropped, a value of the wrong type is converted, and a
required field that is missing raises, so the manifest is valid exactly when
it comes back unchanged. Prints one JSON line per manifest: its file and the
differences (empty when valid); exits 1 if any manifest is invalid.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from kubeflow.training.api_client import ApiClient

MODEL = "KubeflowOrgV1TFJob"


def differences(sent: Any, back: Any, path: str = "") -> list[str]:
    """Where `back` (the manifest after the models) differs from `sent`."""
    if isinstance(sent, dict) and isinstance(back, dict):
        found = []
        for key in sorted(set(sent) | set(back)):
            where = f"{path}.{key}" if path else key
            if key not in back:
                found.append(f"{where}: not a field of the TFJob models (dropped)")
            elif key not in sent:
                found.append(f"{where}: added by the models ({back[key]!r})")
            else:
                found += differences(sent[key], back[key], where)
        return found
    if isinstance(sent, list) and isinstance(back, list) and len(sent) == len(back):
        return [
            d
            for i, (a, b) in enumerate(zip(sent, back, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    if sent != back or type(sent) is not type(back):
        return [f"{path}: {sent!r} came back as {back!r}"]
    return []


def check_against(manifest: dict[str, Any], client: Any, model: str) -> list[str]:
    """`manifest` read into `client`'s model `model` and written back: the differences."""
    try:
        read = client._ApiClient__deserialize(manifest, model)
    except ValueError as err:  # a required field is missing
        return [str(err)]
    return differences(manifest, client.sanitize_for_serialization(read))


def check(manifest: dict[str, Any]) -> list[str]:
    return check_against(manifest, ApiClient(), MODEL)


def main(paths: list[str], check_one=check) -> int:
    """Prints each manifest's differences as a JSON line; 1 if any manifest is invalid."""
    invalid = 0
    for path in paths:
        with open(path) as f:
            found = check_one(json.load(f))
        invalid += bool(found)
        print(json.dumps({"file": path, "differences": found}))
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
