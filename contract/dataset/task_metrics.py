"""The metrics of each task, in one table: what the Trainer reports, the Evaluator computes
and the blessing gates on.

`gate` is the metric a spec's `evaluation.metric` defaults to and the blessing
gates on, `higher_is_better` its direction; `gate_class` the class that computes
it in the Evaluator (TFMA's, or Keras' under the spec's metric name); `also` the
Evaluator's other metrics of the whole model, and `per_class` those it computes
for each class. The fork's `loss_and_metrics` (trainer/model.py) names its first
metric `gate`, so that the Trainer's validation and the Evaluator say the same
thing. pipeline/pipeline.py builds TFMA's config from this table, and
components/evaluator/batched_metrics.py's `KINDS` computes every class it names (a test
holds the two together).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskMetrics:
    gate: str
    higher_is_better: bool
    gate_class: str
    also: tuple[str, ...] = ()
    per_class: tuple[str, ...] = ()
    # Whether `gate_class` is a Keras metric, which TFMA names after the spec's metric;
    # TFMA's own BinaryAccuracy keeps its name (binary_accuracy).
    keras_gate: bool = True

    @property
    def classes(self) -> tuple[str, ...]:
        """Every metric class the Evaluator computes for the task (ExampleCount aside)."""
        return (self.gate_class, *self.also, *self.per_class)


TASK_METRICS: dict[str, TaskMetrics] = {
    "binary": TaskMetrics("binary_accuracy", True, "BinaryAccuracy", keras_gate=False),
    "multiclass": TaskMetrics(
        "accuracy",
        True,
        "SparseCategoricalAccuracy",
        also=("MultiClassConfusionMatrixPlot",),
        per_class=("Precision", "Recall"),
    ),
    "regression": TaskMetrics(
        "root_mean_squared_error", False, "RootMeanSquaredError", also=("MeanAbsoluteError",)
    ),
}
