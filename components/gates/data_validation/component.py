"""A gate that stops the pipeline when ExampleValidator found anomalies.

TFX's ExampleValidator only *records* anomalies; Transform and Trainer run on
regardless. This component fails instead, naming every split, feature and
anomaly, and the Trainer is made to wait for it, so bad data never reaches
training and nothing gets pushed.

When the data passes, the gate records how many examples it checked (an
Integer artifact). Nothing reads it downstream; a step with an output has a
place to record its own attempts on Kubeflow (kubeflow/step_attempt.py), and
this is the step a failed run's report must name.

The rules and the files they read are components/gates/data_validation/executor.py's, which the
gate's pod on Kubeflow runs without TFX (kubeflow/light_step.py); this module
declares the component, whose body calls the same function.
"""

# No `from __future__ import annotations` here: the @component decorator reads
# the real annotation objects.

from typing import TypedDict

from tfx.dsl.component.experimental.annotations import InputArtifact
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts

from components.gates.data_validation.executor import validate_examples


class GateOutputs(TypedDict):
    examples_checked: int


@component
def DataValidationGate(
    anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
) -> GateOutputs:
    """Fails the run if any split has anomalies or no examples; else counts the examples."""
    return GateOutputs(
        examples_checked=validate_examples(anomalies, statistics)["examples_checked"]
    )
