"""The baseline for the Evaluator: the model currently served.

TFX's `Resolver(LatestBlessedModelStrategy)` compiles, for Kubeflow, to a
resolver executor that open-source Kubeflow Pipelines v2 does not implement.
This component does the same job as an ordinary container step, locally and
on Kubeflow alike: it finds the served version (components/serving/served_version.py:
the newest under the Pusher's serving directory, the one TF Serving loads, or the
one the KServe rollout's record names) and hands a copy to the Evaluator as a
Model artifact. With nothing served yet it emits an empty artifact marked
`has_model = 0`, which `components.evaluator.component.Evaluator` treats as "no
baseline" (so only absolute thresholds apply, as on a first run).

It reads state outside the pipeline, so it must never be served from cache:
its entry in pipeline/steps.py says `cached=False`, and both runners switch
caching off for it. The work is components/serving/baseline/executor.py's, which the
step's pod runs without TFX (kubeflow/light_step.py); this module declares it.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

import os
from typing import Any

from tfx import types
from tfx.dsl.component.experimental.annotations import (
    InputArtifact,
    OutputArtifact,
    Parameter,
)
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts

from components.artifact_names import HAS_MODEL_PROPERTY
from components.serving.baseline.executor import copy_latest_served


def is_served_baseline(artifact: types.Artifact) -> bool:
    """False only for the empty artifact LatestServedModel emits when nothing is served."""
    return (
        not artifact.has_custom_property(HAS_MODEL_PROPERTY)
        or artifact.get_int_custom_property(HAS_MODEL_PROPERTY) == 1
    )


@component
def LatestServedModel(
    candidate_model: InputArtifact[standard_artifacts.Model],
    baseline_model: OutputArtifact[standard_artifacts.Model],
    serving_model_dir: Parameter[str],
    rolled_out_record: Parameter[str],
):
    """Copies the served model into `baseline_model`, or marks it empty (executor.py's
    `copy_latest_served`; `rolled_out_record`: the KServe rollout's record, or "")."""
    del candidate_model  # Only orders this step after Trainer; see the module docstring.
    copy_latest_served(serving_model_dir, baseline_model, rolled_out_record)


def signature_defs(model_dir: str) -> "dict[str, Any]":
    """The SavedModel's signatures (SignatureDef protos by name), read from
    `saved_model.pb`, internal ones (`__saved_model_init_op`) left out; none when
    the file is gone (a version Kubeflow's Deploy step rolled back and set aside)."""
    from tensorflow.core.protobuf import saved_model_pb2

    path = os.path.join(model_dir, "saved_model.pb")
    if not fileio.exists(path):
        return {}
    saved_model = saved_model_pb2.SavedModel()
    with fileio.open(path, "rb") as f:
        saved_model.ParseFromString(f.read())
    return {
        name: signature
        for meta_graph in saved_model.meta_graphs
        for name, signature in meta_graph.signature_def.items()
        if not name.startswith("__")
    }
