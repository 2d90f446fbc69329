"""The Evaluator as the DAG wires it. The work, `ServedBaselineExecutor`, is
components/evaluator/executor.py."""

from tfx.components.evaluator import component as evaluator_component
from tfx.dsl.components.base import executor_spec

from components.evaluator.executor import ServedBaselineExecutor


class Evaluator(evaluator_component.Evaluator):
    """`tfx.components.Evaluator` with `ServedBaselineExecutor`."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(ServedBaselineExecutor)
