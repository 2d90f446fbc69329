"""ExampleGen's second output: each split as Parquet, in the columns TFX reads tf.Examples as.

StatisticsGen and Transform's analysis read a split through TFXIO as Arrow record
batches. From tf.Examples that is a gzip inflate and a decode per example
(tfx_bsl's `ExamplesToRecordBatchDecoder`); from Parquet, TFX's `ParquetTFXIO`
(tfx_bsl 1.16, tfxio/parquet_tfxio.py, lines 135-164) hands on each row group's
columns as they are stored, with no cast and no decode. So the Parquet holds the
columns exactly as the decoder would have produced them from the same examples,
and TFDV's statistics and tf.Transform's analyzers see the same arrays:

- every feature is a `large_list` of int64, float32 or large_binary, the types the
  decoder gives (and tfx_bsl's `csv_decoder._FEATURE_TYPE_TO_ARROW_TYPE`, lines
  64-69, which `ParquetTFXIO.ArrowSchema` declares from a schema, line 184). A
  primitive column would not do: TFDV takes a feature's type from its column
  and refuses anything but a (large) list or null (tensorflow_data_validation
  1.16, utils/stats_util.py, lines 98-103, `get_feature_type_from_arrow_type`:
  "Expected feature column to be a (Large)List<primitive|struct> or null"), and
  reads each row's value count from the list offsets;
- a missing value (a null cell, a file without the column) is an EMPTY list,
  not a null: components/example_gen/encoding.py writes it as a feature with its
  kind and no values, which the decoder reads back as `[]`; TFDV counts an
  empty list as present with zero values, a null as missing, so a null here
  would change num_missing and min_num_values;
- null elements inside a list are dropped, as the encoder drops them;
- a FLOAT value is rounded to float32 as the encoder rounds it (numpy's
  round-to-nearest), so the same float reaches both;
- an UNKNOWN column (empty throughout) is a `null` column: the decoder gives a
  feature that never has a kind that type.

tests/test_parquet_examples.py holds this against the decoder on the corner
cases, and against StatisticsGen and Transform on the taxi sample.

Port register: docs/ports.md
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from tfx_bsl.coders.csv_decoder import ColumnType

from components.example_gen.encoding import list_values

# A split's Parquet files, as TFX's own Parquet ExampleGen names them (tfx 1.16,
# components/example_gen/write_split.py, line 26 and line 78).
PARQUET_FILE_NAME = "data_parquet"
PARQUET_SUFFIX = ".parquet"

# The value type inside each feature's list, as tfx_bsl decodes a tf.Example.
_VALUE_TYPE = {
    ColumnType.INT: pa.int64(),
    ColumnType.FLOAT: pa.float32(),
    ColumnType.STRING: pa.large_binary(),
}


def feature_type(kind: ColumnType) -> pa.DataType:
    """The Arrow type a feature of this kind decodes to from tf.Examples."""
    if kind == ColumnType.UNKNOWN:
        return pa.null()
    return pa.large_list(_VALUE_TYPE[kind])


def feature_schema(kinds: dict[str, ColumnType]) -> pa.Schema:
    """Every column's field, in name order (the order the encoder writes features in)."""
    return pa.schema(
        [pa.field(name, feature_type(kinds[name])) for name in sorted(kinds, key=str.encode)]
    )


def _values(values: pa.Array, kind: ColumnType) -> pa.Array:
    """Non-null values as the list's value type (floats rounded as the encoder rounds)."""
    if kind == ColumnType.FLOAT:
        floats = values.to_numpy(zero_copy_only=False).astype("<f4")
        return pa.array(floats, pa.float32())
    if kind == ColumnType.STRING:
        return values.cast(pa.binary()).cast(pa.large_binary())
    return values.cast(pa.int64())


def _feature_list(column: pa.Array, kind: ColumnType) -> pa.LargeListArray:
    """Each row's values as a list; a null (cell, list or element) holds no value."""
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        counts, values = list_values(column)  # as the encoder reads them
    else:
        counts = column.is_valid().to_numpy(zero_copy_only=False).astype(np.int64)
        values = column.drop_null()
    offsets = np.zeros(len(column) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return pa.LargeListArray.from_arrays(pa.array(offsets), _values(values, kind))


def feature_columns(batch: pa.RecordBatch, kinds: dict[str, ColumnType]) -> pa.RecordBatch:
    """A batch of typed columns (components/example_gen/encoding.py's input) as the record
    batch tfx_bsl decodes the batch's tf.Examples to (module doc). A column of `kinds`
    the batch lacks holds an empty list in every row."""
    rows = batch.num_rows
    names = set(batch.schema.names)
    schema = feature_schema(kinds)
    arrays = []
    for field in schema:
        kind = kinds[field.name]
        if kind == ColumnType.UNKNOWN:
            arrays.append(pa.nulls(rows))
        elif field.name in names:
            arrays.append(_feature_list(batch.column(field.name), kind))
        else:
            empty = pa.array(np.zeros(rows + 1, dtype=np.int64))
            arrays.append(pa.LargeListArray.from_arrays(empty, pa.array([], _VALUE_TYPE[kind])))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
