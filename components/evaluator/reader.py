"""The Evaluator's read of the eval split: the raw records, and only the columns TFMA reads.

TFX's executor reads the split through tfx_bsl's `TFExampleRecord`: Beam's
TFRecord reader hands on one record at a time, `BatchElements` batches them,
and tfx_bsl decodes every feature of every example into Arrow (tfx 1.16,
components/evaluator/executor.py L236-255; tfx_bsl 1.16, tfxio/
tf_example_record.py L67-86, L353-385). With our extractors nothing reads
most of those features: the model and the Transform replay take the raw
records, and the prune (components/evaluator/extractors.py) keeps the slice
columns alone before anything else reads a feature. On 1.5M taxi rows the
decode was about 5 s and the record-at-a-time read about 3 s of a 17 s
Evaluator (docs/scale.md): tfx_bsl parses each `tf.Example` message in full,
about 11 µs an example, whatever the columns asked for.

So while our extractors run, the executor's reader (`ColumnsOnlyExampleRecord`)
decodes only the columns that TFMA's extractors look up by name before the
prune (`columns_read`): the slice columns, the label, weight and prediction
keys of the model specs, and the inputs of the signatures TFMA calls (it feeds
a signature from the features when they hold all its inputs, and the raw
records otherwise: tensorflow_model_analysis 0.47.1, utils/model_util.py
L621-651). Each such column is parsed with TensorFlow's `parse_example`, about
0.6 µs an example, and typed as tfx_bsl types it (`ColumnDecoder`). A batch's
columns are then those a full decode holds for those names, and every lookup
TFMA makes finds what it found before. What TFMA cannot tell apart is not
kept apart: a row without the feature is an empty list, where tfx_bsl puts a
null, and a column without a value in the batch is left out, where tfx_bsl
may keep it empty; TFMA reads no values from any of them
(`util.record_batch_to_tensor_values`, a VarLen value per row).

TensorFlow also reads the files, a batch at a time (`_ReadBatches`), where it
reads them as Beam's reader would (gzip or uncompressed; TFX writes gzip),
with tfx_bsl's byte-size batches and the record-batch telemetry (not the
per-record one). Other files go through Beam's reader and `BatchElements`,
decoded as above.

Where the columns cannot be known (a model spec without a signature name, a
TFMA preprocessing function, an EvalSavedModel, a SavedModel that cannot be
read), or the Evaluator has a schema or examples that are not `tf.Example`s,
TFX's reader runs unchanged.

Port register: docs/ports.md
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import tensorflow as tf
import tensorflow_model_analysis as tfma
from apache_beam.io.filesystem import CompressionTypes
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_model_analysis.extractors import transformed_features_extractor
from tensorflow_model_analysis.utils import model_util
from tfx.components.evaluator import executor as evaluator_executor
from tfx.dsl.io import fileio
from tfx_bsl.coders import batch_util, example_coder
from tfx_bsl.tfxio import record_based_tfxio, telemetry, tf_example_record

from components.evaluator import extractors as evaluation_extractors

_SAVED_MODEL_FILE = "saved_model.pb"
_KIND_DTYPES = {"bytes_list": tf.string, "int64_list": tf.int64, "float_list": tf.float32}


def _signature_inputs(model_dir: str, names: Iterable[str]) -> set[str] | None:
    """Input names of the signatures `names` (those absent skipped: TFMA skips an optional
    one and fails on a required one either way); None if the SavedModel cannot be read."""
    path = os.path.join(model_dir, _SAVED_MODEL_FILE)
    if not fileio.exists(path):
        return None
    with fileio.open(path, "rb") as f:
        saved_model = saved_model_pb2.SavedModel.FromString(f.read())
    inputs: set[str] = set()
    for meta_graph in saved_model.meta_graphs:
        for name in names:
            if name in meta_graph.signature_def:
                inputs.update(meta_graph.signature_def[name].inputs)
    return inputs


def columns_read(eval_config: tfma.EvalConfig, model_dirs: Sequence[str]) -> frozenset[str] | None:
    """The raw columns TFMA's extractors look up for `eval_config` on the models in
    `model_dirs` (before our prune); None where that cannot be known."""
    columns = set(evaluation_extractors.slice_columns(eval_config))
    signatures = set(transformed_features_extractor._DEFAULT_SIGNATURE_NAMES)
    for spec in eval_config.model_specs:
        if spec.model_type == tfma.TFMA_EVAL or not spec.signature_name:
            return None
        if any("@" in name for name in spec.preprocessing_function_names):
            return None
        signatures.add(spec.signature_name)
        signatures.update(spec.preprocessing_function_names)
        columns.update(
            key for key in (spec.label_key, spec.example_weight_key, spec.prediction_key) if key
        )
        for keys in (spec.label_keys, spec.example_weight_keys, spec.prediction_keys):
            columns.update(keys.values())
    for model_dir in model_dirs:
        inputs = _signature_inputs(model_dir, signatures)
        if inputs is None:
            return None
        columns.update(inputs)
        columns.update(
            name.removesuffix(model_util.KERAS_INPUT_SUFFIX)
            for name in inputs
            if name.endswith(model_util.KERAS_INPUT_SUFFIX)
        )
    return frozenset(columns)


ColumnType = tuple[str, pa.DataType]


@functools.cache
def _arrow_types() -> dict[str, pa.DataType]:
    """The Arrow type tfx_bsl's schema-less decoder gives each feature kind."""
    example = tf.train.Example()
    for kind in _KIND_DTYPES:
        getattr(example.features.feature[kind], kind).value.extend(
            [b"x"] if kind[0] == "b" else [1]
        )
    decoded = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(
        [example.SerializeToString()]
    )
    return {kind: decoded.schema.field(kind).type for kind in _KIND_DTYPES}


def _kind(records: Sequence[bytes], joined: bytes, column: str) -> str | None:
    """The column's feature kind in the first example that has it with values; None if no
    example of the batch does. `joined`: the records joined, where one search finds a
    name no example has."""
    key = column.encode()
    if key not in joined:  # a feature's name is in its example's bytes
        return None
    for record in records:
        if key in record:
            feature = tf.train.Example.FromString(record).features.feature.get(column)
            if feature is not None and feature.WhichOneof("kind"):
                return feature.WhichOneof("kind")
    return None


def _parse(serialized: tf.Tensor, types: Mapping[str, ColumnType]) -> dict[str, pa.Array]:
    """The columns of `types` that have values in the batch (module docstring)."""
    if not types:
        return {}
    spec = {
        c: tf.io.RaggedFeature(_KIND_DTYPES[kind], row_splits_dtype=tf.int64)
        for c, (kind, _) in types.items()
    }
    parsed = tf.io.parse_example(serialized, spec)
    arrays = {}
    for column, (_, arrow_type) in sorted(types.items()):
        ragged = parsed[column]
        if not ragged.values.shape[0]:
            continue
        values = pa.array(ragged.values.numpy(), type=arrow_type.value_type)
        offsets = pa.array(ragged.row_splits.numpy(), type=pa.int64())
        if pa.types.is_large_list(arrow_type):
            arrays[column] = pa.LargeListArray.from_arrays(offsets, values)
        else:
            arrays[column] = pa.ListArray.from_arrays(offsets.cast(pa.int32()), values)
    return arrays


class ColumnDecoder:
    """Decodes `columns` of serialized `tf.Example`s as tfx_bsl's decoder types them.

    A column is parsed with the kind it last had; one never seen with values is
    parsed as text, which gives no values and no error where no example has it
    (the usual case: names TFMA looks up in vain) and its values where it is text.
    A batch that gives a column another kind is parsed again with the kinds
    learnt from that batch's examples, as tfx_bsl learns them per batch.
    """

    def __init__(self, columns: Iterable[str]):
        self._columns = sorted(columns)
        self._types: dict[str, ColumnType] = {}

    def decode(
        self, records: Sequence[bytes], serialized: tf.Tensor | None = None
    ) -> dict[str, pa.Array]:
        """The columns of `records` (`serialized`: the same as a string tensor)."""
        serialized = tf.constant(list(records)) if serialized is None else serialized
        text = ("bytes_list", _arrow_types()["bytes_list"])
        guessed = {c: self._types.get(c, text) for c in self._columns}
        try:
            arrays = _parse(serialized, guessed)
        except tf.errors.InvalidArgumentError:
            joined = b"".join(records)
            kinds = {c: _kind(records, joined, c) for c in self._columns}
            self._types = {c: (k, _arrow_types()[k]) for c, k in kinds.items() if k}
            try:
                return _parse(serialized, self._types)
            except tf.errors.InvalidArgumentError as e:
                raise ValueError(
                    f"the eval split's examples give a feature of {sorted(self._types)} more "
                    f"than one type: {e.message}"
                ) from e
        self._types.update((c, guessed[c]) for c in arrays)
        return arrays


def _record_batch(
    decoder: ColumnDecoder,
    records: list[bytes],
    raw_record_column_name: str | None,
    serialized: tf.Tensor | None = None,
) -> pa.RecordBatch:
    arrays = decoder.decode(records, serialized)
    if raw_record_column_name is not None:
        arrays[raw_record_column_name] = record_based_tfxio.CreateRawRecordColumn(records)
    return pa.RecordBatch.from_arrays(list(arrays.values()), list(arrays))


class _DecodeColumns(beam.DoFn):
    def __init__(self, columns: frozenset[str], raw_record_column_name: str | None):
        self._columns = columns
        self._raw_record_column_name = raw_record_column_name

    def setup(self) -> None:
        self._decoder = ColumnDecoder(self._columns)

    def process(self, records: list[bytes]) -> Iterator[pa.RecordBatch]:
        yield _record_batch(self._decoder, records, self._raw_record_column_name)


def byte_size_runs(records: Sequence[bytes], max_bytes: int, min_record_bytes: int) -> list[int]:
    """Where `records` split into runs of at most `max_bytes` (a single bigger record
    alone), each record counted as at least `min_record_bytes`: tfx_bsl's byte-size
    batching (coders/batch_util.py L64-80). The bounds, from 0 to len(records)."""
    sizes = np.maximum(np.fromiter(map(len, records), np.int64, len(records)), min_record_bytes)
    bounds, total = [0], 0
    for i, size in enumerate(sizes.tolist()):
        if total + size > max_bytes and i > bounds[-1]:
            bounds.append(i)
            total = 0
        total += size
    return [*bounds, len(records)] if len(records) > bounds[-1] else bounds


def _plain_read() -> tf.data.Options:
    """tf.data without its default graph rewrites and autotuning: a read and a batch
    have nothing to tune, and the Evaluator measured slower with them (docs/scale.md)."""
    options = tf.data.Options()
    options.experimental_optimization.apply_default_optimizations = False
    options.autotune.enabled = False
    return options


class _ReadBatches(beam.DoFn):
    """A TFRecord file -> record batches of `columns` and the raw records.

    TensorFlow reads the file (its CRCs checked, as Beam's reader checks them) a
    batch of records at a time, and parses the columns from the same tensor; Beam
    never sees a single record. Batches are as large as tfx_bsl's `BatchElements`
    makes them when this is built: `batch_size` rows, byte-size batches where
    tfx_bsl's flag is on (components/evaluator/executor.py turns it on), else its cap.
    """

    def __init__(
        self,
        columns: frozenset[str],
        raw_record_column_name: str | None,
        batch_size: int | None,
    ):
        self._columns = columns
        self._raw_record_column_name = raw_record_column_name
        batching = batch_util.GetBatchElementsKwargs(batch_size)
        self._rows = batching["max_batch_size"]
        self._max_bytes: int | None = None
        if "element_size_fn" in batching:  # byte-size batches: rows up to the bytes / least
            self._max_bytes = batching["max_batch_size"]
            self._min_record_bytes = batching["element_size_fn"](b"")
            self._rows = self._max_bytes // self._min_record_bytes

    def setup(self) -> None:
        self._decoder = ColumnDecoder(self._columns)
        self._read_options = _plain_read()

    def process(self, path: str) -> Iterator[pa.RecordBatch]:
        compression = "GZIP" if _compression(path) == CompressionTypes.GZIP else ""
        dataset = (
            tf.data.TFRecordDataset(path, compression_type=compression)
            .batch(self._rows)
            .with_options(self._read_options)
        )
        for serialized in dataset:
            records = serialized.numpy().tolist()
            bounds = [0, len(records)]
            if self._max_bytes is not None:
                bounds = byte_size_runs(records, self._max_bytes, self._min_record_bytes)
            for start, end in itertools.pairwise(bounds):
                yield _record_batch(
                    self._decoder,
                    records[start:end],
                    self._raw_record_column_name,
                    serialized[start:end],
                )


def _compression(path: str) -> str:
    return CompressionTypes.detect_compression_type(path)


def _tensorflow_reads(files: Sequence[str]) -> bool:
    """Whether TensorFlow reads these files as Beam's TFRecord reader would (AUTO
    compression: by extension, beam io/filesystem.py L79-118): gzip or none."""
    return bool(files) and all(
        _compression(f) in (CompressionTypes.GZIP, CompressionTypes.UNCOMPRESSED) for f in files
    )


class ColumnsOnlyExampleRecord(tf_example_record.TFExampleRecord):
    """tfx_bsl's `TFExampleRecord` (no schema) that decodes `columns` alone.

    Where TensorFlow reads every file of the pattern (gzip or none), `BeamSource`
    reads each file in batches (`_ReadBatches`) instead of one record at a time
    through Beam's reader and `BatchElements`.
    """

    def __init__(self, file_pattern: Any, columns: frozenset[str], **kwargs: Any):
        super().__init__(file_pattern, **kwargs)
        self._columns = columns

    def _RawRecordToRecordBatchInternal(self, batch_size: int | None = None) -> beam.PTransform:
        # TFExampleRecord's own (tf_example_record.py L67-86), with our decoder.
        @beam.typehints.with_input_types(bytes)
        @beam.typehints.with_output_types(pa.RecordBatch)
        def ptransform_fn(raw_records: beam.PCollection) -> beam.PCollection:
            return (
                raw_records
                | "Batch" >> batch_util.BatchRecords(batch_size, self._telemetry_descriptors)
                | "DecodeColumns"
                >> beam.ParDo(_DecodeColumns(self._columns, self.raw_record_column_name))
            )

        return beam.ptransform_fn(ptransform_fn)()

    def BeamSource(self, batch_size: int | None = None) -> beam.PTransform:
        patterns = (
            [self._file_pattern]
            if isinstance(self._file_pattern, str)
            else list(self._file_pattern)
        )
        # Files only, as Beam's reader matches them.
        files = sorted(f for p in patterns for f in fileio.glob(p) if not fileio.isdir(f))
        if not _tensorflow_reads(files):
            return super().BeamSource(batch_size)

        @beam.typehints.with_input_types(Any)
        @beam.typehints.with_output_types(pa.RecordBatch)
        def ptransform_fn(pipeline: Any) -> beam.PCollection:
            return (
                pipeline
                | "Files" >> beam.Create(files)
                # Spreads the files over the workers, as Beam's reader splits them.
                | "SpreadFiles" >> beam.Reshuffle()
                | "ReadBatches"
                >> beam.ParDo(_ReadBatches(self._columns, self.raw_record_column_name, batch_size))
                | "CollectRecordBatchTelemetry"
                >> telemetry.ProfileRecordBatches(
                    self._telemetry_descriptors, self._logical_format, self._physical_format
                )
            )

        return beam.ptransform_fn(ptransform_fn)()


class _TfxioReadingColumns:
    """The `tfxio_utils` module as TFX's executor sees it: its factories make
    `ColumnsOnlyExampleRecord`s where they would make a schema-less `TFExampleRecord`."""

    def __init__(self, stock: Any, columns: frozenset[str]):
        self._stock = stock
        self._columns = columns

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stock, name)

    def get_tfxio_factory_from_artifact(self, *args: Any, **kwargs: Any) -> Any:
        factory = self._stock.get_tfxio_factory_from_artifact(*args, **kwargs)

        def make(file_pattern: Any) -> Any:
            tfxio = factory(file_pattern)
            schema = tfxio._GetSchemaForDecoding()
            if type(tfxio) is not tf_example_record.TFExampleRecord or schema is not None:
                return tfxio
            return ColumnsOnlyExampleRecord(
                file_pattern,
                self._columns,
                raw_record_column_name=tfxio.raw_record_column_name,
                telemetry_descriptors=tfxio.telemetry_descriptors,
            )

        return make


@contextlib.contextmanager
def columns_only_in_tfx(columns: frozenset[str] | None) -> Iterator[None]:
    """TFX's executor module reads only `columns` (and the raw records) while it runs;
    all of them where `columns` is None."""
    if columns is None:
        yield
        return
    stock = evaluator_executor.tfxio_utils
    evaluator_executor.tfxio_utils = _TfxioReadingColumns(stock, columns)
    try:
        yield
    finally:
        evaluator_executor.tfxio_utils = stock
