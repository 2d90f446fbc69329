"""Transform as the DAG wires it. The work, `ParquetAnalysisExecutor`, is
components/transform/executor.py."""

from tfx.components.transform import component as transform_component
from tfx.dsl.components.base import executor_spec

from components.transform.executor import ParquetAnalysisExecutor


class Transform(transform_component.Transform):
    """TFX's Transform with `ParquetAnalysisExecutor`: give it ExampleGen's
    `parquet_examples`; with `materialize`, its `transformed_examples` are tf.Examples."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(ParquetAnalysisExecutor)
