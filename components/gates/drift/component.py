"""The drift gate: new data against the data that trained the model being served.

TFX 1.16's ExampleValidator compares statistics with the schema only. TFDV's
drift comparators need the previous data's statistics, which TFX fetches with
a Resolver, a node open-source Kubeflow Pipelines rejects. Here the previous
statistics are the ones the Pusher wrote into the served version
(`components.serving.serving_dir.TRAINING_STATISTICS_FILE`): this step finds them
under the serving directory, on both runners, as `LatestServedModel` finds the
model.

Thresholds come from the dataset spec's `drift:` section (contract.dataset.sections.
DriftSpec): L-infinity distance for string features; for numeric ones,
Jensen-Shannon divergence over quantile histograms, or the quantile shift.
TFDV measures the first two. Its equal-width histograms make the divergence
of two random samples of one heavy-tailed column large, so the quantile ones
are used; even so, tied and rounded values (trip distances to a tenth of a
mile) make it as large between two samples of unchanged data as after a real
shift. The quantile shift is computed here from the same statistics: the
largest move of any decile (10th to 90th percentile) between the two
quantile histograms, over the old 10th-to-90th percentile range. A decile of
tied values is that value in both samples, so ties do not make it noisy.

A feature in `fail` mode beyond its threshold fails the step, and the Trainer
waits for this step, so nothing is trained or pushed; the error names the
feature, the measure, the value and the threshold. `warn` only reports. With
nothing served, or a served version without statistics, the step passes and
says so. It reads state outside the pipeline, so it never comes from cache
(`cached=False` in pipeline/steps.py).

The work is components/gates/drift/executor.py's, which the gate's pod on Kubeflow runs
without TFX (kubeflow/light_step.py); this module declares the component.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

from tfx.dsl.component.experimental.annotations import (
    InputArtifact,
    OutputArtifact,
    Parameter,
)
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts

from components.gates.drift.artifact import DataDrift
from components.gates.drift.executor import check_drift_gate


@component
def DataDriftGate(
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: InputArtifact[standard_artifacts.Schema],
    drift: OutputArtifact[DataDrift],
    serving_model_dir: Parameter[str],
    thresholds: Parameter[str],
    rolled_out_record: Parameter[str],
) -> None:
    """Fails the run when a feature drifted beyond its `fail` threshold; see the module doc.
    `rolled_out_record`: the KServe rollout's record of the served version, or ""."""
    check_drift_gate(statistics, schema, drift, serving_model_dir, thresholds, rolled_out_record)
