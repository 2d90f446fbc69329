"""Batch scoring: the served model over ExampleGen's examples, keyed, into one partition.

Beam's RunInference with a model handler of our own. Beam's TensorFlow
handlers load with `tf.keras.models.load_model`, which cannot open a plain
SavedModel under Keras 3 (apache/beam#30616); TFX's BulkInferrer loads with
TF1's `saved_model.loader` and fails on Keras 3 models (tensorflow/tfx#7782).
`ServedModelHandler` loads the export with `tf.saved_model.load` and calls
`serving_default`, the signature TF Serving and KServe answer with, on
batches of the serialized tf.Examples ExampleGen wrote: the scores are the
served model's by construction. Each file is read in batches of one fixed
size (the file's last batch fewer), so no batch grows with the data
(tensorflow/tfx#5777), and Beam handles a batch at a time, not each row.

A batch that the signature refuses (a row missing a value the schema
requires, say) is scored again row by row; the rows that still fail go to the
partition's errors file with their keys and the reason. Key columns are read
from the same examples, and are never model inputs (`check_keys`).

`score_partition` is the whole step without TFX: read, score, write under
`_temporary/`, check the keys and the error share, commit
(components/scoring/output.py). `BatchScorer` is it as a TFX component.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.ml.inference.base import ModelHandler, PredictionResult, RunInference
from tfx.dsl.io import fileio

from components.scoring.output import (
    ERRORS_FILE,
    PART_PREFIX,
    Manifest,
    ScoredOutputError,
    check_duplicate_keys,
    check_error_share,
    commit,
    partition_dir,
    read_manifest,
    remove_attempts,
    temporary_dir,
)
from components.scoring.settings import (
    CLASS_COLUMN,
    MODEL_VERSION_COLUMN,
    PREDICTION_COLUMN,
    REASON_COLUMN,
    ScoringInputError,
    ScoringSettings,
)
from components.serving.served_version import ServedVersion
from contract.dataset.spec import DatasetSpec
from trainer.export import SERVING_SIGNATURE
from trainer.model_support import output_name


def prediction_columns(spec: DatasetSpec) -> tuple[str, ...]:
    """The columns a prediction fills: each class's probability and the class, or the value."""
    if spec.task == "regression":
        return (PREDICTION_COLUMN,)
    return (*(f"probability_{c}" for c in spec.label.classes), CLASS_COLUMN)


def check_keys(keys: Sequence[str], spec: DatasetSpec) -> None:
    """ScoringInputError for a key the model reads, or one named like an output column."""
    features = [k for k in keys if k in spec.features]
    if features:
        raise ScoringInputError(
            f"keys: {features} are features of the served model; a key column is never a "
            "model input: name id columns the model does not read"
        )
    taken = sorted(set(keys) & {*prediction_columns(spec), MODEL_VERSION_COLUMN, REASON_COLUMN})
    if taken:
        raise ScoringInputError(f"keys: {taken} are the names of output columns; rename them")


def key_types(example: bytes, keys: Sequence[str]) -> dict[str, str]:
    """Each key's type ("int" or "string") as ExampleGen encoded the column, from one example."""
    import tensorflow as tf

    features = tf.train.Example.FromString(example).features.feature
    types = {}
    for key in keys:
        if key not in features:
            raise ScoringInputError(
                f"keys: the data has no column {key!r}; pass --key with an id column of the data"
            )
        kind = features[key].WhichOneof("kind")
        if kind == "float_list":
            raise ScoringInputError(
                f"keys: column {key!r} holds floats; keys are strings or integers"
            )
        types[key] = "int" if kind == "int64_list" else "string"
    return types


@dataclass(frozen=True)
class ScoreFailure:
    """A row that could not be scored, and why."""

    reason: str


def _first_line(err: Exception) -> str:
    text = getattr(err, "message", None) or str(err)
    return text.strip().splitlines()[0] if text.strip() else type(err).__name__


def parse_keys(
    examples: Sequence[bytes], types: Mapping[str, str]
) -> tuple[dict[str, list[Any]], dict[int, str]]:
    """(each key's value per row, row index -> why the row has no key) for a batch.

    A row without exactly one value for a key fails; its entry in the columns
    is a placeholder that the caller drops with the row.
    """
    import tensorflow as tf

    spec = {k: tf.io.VarLenFeature(tf.int64 if t == "int" else tf.string) for k, t in types.items()}
    try:
        parsed = tf.io.parse_example(tf.constant(examples, tf.string), spec)
    except tf.errors.InvalidArgumentError:
        if len(examples) == 1:
            return {k: [None] for k in types}, {0: f"keys {', '.join(types)}: of another type"}
        columns: dict[str, list[Any]] = {k: [] for k in types}
        failures: dict[int, str] = {}
        for i, example in enumerate(examples):
            one, failed = parse_keys([example], types)
            for key in types:
                columns[key] += one[key]
            if failed:
                failures[i] = failed[0]
        return columns, failures
    columns = {}
    failures = {}
    for key, sparse in parsed.items():
        rows = sparse.indices.numpy()[:, 0]
        counts = np.bincount(rows, minlength=len(examples))
        first = np.zeros(len(examples), np.int64)
        first[rows[::-1]] = np.arange(len(rows))[::-1]
        values = sparse.values.numpy()
        picked = values[first] if len(values) else np.zeros(len(examples), values.dtype)
        if types[key] == "string":
            columns[key] = [v.decode("utf-8", "replace") for v in picked]
        else:
            columns[key] = picked.tolist()
        for i in np.flatnonzero(counts != 1):
            failures.setdefault(int(i), f"key {key!r} has {counts[i]} values, not one")
    return columns, failures


def call_signature(
    signature, examples: Sequence[bytes], output_key: str
) -> tuple[np.ndarray | None, dict[int, str]]:
    """(the signature's outputs for the batch, row index -> why the model refused the row).

    One call for the batch; when the batch is refused, one call per row, so
    that one bad row costs only itself. Refused rows' outputs are NaN.
    """
    import tensorflow as tf

    try:
        outputs = signature(examples=tf.constant(examples, tf.string))[output_key].numpy()
        return outputs.reshape(len(examples), -1), {}
    except (tf.errors.InvalidArgumentError, ValueError) as err:
        if len(examples) == 1:
            return None, {0: f"the model refused the row: {_first_line(err)}"}
    rows: list[np.ndarray | None] = []
    failures: dict[int, str] = {}
    for i, example in enumerate(examples):
        output, failed = call_signature(signature, [example], output_key)
        rows.append(None if output is None else output[0])
        if failed:
            failures[i] = failed[0]
    width = next((len(r) for r in rows if r is not None), 1)
    nan = np.full(width, np.nan, np.float32)
    return np.stack([nan if r is None else r for r in rows]), failures


@dataclass(frozen=True)
class ScoredBatch:
    """A batch's scores (an Arrow table: keys, predictions, version) and its failed rows
    (keys, reason)."""

    table: Any
    errors: tuple[tuple[Any, ...], ...]


def prediction_arrays(spec: DatasetSpec, outputs: np.ndarray) -> dict[str, Any]:
    """The prediction columns of a batch, from the signature's outputs.

    Binary: the signature gives the positive class's probability; the
    negative class's is its complement.
    """
    outputs = np.asarray(outputs, np.float32)
    if spec.task == "regression":
        return {PREDICTION_COLUMN: outputs[:, 0]}
    classes = spec.label.classes
    probabilities = (
        np.stack([1 - outputs[:, 0], outputs[:, 0]], axis=1) if spec.task == "binary" else outputs
    )
    values: dict[str, Any] = {
        f"probability_{c}": probabilities[:, i] for i, c in enumerate(classes)
    }
    values[CLASS_COLUMN] = np.asarray(classes, dtype=object)[np.argmax(probabilities, axis=1)]
    return values


def score_batch(
    signature,
    examples: Sequence[bytes],
    spec: DatasetSpec,
    types: Mapping[str, str],
    version: str,
) -> ScoredBatch:
    """One batch scored: the rows that scored as a table, the others with their reasons."""
    import pyarrow as pa

    keys, key_failures = parse_keys(examples, types)
    outputs, model_failures = call_signature(signature, examples, output_name(spec.label))
    failures = {**model_failures, **key_failures}
    scored = np.ones(len(examples), bool)
    scored[list(failures)] = False
    columns = {k: np.asarray(v, dtype=object)[scored].tolist() for k, v in keys.items()}
    if outputs is None:
        outputs = np.zeros((len(examples), 1), np.float32)
    predictions = prediction_arrays(spec, outputs[scored])
    table = pa.Table.from_pydict(
        {**columns, **predictions, MODEL_VERSION_COLUMN: [version] * int(scored.sum())},
        schema=output_schema(spec, types),
    )
    errors = tuple(
        (*("" if i in key_failures else keys[k][i] for k in types), failures[i])
        for i in sorted(failures)
    )
    return ScoredBatch(table, errors)


class ServedModelHandler(ModelHandler[Sequence[bytes], PredictionResult, Any]):
    """RunInference's handler for a served version: `tf.saved_model.load`, `serving_default`.

    Each element is a batch of serialized examples (`read_batches`, one fixed
    size); its result's `inference` is the ScoredBatch, and `model_id` the
    served version.
    """

    def __init__(self, model_dir: str, version: str, spec: DatasetSpec, types: Mapping[str, str]):
        super().__init__()
        self._model_dir = model_dir
        self._version = version
        self._spec = spec
        self._types = dict(types)

    def load_model(self) -> Any:
        import tensorflow as tf

        return tf.saved_model.load(self._model_dir)

    def run_inference(
        self, batch: Sequence[Sequence[bytes]], model: Any, inference_args: Any = None
    ) -> Iterable[PredictionResult]:
        del inference_args
        signature = model.signatures[SERVING_SIGNATURE]
        return [
            PredictionResult(
                len(examples),
                score_batch(signature, examples, self._spec, self._types, self._version),
                self._version,
            )
            for examples in batch
        ]

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        # Each element is already a batch of rows: one per call.
        return {"min_batch_size": 1, "max_batch_size": 1}

    def get_metrics_namespace(self) -> str:
        return "BatchScorer"


def output_schema(spec: DatasetSpec, types: Mapping[str, str]):
    """The Parquet schema of a partition: keys, prediction columns, model version."""
    import pyarrow as pa

    fields = [(k, pa.int64() if t == "int" else pa.string()) for k, t in types.items()]
    fields += [
        (c, pa.string() if c == CLASS_COLUMN else pa.float32()) for c in prediction_columns(spec)
    ]
    return pa.schema([*fields, (MODEL_VERSION_COLUMN, pa.string())])


def csv_line(values: Sequence[Any]) -> str:
    """One CSV row without its line end; a value holding a line break is quoted.

    The writer quotes the characters of its line terminator (on Python 3.10
    only those), so it writes with CRLF, which is then taken off: a key
    holding a newline stays one field of one row.
    """
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(values)
    return out.getvalue()[:-2]


def csv_lines(table) -> list[str]:
    """A table's rows as CSV lines; a float32 in its shortest text that reads back equal."""
    columns = [table.column(n).to_pylist() for n in table.column_names]
    return [csv_line(row) for row in zip(*columns, strict=True)]


def read_batches(path: str, batch_size: int) -> Iterator[Any]:
    """A gzipped TFRecord file's records, `batch_size` at a time (the file's last batch fewer)."""
    import tensorflow as tf

    for batch in tf.data.TFRecordDataset(path, compression_type="GZIP").batch(batch_size):
        yield batch.numpy()


def write_scores(
    pipeline: beam.Pipeline,
    files: Sequence[str],
    directory: str,
    model: ServedVersion,
    types: Mapping[str, str],
    settings: ScoringSettings,
) -> None:
    """The Beam pipeline: examples in, scores and errors written under `directory`."""
    spec = model.spec
    schema = output_schema(spec, types)
    scored = (
        pipeline
        | "ExampleFiles" >> beam.Create(sorted(files))
        # A file at a time, read in batches: Beam handles a batch, not each row.
        | "ReadBatches" >> beam.FlatMap(read_batches, settings.batch_size)
        | "Score" >> RunInference(ServedModelHandler(model.path, model.version, spec, types))
        | "ScoredBatches" >> beam.Map(lambda result: result.inference)
    )
    prefix = os.path.join(directory, PART_PREFIX)
    if settings.output_format == "parquet":
        _ = (
            scored
            | "Tables" >> beam.Map(lambda batch: batch.table)
            | "WriteParquet"
            >> beam.io.WriteToParquetBatched(prefix, schema, file_name_suffix=".parquet")
        )
    else:
        _ = (
            scored
            | "CsvLines" >> beam.FlatMap(lambda batch: csv_lines(batch.table))
            | "WriteCsv" >> beam.io.WriteToText(prefix, ".csv", header=csv_line(schema.names))
        )
    _ = (
        scored
        | "Errors" >> beam.FlatMap(lambda batch: batch.errors)
        | "ErrorLines" >> beam.Map(csv_line)
        | "WriteErrors"
        >> beam.io.WriteToText(
            os.path.join(directory, ERRORS_FILE),
            shard_name_template="",
            header=csv_line([*settings.keys, REASON_COLUMN]),
        )
    )


def read_written_keys(
    directory: str, keys: Sequence[str], types: Mapping[str, str], output_format: str
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(the part files, every scored row's keys) of a written partition, read back."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    parts = sorted(
        os.path.basename(p)
        for p in fileio.glob(os.path.join(directory, f"{PART_PREFIX}*.{output_format}"))
    )
    tables = []
    for name in parts:
        with fileio.open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        if output_format == "parquet":
            tables.append(pq.read_table(pa.BufferReader(data), columns=list(keys)))
        else:
            tables.append(
                pa_csv.read_csv(
                    pa.BufferReader(data),
                    convert_options=pa_csv.ConvertOptions(
                        include_columns=list(keys),
                        column_types={
                            k: pa.int64() if types[k] == "int" else pa.string() for k in keys
                        },
                    ),
                )
            )
    rows: list[tuple[Any, ...]] = []
    for table in tables:
        rows += zip(*(table.column(k).to_pylist() for k in keys), strict=True)
    return parts, rows


def read_error_reasons(directory: str, keys: Sequence[str]) -> dict[str, int]:
    """Reason -> rows, from the partition's errors file."""
    reasons: dict[str, int] = {}
    with fileio.open(os.path.join(directory, ERRORS_FILE), "r") as f:
        for row in list(csv.reader(io.StringIO(f.read())))[1:]:
            reasons[row[len(keys)]] = reasons.get(row[len(keys)], 0) + 1
    return reasons


def first_example(files: Sequence[str]) -> bytes:
    """The first record of the first non-empty examples file."""
    import tensorflow as tf

    for path in sorted(files):
        for record in tf.data.TFRecordDataset(path, compression_type="GZIP").take(1):
            return record.numpy()
    raise ScoringInputError("the input has no rows to score")


@dataclass(frozen=True)
class ScoringResult:
    """What a scoring run did: `written`, `replaced` or `unchanged` (already scored)."""

    status: str
    partition: str
    manifest: Manifest


def score_partition(
    *,
    example_files: Sequence[str],
    span: int,
    input_fingerprint: str,
    output_dir: str,
    model: ServedVersion,
    settings: ScoringSettings,
    new_pipeline: Callable[[], beam.Pipeline],
) -> ScoringResult:
    """Scores `example_files` with `model` into OUTPUT_DIR/span=S/version=V, exactly once.

    `new_pipeline` makes the Beam pipeline (TFX hands its own, configured
    with the run's Beam arguments). Raises ScoringInputError or
    ScoredOutputError (nothing committed) when the keys do not fit, keys repeat
    or too many rows fail.
    """
    check_keys(settings.keys, model.spec)
    types = key_types(first_example(example_files), settings.keys)
    digest = model.digest()
    partition = partition_dir(output_dir, span, model.version)
    existing = read_manifest(partition)
    wanted = Manifest(
        span=span,
        model_version=model.version,
        model_digest=digest,
        input_fingerprint=input_fingerprint,
        rows=0,
        errors=0,
        keys=settings.keys,
        format=settings.output_format,
        files=(),
    )
    if existing is not None and existing.same_scores(wanted):
        remove_attempts(output_dir, span, model.version)
        return ScoringResult("unchanged", partition, existing)
    temporary = temporary_dir(output_dir, span, model.version)
    with new_pipeline() as pipeline:
        write_scores(pipeline, example_files, temporary, model, types, settings)
    parts, key_rows = read_written_keys(temporary, settings.keys, types, settings.output_format)
    reasons = read_error_reasons(temporary, settings.keys)
    errors = sum(reasons.values())
    try:
        check_error_share(errors, len(key_rows), settings.max_error_share, reasons)
        if not settings.allow_duplicate_keys:
            check_duplicate_keys(settings.keys, key_rows)
    except ScoredOutputError as err:
        err.attempt = temporary
        raise
    manifest = Manifest(
        **{
            **asdict(wanted),
            "rows": len(key_rows),
            "errors": errors,
            "files": (*parts, ERRORS_FILE),
        }
    )
    replacing = fileio.exists(partition)
    commit(temporary, partition, manifest)
    remove_attempts(output_dir, span, model.version)
    return ScoringResult("replaced" if replacing else "written", partition, manifest)
