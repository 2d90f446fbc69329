"""How a step's output shows in the KFP UI, for TFX artifacts and the light steps' outputs alike.

Apart from kubeflow/steps/kfp_artifacts.py, whose artifact classes import
`tfx.types` and with it TensorFlow: a light step (kubeflow/light_step.py)
names its output without either.
"""

from __future__ import annotations

from typing import Protocol

# The KFP UI shows a system.* artifact only if it has this custom property
# (its output's name, as KFP's launcher sets it when the executor did not).
DISPLAY_NAME_PROPERTY = "display_name"


class OutputFile(Protocol):
    """An output artifact a step writes: a TFX artifact, or kubeflow/light_step.py's."""

    @property
    def uri(self) -> str: ...

    def set_string_custom_property(self, key: str, value: str) -> None: ...


def shown_as(artifact: OutputFile, name: str) -> None:
    """Names the artifact in the KFP UI, whatever the backend's launcher does."""
    artifact.set_string_custom_property(DISPLAY_NAME_PROPERTY, name)
