"""Transform over ExampleGen's Parquet: analysis reads Parquet, the Trainer still gets tf.Examples.

TFX's Transform reads a Parquet Examples artifact through `ParquetTFXIO` (tfx 1.16,
components/util/tfxio_utils.py, lines 417-421), which spares its analysis the
inflate and decode of every tf.Example (components/example_gen/parquet_examples.py). Two
things in TFX's Parquet path need an answer before the pipeline can take it:

- **Materialized examples would be Parquet.** TFX writes the transformed data in
  the format of the last transform input (tfx 1.16, components/transform/
  executor.py, lines 1239-1240, `materialization_format =
  transform_paths_file_formats[-1]`), and `_EncodeAndWrite` then writes Parquet
  through pandas (lines 724-734). The Trainer reads its examples as the artifact's
  payload format says, which Transform never sets on `transformed_examples`, so
  the default, tf.Example (components/util/examples_utils.py, `get_payload_format`):
  it would try to read Parquet as TFRecords. `ParquetAnalysisExecutor` writes
  them as TFX writes them from tf.Examples (`labels.FORMAT_TFRECORD`, lines
  717-723: the transformed batches encoded as tf.Examples, gzipped TFRecords).
- **Columns are taken by position.** `ParquetTFXIO` hands on every column of the
  file in the file's order (tfx_bsl 1.16, tfxio/parquet_tfxio.py, lines 135-164,
  no `column_names` from `make_tfxio`), while tf.Transform's TensorAdapter finds
  each column at the index it has in the TFXIO's declared schema, the schema's
  features in the schema's order (tfxio/tensor_adapter.py, lines 240 and 301;
  parquet_tfxio.py, line 184). A file with a column the schema lacks, or in
  another order, would feed one feature's values to another.
  `SchemaOrderedParquetTFXIO` reads only the schema's columns and hands them on
  in its order, and a column of another type than the schema's fails with the
  column named.

Both go when TFX's Transform materializes in a format of its own choosing and
ParquetTFXIO selects its declared columns (neither is so in tfx 1.16 / tfx-bsl 1.16).

Port register: docs/ports.md
"""

from __future__ import annotations

import inspect
from typing import Any

import apache_beam as beam
import pyarrow as pa
from tfx.components.transform import executor as transform_executor
from tfx.components.transform import labels
from tfx.proto import example_gen_pb2
from tfx_bsl.tfxio import parquet_tfxio

# tf.Transform's telemetry namespace for this step, as TFX's executor names it.
_TELEMETRY_DESCRIPTORS = ["Transform"]


class ParquetColumnError(ValueError):
    """A Parquet column's type is not the one the schema gives its feature."""


def schema_columns(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch`'s columns in `schema`'s order, each checked against its declared type."""
    columns = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            raise ParquetColumnError(
                f"the Parquet examples have no column {field.name!r}, a feature of the "
                "schema; rerun ExampleGen on data that holds it, or drop it from the schema."
            )
        column = batch.column(index)
        if not column.type.equals(field.type):
            raise ParquetColumnError(
                f"Parquet column {field.name!r} is {column.type}, but the schema makes it "
                f"{field.type}; fix the feature's type in the schema or the data's column."
            )
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class SchemaOrderedParquetTFXIO(parquet_tfxio.ParquetTFXIO):
    """ParquetTFXIO reading only the schema's columns, handed on in the schema's order."""

    def __init__(self, file_pattern: Any, *, schema: Any, telemetry_descriptors: list[str]):
        super().__init__(
            file_pattern,
            column_names=[feature.name for feature in schema.feature],
            schema=schema,
            telemetry_descriptors=telemetry_descriptors,
        )

    def BeamSource(self, batch_size: int | None = None) -> beam.PTransform:
        declared = self.ArrowSchema()
        read = super().BeamSource(batch_size)

        @beam.ptransform_fn
        def _read(pcoll_or_pipeline):
            return (
                pcoll_or_pipeline
                | "ReadParquet" >> read
                | "SchemaColumns" >> beam.Map(schema_columns, declared)
            )

        return _read()


class ParquetTransformProcessor(transform_executor.TransformProcessor):
    """TFX's TransformProcessor, over Parquet as the module docstring says."""

    def _CreateTFXIO(self, dataset: Any, schema: Any) -> Any:
        if dataset.data_format == example_gen_pb2.FORMAT_PARQUET:
            return SchemaOrderedParquetTFXIO(
                file_pattern=dataset.file_pattern,
                schema=schema,
                telemetry_descriptors=_TELEMETRY_DESCRIPTORS,
            )
        return super()._CreateTFXIO(dataset, schema)

    def _RunBeamImpl(self, *args: Any, **kwargs: Any) -> Any:
        # TFX passes materialization_format by position (tfx 1.16, components/transform/
        # executor.py, lines 1241-1247); bound by name, whatever the position.
        run = super()._RunBeamImpl
        bound = inspect.signature(run).bind(*args, **kwargs)
        if bound.arguments.get("materialization_format") is not None:
            bound.arguments["materialization_format"] = labels.FORMAT_TFRECORD
        return run(*bound.args, **bound.kwargs)


class ParquetAnalysisExecutor(transform_executor.Executor):
    """TFX's Transform executor with `ParquetTransformProcessor`.

    TFX's `Executor.Do` builds its processor by the module's name for it (tfx 1.16,
    components/transform/executor.py, line 641: `TransformProcessor().Transform(...)`),
    with no hook to hand it another; so for the call, that name is ours. Everything
    else `Do` does (splits, paths, the user's module, statistics) stays TFX's.
    """

    def Do(self, input_dict: Any, output_dict: Any, exec_properties: Any) -> None:
        stock = transform_executor.TransformProcessor
        transform_executor.TransformProcessor = ParquetTransformProcessor
        try:
            super().Do(input_dict, output_dict, exec_properties)
        finally:
            transform_executor.TransformProcessor = stock
