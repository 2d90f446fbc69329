"""What a step's work reads and sets of an artifact: TFX's, or kubeflow/light_step.py's.

The functions a step runs (components/model_push.py, served_baseline.py,
kubeflow/steps/deployment.py) are handed TFX's artifacts when TFX's executor
calls them, and the light runner's on a Kubeflow pod; these protocols name the
part of both they use. The module imports nothing a light step would not load.
"""

from __future__ import annotations

from typing import Any, Protocol


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
