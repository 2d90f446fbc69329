"""What a step's work reads and sets of an artifact: TFX's, or kubeflow/light_step.py's.

The functions a step runs (components/serving/push/executor.py,
components/serving/baseline/executor.py,
kubeflow/steps/deploy/executor.py) are handed TFX's artifacts when TFX's executor
calls them, and the light runner's on a Kubeflow pod; these protocols name the
part of both they use. The module imports nothing a light step would not load.
"""

from __future__ import annotations

import json
import os
from typing import Any, Protocol

from components.artifact_names import SPLIT_DIR_PREFIX


class InputArtifact(Protocol):
    """An input: its URI and its custom properties, read."""

    @property
    def uri(self) -> str: ...

    def has_custom_property(self, key: str) -> bool: ...

    def get_custom_property(self, key: str) -> Any: ...


class OutputArtifact(Protocol):
    """An output: its URI, and the int and string custom properties a step sets."""

    @property
    def uri(self) -> str: ...

    def set_int_custom_property(self, key: str, value: int) -> None: ...

    def set_string_custom_property(self, key: str, value: str) -> None: ...


def split_names(artifact: Any) -> list[str]:
    """The splits an artifact holds: its `split_names` property decoded
    (types/standard_artifact_utils.py, `decode_split_names`, lines 153-157: none for "")."""
    encoded = artifact.split_names
    return json.loads(encoded) if encoded else []


def split_uri(artifact: Any, split: str) -> str:
    """`<uri>/Split-<split>`, an error naming the split where the artifact has none
    (types/standard_artifact_utils.py, `get_split_uris`, lines 86-101). TFX reads the
    `<uri>/<split>` layout of artifacts older than 0.29 only for an artifact resolved from
    ML Metadata without that version (`is_artifact_version_older_than`, lines 48-69); its
    Kubeflow entrypoint's inputs have no state, so always the new layout
    (orchestration/kubeflow/v2/container/kubeflow_v2_entrypoint_utils.py, lines 270-338)."""
    if split not in split_names(artifact):
        raise ValueError(f"Split does not exist over all example artifacts: {split}")
    return os.path.join(artifact.uri, f"{SPLIT_DIR_PREFIX}{split}")
