"""Batch scoring: the served model over ExampleGen's examples, keyed, into one partition.

Beam's RunInference with a model handler of our own. Beam's TensorFlow
handlers load with `tf.keras.models.load_model`, which cannot open a plain
SavedModel under Keras 3 (apache/beam#30616); TFX's BulkInferrer loads with
TF1's `saved_model.loader` and fails on Keras 3 models (tensorflow/tfx#7782).
`ServedModelHandler` loads the export with `tf.saved_model.load` and calls
`serving_default`, the signature TF Serving and KServe answer with, on
batches of the serialized tf.Examples ExampleGen wrote: the scores are the
served model's by construction. Batches have one fixed size (Beam's
BatchElements between equal bounds), so no batch grows with the data
(tensorflow/tfx#5777).

A batch that the signature refuses (a row missing a value the schema
requires, say) is scored again row by row; the rows that still fail go to the
partition's errors file with their keys and the reason. Key columns are read
from the same examples, and are never model inputs (`check_keys`).

`score_partition` is the whole step without TFX: read, score, write under
`_temporary/`, check the keys and the error share, commit
(components/scored_output.py). `BatchScorer` is it as a TFX component.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.ml.inference.base import ModelHandler, PredictionResult, RunInference
from tfx.dsl.io import fileio

from components.scored_output import (
    ERRORS_FILE,
    FORMATS,
    PART_PREFIX,
    Manifest,
    check_duplicate_keys,
    check_error_share,
    commit,
    partition_dir,
    read_manifest,
    temporary_dir,
)
from components.served_version import ServedVersion
from trainer.dataset_spec import DatasetSpec
from trainer.export import SERVING_SIGNATURE
from trainer.model import output_name

# Rows per call of the signature: every batch but a bundle's last has exactly this many.
DEFAULT_BATCH_SIZE = 1024
MODEL_VERSION_COLUMN = "model_version"
CLASS_COLUMN = "class"
PREDICTION_COLUMN = "prediction"
REASON_COLUMN = "reason"
KEY_TYPES = ("int", "string")


class ScoringInputError(ValueError):
    """The keys or settings do not fit the data or the model."""


@dataclass(frozen=True)
class ScoringSettings:
    """What a scoring run writes and tolerates; the same on both runners."""

    keys: tuple[str, ...]
    output_format: str = "parquet"
    max_error_share: float = 0.001
    allow_duplicate_keys: bool = False
    batch_size: int = DEFAULT_BATCH_SIZE

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", tuple(self.keys))
        if not self.keys:
            raise ScoringInputError(
                "keys: name at least one id column (--key COLUMN, or keys: in the dataset spec)"
            )
        twice = sorted({k for k in self.keys if self.keys.count(k) > 1})
        if twice:
            raise ScoringInputError(f"keys: {twice} named more than once")
        if self.output_format not in FORMATS:
            raise ScoringInputError(
                f"format: {self.output_format!r} is not one of {', '.join(FORMATS)}"
            )
        if not 0 <= self.max_error_share <= 1:
            raise ScoringInputError(
                f"max_error_share: {self.max_error_share} is not a share between 0 and 1"
            )
        if self.batch_size < 1:
            raise ScoringInputError(f"batch_size: {self.batch_size} is not a positive integer")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ScoringSettings:
        return cls(**json.loads(text))


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
) -> list[tuple[Any, ...] | ScoreFailure]:
    """Each example's key values, or why it has none (a key absent or repeated in the row)."""
    import tensorflow as tf

    spec = {k: tf.io.VarLenFeature(tf.int64 if t == "int" else tf.string) for k, t in types.items()}
    try:
        parsed = tf.io.parse_example(tf.constant(list(examples), tf.string), spec)
    except tf.errors.InvalidArgumentError:
        if len(examples) == 1:
            return [ScoreFailure(f"keys {', '.join(types)}: not of the key's type in this row")]
        return [k for e in examples for k in parse_keys([e], types)]
    columns = {}
    counts = {}
    for key, sparse in parsed.items():
        rows = sparse.indices.numpy()[:, 0]
        counts[key] = np.bincount(rows, minlength=len(examples))
        values = sparse.values.numpy()
        first = np.full(len(examples), -1)
        first[rows[::-1]] = np.arange(len(rows))[::-1]
        columns[key] = (values, first)
    out: list[tuple[Any, ...] | ScoreFailure] = []
    for i in range(len(examples)):
        bad = [k for k in types if counts[k][i] != 1]
        if bad:
            out.append(ScoreFailure(f"key {bad[0]!r} has {counts[bad[0]][i]} values, not one"))
            continue
        row = []
        for key, kind in types.items():
            value = columns[key][0][columns[key][1][i]]
            row.append(int(value) if kind == "int" else value.decode("utf-8", "replace"))
        out.append(tuple(row))
    return out


def call_signature(signature, examples: Sequence[bytes], output_key: str) -> list[Any]:
    """The signature's output row for each example; a ScoreFailure for rows it refuses.

    One call for the batch; when the batch is refused, one call per row, so
    that one bad row costs only itself.
    """
    import tensorflow as tf

    try:
        outputs = signature(examples=tf.constant(list(examples), tf.string))[output_key].numpy()
        return list(outputs)
    except (tf.errors.InvalidArgumentError, ValueError) as err:
        if len(examples) == 1:
            return [ScoreFailure(f"the model refused the row: {_first_line(err)}")]
    return [r for e in examples for r in call_signature(signature, [e], output_key)]


class ServedModelHandler(ModelHandler[bytes, PredictionResult, Any]):
    """RunInference's handler for a served version: `tf.saved_model.load`, `serving_default`.

    Each result's `example` is the row's keys (or a ScoreFailure), its
    `inference` the model's output row (or a ScoreFailure), and `model_id` the
    served version.
    """

    def __init__(
        self,
        model_dir: str,
        version: str,
        output_key: str,
        types: Mapping[str, str],
        batch_size: int,
    ):
        super().__init__()
        self._model_dir = model_dir
        self._version = version
        self._output_key = output_key
        self._types = dict(types)
        self._batch_size = batch_size

    def load_model(self) -> Any:
        import tensorflow as tf

        return tf.saved_model.load(self._model_dir)

    def run_inference(
        self, batch: Sequence[bytes], model: Any, inference_args: Any = None
    ) -> Iterable[PredictionResult]:
        del inference_args
        keys = parse_keys(batch, self._types)
        outputs = call_signature(model.signatures[SERVING_SIGNATURE], batch, self._output_key)
        return [
            PredictionResult(key, output, self._version)
            for key, output in zip(keys, outputs, strict=True)
        ]

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        # Equal bounds: BatchElements never grows a batch past the first size.
        return {"min_batch_size": self._batch_size, "max_batch_size": self._batch_size}

    def get_metrics_namespace(self) -> str:
        return "BatchScorer"


def prediction_values(spec: DatasetSpec, output: np.ndarray) -> dict[str, Any]:
    """One row's prediction columns from the signature's output row.

    Binary: the signature gives the positive class's probability; the
    negative class's is its complement.
    """
    output = np.asarray(output, np.float32).reshape(-1)
    if spec.task == "regression":
        return {PREDICTION_COLUMN: float(output[0])}
    classes = spec.label.classes
    probabilities = (
        np.array([1 - output[0], output[0]], np.float32) if spec.task == "binary" else output
    )
    values: dict[str, Any] = {
        f"probability_{c}": float(p) for c, p in zip(classes, probabilities, strict=True)
    }
    values[CLASS_COLUMN] = classes[int(np.argmax(probabilities))]
    return values


class _SplitResults(beam.DoFn):
    """Scored rows to the main output, failures (keys and reason) to `errors`."""

    def __init__(self, spec: DatasetSpec, keys: Sequence[str]):
        self._spec = spec
        self._keys = tuple(keys)

    def process(self, result: PredictionResult):
        keys, output = result.example, result.inference
        failure = keys if isinstance(keys, ScoreFailure) else output
        if isinstance(failure, ScoreFailure):
            key_values = ("",) * len(self._keys) if isinstance(keys, ScoreFailure) else keys
            yield beam.pvalue.TaggedOutput("errors", (*key_values, failure.reason))
            return
        row = dict(zip(self._keys, keys, strict=True))
        row.update(prediction_values(self._spec, output))
        row[MODEL_VERSION_COLUMN] = result.model_id
        yield row


def output_schema(spec: DatasetSpec, types: Mapping[str, str]):
    """The Parquet schema of a partition: keys, prediction columns, model version."""
    import pyarrow as pa

    fields = [(k, pa.int64() if t == "int" else pa.string()) for k, t in types.items()]
    fields += [
        (c, pa.string() if c == CLASS_COLUMN else pa.float32()) for c in prediction_columns(spec)
    ]
    return pa.schema([*fields, (MODEL_VERSION_COLUMN, pa.string())])


def csv_line(values: Sequence[Any]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(values)
    return out.getvalue()


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
    handler = ServedModelHandler(
        model.path, model.version, output_name(spec.label), types, settings.batch_size
    )
    results = (
        pipeline
        | "ExampleFiles" >> beam.Create(sorted(files))
        | "ReadExamples" >> beam.io.ReadAllFromTFRecord()
        | "Score" >> RunInference(handler)
        | "SplitResults"
        >> beam.ParDo(_SplitResults(spec, settings.keys)).with_outputs("errors", main="rows")
    )
    prefix = os.path.join(directory, PART_PREFIX)
    if settings.output_format == "parquet":
        _ = results.rows | "WriteParquet" >> beam.io.WriteToParquet(
            prefix, output_schema(spec, types), file_name_suffix=".parquet"
        )
    else:
        columns = list(output_schema(spec, types).names)
        _ = (
            results.rows
            | "CsvLines" >> beam.Map(lambda row: csv_line([row[c] for c in columns]))
            | "WriteCsv" >> beam.io.WriteToText(prefix, ".csv", header=csv_line(columns))
        )
    _ = (
        results.errors
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
        return ScoringResult("unchanged", partition, existing)
    temporary = temporary_dir(output_dir)
    with new_pipeline() as pipeline:
        write_scores(pipeline, example_files, temporary, model, types, settings)
    parts, key_rows = read_written_keys(temporary, settings.keys, types, settings.output_format)
    reasons = read_error_reasons(temporary, settings.keys)
    errors = sum(reasons.values())
    check_error_share(errors, len(key_rows), settings.max_error_share, reasons)
    if not settings.allow_duplicate_keys:
        check_duplicate_keys(settings.keys, key_rows)
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
    return ScoringResult("replaced" if replacing else "written", partition, manifest)
