"""The Evaluator's read of the eval split: only the columns TFMA reads, as tfx_bsl decodes them.

Each decoding case runs tfx_bsl's own decoder (what TFX's executor reads with)
and ours on the same serialized examples and compares column by column. The
whole Evaluator, read this way, is compared with TFX's own executor in
tests/test_evaluation_extractors.py and, per task, tests/test_bring_your_own_data.py.
"""

from __future__ import annotations

import bz2
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from tfx.components.evaluator import executor as stock_evaluator
from tfx_bsl.coders import example_coder
from tfx_bsl.tfxio import tf_example_record

from components.evaluator import reader as evaluation_reader
from components.evaluator.reader import (
    ColumnDecoder,
    ColumnsOnlyExampleRecord,
    byte_size_runs,
    columns_only_in_tfx,
    columns_read,
)

RAW = "__raw_record__"


def example(**features) -> bytes:
    message = tf.train.Example()
    for name, value in features.items():
        feature = message.features.feature[name]
        if value is None:
            continue  # present, with no kind: tfx_bsl's null
        if isinstance(value, list) and value and isinstance(value[0], bytes):
            feature.bytes_list.value.extend(value)
        elif isinstance(value, list) and value and isinstance(value[0], float):
            feature.float_list.value.extend(value)
        elif isinstance(value, list) and value:
            feature.int64_list.value.extend(value)
        else:
            raise ValueError(value)
    return message.SerializeToString()


# A row without `hour`, one with `hour` present but of no kind, text values that
# name other columns, several values in a row.
RECORDS = [
    example(kind=[b"Cash"], hour=[7], fare=[1.5], note=[b"hour fare"]),
    example(kind=[b"Card"], fare=[2.5, 3.5]),
    example(kind=[b"Cash", b"Card"], hour=None, fare=[0.25]),
    example(hour=[23, 1], note=[b"kind"]),
]


def assert_decoded_as_tfx_bsl(records: list[bytes], columns: list[str]) -> dict[str, pa.Array]:
    ours = ColumnDecoder(columns).decode(records)
    theirs = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(records)
    wanted = [c for c in columns if c in theirs.schema.names]
    # tfx_bsl's column of no values (here: none of any kind) is null-typed; TFMA drops it.
    with_values = [c for c in wanted if not pa.types.is_null(theirs.column(c).type)]
    assert sorted(ours) == sorted(with_values)
    for column in with_values:
        expected = theirs.column(column)
        assert ours[column].type == expected.type, column
        # A row without the feature: null there, empty here; TFMA reads no values from either.
        assert [v or [] for v in expected.to_pylist()] == ours[column].to_pylist(), column
    return ours


def test_columns_decode_as_tfx_bsl_decodes_them():
    ours = assert_decoded_as_tfx_bsl(RECORDS, ["kind", "hour", "fare", "note"])
    assert ours["hour"].to_pylist() == [[7], [], [], [23, 1]]


def test_only_the_columns_asked_for_are_decoded():
    assert sorted(ColumnDecoder(["fare", "kind"]).decode(RECORDS)) == ["fare", "kind"]


def test_a_name_no_example_has_is_no_column_even_where_a_value_spells_it():
    assert_decoded_as_tfx_bsl(RECORDS, ["examples", "hour fare"])
    assert ColumnDecoder(["examples", "hour fare"]).decode(RECORDS) == {}


def test_a_column_without_values_in_a_batch_is_left_out():
    records = [example(kind=[b"Cash"], hour=None), example(kind=[b"Card"])]
    assert_decoded_as_tfx_bsl(records, ["kind", "hour"])
    assert list(ColumnDecoder(["kind", "hour"]).decode(records)) == ["kind"]


def test_a_type_learnt_in_one_batch_is_learnt_again_where_a_batch_has_another():
    decoder = ColumnDecoder(["hour"])
    first, second = [example(hour=[7])], [example(hour=[7.5])]
    assert decoder.decode(first)["hour"].type == pa.large_list(pa.int64())
    assert decoder.decode(second)["hour"].to_pylist() == [[7.5]]
    assert_decoded_as_tfx_bsl(second, ["hour"])


def test_a_batch_whose_examples_disagree_on_a_type_is_refused_by_name():
    records = [example(hour=[7]), example(hour=[b"seven"])]
    with pytest.raises(ValueError, match=r"feature of \['hour'\] more than one type"):
        ColumnDecoder(["hour"]).decode(records)


def test_batches_hold_at_most_20_mib_each_record_counted_as_at_least_2560_bytes():
    max_bytes, least = 20 * 1024 * 1024, 2560
    assert byte_size_runs([b"x"] * 8192, max_bytes, least) == [0, 8192]
    assert byte_size_runs([b"x"] * 8193, max_bytes, least) == [0, 8192, 8193]
    big = b"x" * (8 * 1024 * 1024)
    assert byte_size_runs([big, big, big, b"x"], max_bytes, least) == [0, 2, 4]
    assert byte_size_runs([b"x" * (max_bytes + 1), b"x"], max_bytes, least) == [0, 1, 2]
    assert byte_size_runs([], max_bytes, least) == [0]


def test_the_reader_batches_as_tfx_bsl_s_batching_is_set_when_the_pipeline_is_built():
    from components.evaluator.executor import byte_size_batches

    with byte_size_batches():  # as the Evaluator builds its pipeline
        inside = evaluation_reader._ReadBatches(frozenset(), RAW, None)
    assert (inside._rows, inside._max_bytes) == (8192, 20 * 1024 * 1024)
    assert inside._min_record_bytes == 2560
    outside = evaluation_reader._ReadBatches(frozenset(), RAW, None)
    assert (outside._rows, outside._max_bytes) == (1000, None)  # Beam's tuning cap
    assert evaluation_reader._ReadBatches(frozenset(), RAW, 64)._rows == 64


# --- Which columns TFMA reads ------------------------------------------------------------


class _Model(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
        return {"probabilities": tf.zeros([tf.shape(examples)[0], 1])}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform(self, examples):
        return {"label_xf": tf.zeros([tf.shape(examples)[0]], tf.int64)}

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.string, name="kind"),
            tf.TensorSpec([None], tf.float32, name="fare"),
        ]
    )
    def serve_json(self, kind, fare):
        return {"probabilities": tf.zeros([tf.shape(kind)[0], 1])}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="trip_miles_input")])
    def keras_like(self, trip_miles_input):
        return {"probabilities": tf.reshape(trip_miles_input, [-1, 1])}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    model = _Model()
    path = str(tmp_path_factory.mktemp("signatures") / "model")
    signatures = {
        "serving_default": model.serve,
        "transform_features": model.transform,
        "serving_json": model.serve_json,
        "keras_like": model.keras_like,
    }
    tf.saved_model.save(model, path, signatures=signatures)
    return path


def reader_config(**model_spec) -> tfma.EvalConfig:
    spec = {
        "signature_name": "serving_default",
        "preprocessing_function_names": ["transform_features"],
        "label_key": "label_xf",
        "prediction_key": "probabilities",
        **model_spec,
    }
    return tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(**spec)],
        slicing_specs=[
            tfma.SlicingSpec(),
            tfma.SlicingSpec(feature_keys=["kind"]),
            tfma.SlicingSpec(feature_values={"hour": "7"}),
        ],
    )


def test_tfma_reads_the_slices_the_model_spec_s_keys_and_its_signatures_inputs(model_dir):
    assert columns_read(reader_config(), [model_dir, model_dir]) == {
        "kind",
        "hour",
        "label_xf",
        "probabilities",
        "examples",
    }
    weighted = reader_config(example_weight_key="weight", label_keys={"a": "label_a"})
    assert {"weight", "label_a"} <= columns_read(weighted, [model_dir])


def test_a_signature_fed_from_features_has_its_inputs_read(model_dir):
    """TFMA feeds a signature the features named as its inputs (and a Keras input
    `<name>_input` the feature `<name>`) when the features hold them all."""
    assert {"kind", "fare"} <= columns_read(
        reader_config(signature_name="serving_json"), [model_dir]
    )
    assert {"trip_miles_input", "trip_miles"} <= columns_read(
        reader_config(signature_name="keras_like"), [model_dir]
    )


@pytest.mark.parametrize(
    "model_spec",
    [
        {"signature_name": ""},
        {"preprocessing_function_names": ["transform@kind,fare"]},
        {"model_type": tfma.TFMA_EVAL},
    ],
    ids=["default signature", "TFMA preprocessing function", "EvalSavedModel"],
)
def test_where_tfma_s_reads_cannot_be_known_every_column_is_decoded(model_dir, model_spec):
    assert columns_read(reader_config(**model_spec), [model_dir]) is None


def test_a_model_without_a_saved_model_file_has_every_column_decoded(model_dir, tmp_path):
    assert columns_read(reader_config(), [model_dir, str(tmp_path)]) is None


# --- The reader in TFX's executor ----------------------------------------------------------


def write_records(path: Path, records: list[bytes], compressed: bool) -> str:
    options = tf.io.TFRecordOptions(compression_type="GZIP" if compressed else "")
    with tf.io.TFRecordWriter(str(path), options) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def _write_batch(batch: pa.RecordBatch, out: Path) -> None:
    path = out / f"{len(list(out.iterdir()))}.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)


def read(tfxio, out: Path) -> list[pa.RecordBatch]:
    """The record batches of `tfxio.BeamSource()`, through files in `out` (Beam runs a
    copy of each function, so nothing it appends reaches the test)."""
    out.mkdir()  # beside the data: the patterns match files only
    with beam.Pipeline() as pipeline:
        _ = pipeline | tfxio.BeamSource() | beam.Map(_write_batch, out)
    return [pa.ipc.open_file(pa.memory_map(str(p))).get_batch(0) for p in sorted(out.iterdir())]


@pytest.mark.parametrize("compressed", [True, False], ids=["gzip", "uncompressed"])
def test_the_reader_gives_every_record_once_with_its_columns(tmp_path, compressed):
    suffix = ".gz" if compressed else ""
    records = [example(kind=[f"k{i}".encode()], fare=[float(i)]) for i in range(300)]
    write_records(tmp_path / f"a{suffix}", records[:200], compressed)
    write_records(tmp_path / f"b{suffix}", records[200:], compressed)
    ours = ColumnsOnlyExampleRecord(
        str(tmp_path / "*"), frozenset({"kind"}), raw_record_column_name=RAW
    )
    batches = read(ours, tmp_path / "batches")
    assert all(b.schema.names == ["kind", RAW] for b in batches)
    table = pa.Table.from_batches(batches)
    raw, kind = table.column(RAW).to_pylist(), table.column("kind").to_pylist()
    rows = sorted(zip(raw, kind, strict=True))
    assert rows == sorted(([r], [f"k{i}".encode()]) for i, r in enumerate(records))


def test_files_tensorflow_cannot_read_go_through_beam_s_reader(tmp_path):
    """Beam's reader takes a compression from the file's extension (bz2 here); TensorFlow
    reads gzip or nothing, so such files are read by Beam's reader, decoded by ours."""
    records = [example(kind=[b"Cash"]), example(kind=[b"Card"])]
    framed = Path(write_records(tmp_path / "framed", records, compressed=False))
    (tmp_path / "data.bz2").write_bytes(bz2.compress(framed.read_bytes()))
    framed.unlink()
    assert not evaluation_reader._tensorflow_reads([str(tmp_path / "data.bz2")])
    tfxio = ColumnsOnlyExampleRecord(
        str(tmp_path / "*"), frozenset({"kind"}), raw_record_column_name=RAW
    )
    table = pa.Table.from_batches(read(tfxio, tmp_path / "batches"))
    assert table.column("kind").to_pylist() == [[b"Cash"], [b"Card"]]
    assert table.column(RAW).to_pylist() == [[r] for r in records]


def test_tfx_s_executor_reads_the_columns_only_while_do_runs(tmp_path):
    stock = stock_evaluator.tfxio_utils
    write_records(tmp_path / "data.gz", [example(kind=[b"Cash"])], compressed=True)
    with columns_only_in_tfx(frozenset({"kind"})):
        assert stock_evaluator.tfxio_utils is not stock
        factory = stock_evaluator.tfxio_utils.get_tfxio_factory_from_artifact(
            examples=[_examples(tmp_path)], telemetry_descriptors=["t"], raw_record_column_name=RAW
        )
        assert type(factory(str(tmp_path / "*"))) is ColumnsOnlyExampleRecord
        with_schema = stock_evaluator.tfxio_utils.get_tfxio_factory_from_artifact(
            examples=[_examples(tmp_path)],
            telemetry_descriptors=["t"],
            schema=_schema(),
            raw_record_column_name=RAW,
        )
        assert type(with_schema(str(tmp_path / "*"))) is tf_example_record.TFExampleRecord
    assert stock_evaluator.tfxio_utils is stock
    with columns_only_in_tfx(None):
        assert stock_evaluator.tfxio_utils is stock


def _examples(uri: Path):
    from tfx.types import standard_artifacts

    artifact = standard_artifacts.Examples()
    artifact.uri = str(uri)
    return artifact


def _schema():
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    schema.feature.add(name="kind", type=schema_pb2.BYTES)
    return schema


def test_the_raw_records_and_columns_match_tfx_s_reader(tmp_path):
    records = [example(kind=[b"Cash"], fare=[1.0]), example(fare=[2.0]), example(kind=[b"Card"])]
    write_records(tmp_path / "data.gz", records, compressed=True)
    pattern, columns = str(tmp_path / "*.gz"), frozenset({"kind", "fare"})
    ours = read(
        ColumnsOnlyExampleRecord(pattern, columns, raw_record_column_name=RAW), tmp_path / "ours"
    )
    theirs = read(
        tf_example_record.TFExampleRecord(pattern, raw_record_column_name=RAW), tmp_path / "theirs"
    )
    # tfx_bsl's batches are Beam's to size: compared row by row, with their types.
    assert rows(ours, columns) == rows(theirs, columns)


def rows(batches: list[pa.RecordBatch], columns) -> list[dict]:
    """Each row's raw record and {column: (type, values)} for the columns where it has
    values (TFMA reads no values from a null, an empty list or a missing column alike)."""
    result = []
    for batch in batches:
        for i in range(batch.num_rows):
            row = {"raw": batch.column(RAW)[i].as_py()}
            for column in sorted(columns):
                values = batch.column(column)[i].as_py() if column in batch.schema.names else None
                if values:
                    row[column] = (str(batch.column(column).type), values)
            result.append(row)
    return sorted(result, key=lambda r: r["raw"])
