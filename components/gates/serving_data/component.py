"""The data gate of a scoring run: the new rows against the schema's SERVING environment.

At scoring time the label, and the columns a derived label is computed
from, do not exist yet, and the data may carry columns the model never saw
(the id columns the scores are keyed by, and others). TFX's ExampleValidator
validates every feature of the schema in every environment: its executor
calls `tfdv.validate_statistics(statistics, schema, custom_validation_config)`
with no environment (tfx v1.16.0, components/example_validator/executor.py,
`_Validate`), so a missing label is an anomaly there, and so is each new
column. This gate validates in TFDV's SERVING environment, the standard way
to leave the label out, and allows new columns; every other anomaly fails
the run as `DataValidationGate` does, with the same message.

Schemas that do not declare environments get them here: the label's source
columns that are not features (`DatasetSpec.serving_excluded_columns`) are
marked `not_in_environment: "SERVING"`.

The work is components/gates/serving_data/executor.py's, which the gate's pod on Kubeflow
runs without TFX (kubeflow/light_step.py); this module declares the component.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

from tfx.dsl.component.experimental.annotations import InputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts

from components.gates.data_validation.component import GateOutputs
from components.gates.serving_data.executor import check_serving_data


@component
def ServingDataGate(
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: InputArtifact[standard_artifacts.Schema],
    excluded_columns: Parameter[str],
) -> GateOutputs:
    """Fails the run on any anomaly in the SERVING environment, or no rows at all (the
    splits ExampleGen writes are one set of rows here: a small input may leave one empty)."""
    found = check_serving_data(statistics, schema, excluded_columns)
    return GateOutputs(examples_checked=found["examples_checked"])
