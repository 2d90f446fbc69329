"""A fork's own step, as pipeline/config.py's `extra_steps` adds it (tests/test_fork_boundary.py):
a Python function component that reads the Trainer's model and writes its size.

No `from __future__ import annotations`: TFX reads the annotations as types."""

import os
from typing import TypedDict

from tfx.dsl.component.experimental.annotations import InputArtifact
from tfx.dsl.component.experimental.decorators import component
from tfx.types.standard_artifacts import Model


class ModelSizeOutputs(TypedDict):
    size_bytes: int


@component
def ModelSize(model: InputArtifact[Model]) -> ModelSizeOutputs:
    total = 0
    for folder, _, files in os.walk(model.uri):
        total += sum(os.path.getsize(os.path.join(folder, f)) for f in files)
    return {"size_bytes": total}
