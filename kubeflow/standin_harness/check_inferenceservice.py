"""Checks InferenceService manifests against KServe's own models (the `kserve` SDK, 0.15+).

    uv run --project kubeflow/kfp_sdk --locked python \
        kubeflow/standin_harness/check_inferenceservice.py MANIFEST.json [MANIFEST.json ...]

The SDK's `V1beta1InferenceService` and the models under it are generated from
the OpenAPI schema of KServe's Go types, the ones the InferenceService CRD is
generated from, with the Kubernetes core types (Toleration, ResourceRequirements)
from the kubernetes client. As check_tfjob.py does for TFJobs: a manifest read
into the models and written back comes back unchanged exactly when every field
is one the models have, of the type they have. Prints one JSON line per
manifest; exits 1 if any is invalid.
"""

from __future__ import annotations

import sys
from typing import Any

import kserve.models
from check_tfjob import check_against, main
from kserve.api_client import ApiClient
from kubernetes.client import models as core_models

MODEL = "V1beta1InferenceService"
# The SDK's client looks every model up in kserve.models, but its models name
# Kubernetes' core types (V1ObjectMeta, V1Toleration, ...): lend them.
for _name in dir(core_models):
    if _name.startswith("V1") and not hasattr(kserve.models, _name):
        setattr(kserve.models, _name, getattr(core_models, _name))


def check(manifest: dict[str, Any]) -> list[str]:
    return check_against(manifest, ApiClient(), MODEL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], check))
