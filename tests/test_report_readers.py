"""The run reports' readers without TensorFlow or TFMA agree with TensorFlow's and TFMA's own.

The Trainer's event files are read by components/report/event_scalars.py and
the Evaluator's output by components/report/tfma_records.py; each is checked
here against what `tf.compat.v1.train.summary_iterator` with `tf.make_ndarray`,
and TFMA's `load_metrics`, `load_validation_result` and `load_eval_run`, read
from the same files: written by TensorFlow and TFMA here, and a local run's.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow.core.util import event_pb2
from tensorflow_model_analysis.proto import config_pb2, metrics_for_slice_pb2, validation_result_pb2
from tensorflow_model_analysis.writers import eval_config_writer

from components.report import contents, tfma_records
from components.report.evaluation import OVERALL_SLICE, MetricComparison, read_evaluation
from components.report.event_scalars import scalar_events
from components.report.training import read_training_curves
from components.tfrecords import RecordError, read_records, tfrecord_frames
from tests.s3_standin import s3_standin

# --- TFRecord framing ---------------------------------------------------------

RECORDS = [b"", b"a", b"\x00" * 300, bytes(range(256)) * 5]


def _tf_written(path: Path, records: list[bytes]) -> Path:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path


def test_records_read_as_tensorflow_reads_them_and_framed_as_it_frames_them(tmp_path):
    path = _tf_written(tmp_path / "by_tf.tfrecord", RECORDS)
    assert list(read_records(str(path))) == list(tf.compat.v1.io.tf_record_iterator(str(path)))
    assert path.read_bytes() == tfrecord_frames(RECORDS)
    assert list(read_records(str(_tf_written(tmp_path / "empty", [])))) == []


@pytest.mark.parametrize("cut", [1, 4, 13, 200])
def test_a_truncated_file_names_itself_and_the_record(tmp_path, cut):
    data = tfrecord_frames(RECORDS)
    path = tmp_path / "cut.tfrecord"
    path.write_bytes(data[:-cut])
    last = len(tfrecord_frames(RECORDS[:-1]))
    with pytest.raises(RecordError) as raised:
        list(read_records(str(path)))
    assert str(raised.value).startswith(f"{path}: truncated record at byte {last} ")
    assert "\n" not in str(raised.value)
    with pytest.raises(tf.errors.DataLossError, match="truncated record"):
        list(tf.compat.v1.io.tf_record_iterator(str(path)))


@pytest.mark.parametrize("where", ["length", "data"])
def test_a_corrupted_record_names_itself_and_the_record(tmp_path, where):
    data = bytearray(tfrecord_frames(RECORDS))
    second = len(tfrecord_frames(RECORDS[:1]))
    # A bit of the second record's length, or of its data.
    data[second + (0 if where == "length" else 12)] ^= 0x01
    path = tmp_path / "corrupt.tfrecord"
    path.write_bytes(bytes(data))
    with pytest.raises(RecordError, match=f"^{path}: corrupted record at byte {second} "):
        list(read_records(str(path)))
    with pytest.raises(tf.errors.DataLossError, match="corrupted record"):
        list(tf.compat.v1.io.tf_record_iterator(str(path)))


# --- event files --------------------------------------------------------------


def scalar_events_by_tensorflow(directory: str) -> list[tuple[str, int, float]]:
    """The reports' reader before issue 62: TensorFlow's event iterator and make_ndarray."""
    found = []
    for name in sorted(os.listdir(directory)):
        if "tfevents" not in name:
            continue
        for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
            for value in event.summary.value:
                if value.HasField("tensor"):
                    number = tf.make_ndarray(value.tensor)
                    if number.ndim != 0 or number.dtype.kind not in "fiu":
                        continue
                    found.append((value.tag, int(event.step), float(number)))
                elif value.HasField("simple_value"):
                    found.append((value.tag, int(event.step), float(value.simple_value)))
    return found


# Every dtype TF's TensorProto holds a number in, and some it holds others in.
DTYPES = [
    tf.float32,
    tf.float64,
    tf.float16,
    tf.bfloat16,
    tf.int8,
    tf.int16,
    tf.int32,
    tf.int64,
    tf.uint8,
    tf.uint16,
    tf.uint32,
    tf.uint64,
    tf.bool,
    tf.complex64,
    tf.string,
    tf.qint8,
]


def _tensors() -> list[tuple[str, tf.Tensor]]:
    """(tag, value): each dtype as a scalar, a vector and an empty scalar proto's value."""
    out = []
    for dtype in DTYPES:
        if dtype == tf.string:
            scalar, vector = tf.constant(b"7"), tf.constant([b"7", b"8"])
        elif dtype.is_quantized:
            continue  # written below as protos: tf.constant makes no quantized values
        else:
            scalar = tf.cast(tf.constant(7.5 if dtype.is_floating else 7), dtype)
            vector = tf.cast(tf.constant([1, 2]), dtype)
        out += [(f"epoch_{dtype.name}", scalar), (f"epoch_{dtype.name}_vector", vector)]
    return out


def _write_events(directory: Path) -> None:
    """Scalars as Keras writes them, each dtype's tensors, and TF1's simple values, in two
    files; tensors in both `tensor_content` and the typed value fields."""
    directory.mkdir(parents=True, exist_ok=True)
    with tf.summary.create_file_writer(str(directory)).as_default():
        for step in range(3):
            tf.summary.scalar("epoch_loss", 0.5 / (step + 1), step=step)
            for tag, value in _tensors():
                tf.summary.write(tag, value, step=step)
    protos = [
        tf.compat.v1.Summary.Value(tag="epoch_simple", simple_value=0.25),
        tf.compat.v1.Summary.Value(
            tag="epoch_content", tensor=tf.make_tensor_proto(np.float64(2.5))
        ),
    ]
    for dtype, field, values in (
        (tf.float32, "float_val", [1.25]),
        (tf.float16, "half_val", [int(np.float16(1.5).view(np.uint16))]),
        (tf.int32, "int_val", [-3]),
        (tf.int64, "int64_val", []),  # no values: zero
        (tf.uint64, "uint64_val", [2**63]),
        (tf.qint8, "int_val", [5]),
    ):
        tensor = tf.make_tensor_proto(0, dtype=tf.int32)
        tensor.Clear()
        tensor.dtype = dtype.as_datatype_enum
        getattr(tensor, field).extend(values)
        protos.append(tf.compat.v1.Summary.Value(tag=f"epoch_{dtype.name}_field", tensor=tensor))
    # TF1's summaries (simple values) as its event writer frames them.
    with tf.io.TFRecordWriter(str(directory / "events.out.tfevents.1.tf1")) as writer:
        for step, value in enumerate(protos):
            event = event_pb2.Event(step=step, summary=tf.compat.v1.Summary(value=[value]))
            writer.write(event.SerializeToString())


def test_event_scalars_are_what_tensorflow_reads(tmp_path):
    _write_events(tmp_path)
    expected = scalar_events_by_tensorflow(str(tmp_path))
    tags = {tag for tag, _, _ in expected}
    # The dtypes whose scalars are numbers, and none of the others or of the vectors.
    assert {"epoch_loss", "epoch_float16", "epoch_uint64", "epoch_simple"} <= tags
    assert {"epoch_int64_field", "epoch_content", "epoch_float16_field"} <= tags
    assert not tags & {"epoch_string", "epoch_bool", "epoch_float32_vector", "epoch_qint8_field"}
    assert list(scalar_events(str(tmp_path))) == expected


def test_training_curves_of_a_truncated_event_file_name_the_file(tmp_path):
    _write_events(tmp_path / "train")
    (event_file,) = [p for p in (tmp_path / "train").iterdir() if p.name.endswith(".v2")]
    event_file.write_bytes(event_file.read_bytes()[:-3])
    read = contents.read_artifacts(contents.ArtifactUris(model_run=str(tmp_path)))
    (left_out,) = read["left_out"]
    assert f"{event_file}: truncated record at byte " in left_out
    assert left_out.startswith("The training section is left out") and "\n" not in left_out


# --- evaluation ---------------------------------------------------------------


def _key(name: str, **fields) -> metrics_for_slice_pb2.MetricKey:
    return metrics_for_slice_pb2.MetricKey(name=name, **fields)


def _metrics_for_slice(slice_key, values) -> metrics_for_slice_pb2.MetricsForSlice:
    out = metrics_for_slice_pb2.MetricsForSlice(slice_key=slice_key)
    for key, value in values:
        kv = out.metric_keys_and_values.add(key=key)
        if isinstance(value, float):
            kv.value.double_value.value = value
        else:
            kv.value.bytes_value = value
    return out


def write_evaluation(directory: Path) -> None:
    """An Evaluator's three files, written with TFMA's own protos and writers: a baseline,
    per-class (multiclass) metrics, a sliced and a non-finite value, value and change
    thresholds on the whole eval split and per slice, one of them failed."""
    directory.mkdir(parents=True)
    overall = metrics_for_slice_pb2.SliceKey()
    cash = metrics_for_slice_pb2.SliceKey()
    cash.single_slice_keys.add(column="payment_type", bytes_value=b"Cash")
    hour = metrics_for_slice_pb2.SliceKey()
    hour.single_slice_keys.add(column="trip_start_hour", int64_value=7)
    class_1 = metrics_for_slice_pb2.SubKey()
    class_1.class_id.value = 1
    top_k = metrics_for_slice_pb2.SubKey()
    top_k.top_k.value = 2
    records = [
        _metrics_for_slice(
            overall,
            [
                (_key("accuracy", model_name="candidate"), 0.75),
                (_key("accuracy", model_name="baseline"), 0.8),
                (_key("accuracy", model_name="candidate", is_diff=True), -0.05),
                (_key("auc", model_name="candidate", sub_key=class_1), 0.9),
                (_key("auc", model_name="candidate", sub_key=top_k), 0.1),
                (_key("example_count", model_name="candidate"), float("nan")),
                (_key("confusion", model_name="candidate"), b"not a number"),
            ],
        ),
        _metrics_for_slice(cash, [(_key("accuracy", model_name="candidate"), 0.5)]),
        _metrics_for_slice(hour, [(_key("accuracy", model_name="baseline"), 0.25)]),
    ]
    with tf.io.TFRecordWriter(str(directory / "metrics-00000-of-00001.tfrecord")) as writer:
        for record in records:
            writer.write(record.SerializeToString())
    validation = validation_result_pb2.ValidationResult(validation_ok=False)
    failed = validation.metric_validations_per_slice.add(slice_key=overall)
    failed.failures.add(
        metric_key=_key("accuracy", model_name="candidate", is_diff=True),
        message="the change breaks the threshold",
    )
    with tf.io.TFRecordWriter(str(directory / "validations.tfrecord")) as writer:
        writer.write(validation.SerializeToString())
    threshold = config_pb2.MetricThreshold()
    threshold.value_threshold.lower_bound.value = 0.5
    threshold.change_threshold.absolute.value = -1e-3
    threshold.change_threshold.direction = config_pb2.MetricDirection.HIGHER_IS_BETTER
    config = config_pb2.EvalConfig()
    spec = config.metrics_specs.add()
    spec.metrics.add(class_name="BinaryAccuracy", config='{"name": "accuracy"}').threshold.CopyFrom(
        threshold
    )
    per_slice = spec.metrics.add(class_name="AUC").per_slice_thresholds.add()
    per_slice.slicing_specs.add(feature_keys=["payment_type"])
    per_slice.threshold.value_threshold.upper_bound.value = 0.99
    per_slice.threshold.change_threshold.relative.value = 0.1
    per_slice.threshold.change_threshold.direction = config_pb2.MetricDirection.LOWER_IS_BETTER
    (directory / tfma_records.EVAL_CONFIG_FILE).write_text(
        eval_config_writer._serialize_eval_run(config, "data", "tfrecords", {"": "model"})
    )


def assert_same_as_tfma(uri: str) -> None:
    """Each of the three files reads as TFMA reads it, message for message."""

    def as_dicts(messages):
        return [json_format.MessageToDict(m) for m in messages]

    assert as_dicts(tfma_records.load_metrics(uri)) == as_dicts(tfma.load_metrics(uri))
    assert as_dicts([tfma_records.load_validation_result(uri)]) == as_dicts(
        [tfma.load_validation_result(uri)]
    )
    eval_config, *_ = eval_config_writer.load_eval_run(uri)
    assert as_dicts([tfma_records.load_eval_config(uri)]) == as_dicts([eval_config])


def test_an_evaluation_reads_as_tfma_reads_it(tmp_path):
    write_evaluation(tmp_path / "evaluation")
    uri = str(tmp_path / "evaluation")
    assert_same_as_tfma(uri)
    evaluation = read_evaluation(uri)
    overall = evaluation.slices[0].metrics
    assert evaluation.has_baseline and evaluation.validation_ok is False
    assert overall["accuracy"] == MetricComparison(0.75, 0.8, -0.05)
    assert overall["auc (class 1)"].candidate == 0.9
    assert overall["example_count"].candidate is None  # not finite
    assert [s.slice_name for s in evaluation.slices] == [
        OVERALL_SLICE,
        "payment_type = Cash",
        "trip_start_hour = 7",
    ]
    assert [(t.metric, t.slice_name, t.kind, t.bound, t.passed) for t in evaluation.thresholds] == [
        ("accuracy", OVERALL_SLICE, "value", ">= 0.5", True),
        ("accuracy", OVERALL_SLICE, "change", "change >= -0.001", False),
        ("auc", "payment_type (each slice)", "value", "<= 0.99", True),
        ("auc", "payment_type (each slice)", "change", "relative change <= +0.1", True),
    ]


def _last_bit_flipped(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0x01])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda path: path.write_bytes(path.read_bytes()[:-2]), "truncated record at byte "),
        (lambda path: path.write_bytes(_last_bit_flipped(path.read_bytes())), "corrupted record "),
    ],
)
def test_a_damaged_metrics_file_leaves_the_evaluation_out_and_names_it(tmp_path, damage, message):
    write_evaluation(tmp_path / "evaluation")
    metrics = tmp_path / "evaluation" / "metrics-00000-of-00001.tfrecord"
    damage(metrics)
    read = contents.read_artifacts(contents.ArtifactUris(evaluation=str(tmp_path / "evaluation")))
    (left_out,) = read["left_out"]
    assert f"{metrics}: {message}" in left_out and "\n" not in left_out


def test_a_second_validation_result_is_an_error_naming_the_evaluation(tmp_path):
    write_evaluation(tmp_path / "evaluation")
    first = (tmp_path / "evaluation" / "validations.tfrecord").read_bytes()
    (tmp_path / "evaluation" / "validations-2.tfrecord").write_bytes(first)
    with pytest.raises(ValueError, match="2 validation results in validations"):
        tfma_records.load_validation_result(str(tmp_path / "evaluation"))


# --- a local run's outputs ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.e2e
def test_a_local_runs_trainer_and_evaluator_outputs_read_as_tensorflow_and_tfma_read_them(
    two_local_runs,
):
    """Both runs: the first without a baseline, the second with the first's pushed model."""
    root = two_local_runs.output_dir / "pipeline_root"
    model_runs = sorted((root / "Trainer" / "model_run").iterdir(), key=lambda p: int(p.name))
    evaluations = sorted((root / "Evaluator" / "evaluation").iterdir(), key=lambda p: int(p.name))
    assert model_runs and len(evaluations) == 2
    for model_run in model_runs:
        directory = str(model_run / "train")
        expected = scalar_events_by_tensorflow(directory)
        assert expected and list(scalar_events(directory)) == expected
        assert read_training_curves(str(model_run)).metrics
    has_baseline = []
    for evaluation in evaluations:
        assert_same_as_tfma(str(evaluation))
        has_baseline.append(read_evaluation(str(evaluation)).has_baseline)
    assert has_baseline == [False, True]


@pytest.mark.slow  # an S3 server (moto) in this process
def test_curves_and_evaluation_read_the_same_on_s3(tmp_path, monkeypatch):
    """RunStatus's pod reads a run's artifacts on the object store through boto3
    (components/store_files.py): the same sections as from a local copy."""
    _write_events(tmp_path / "model_run" / "train")
    write_evaluation(tmp_path / "evaluation")
    with s3_standin() as store:
        for name, value in store.shell_environment(tmp_path).items():
            if name not in ("PATH", "HOME"):
                monkeypatch.setenv(name, value)
        client = store.client()
        for path in tmp_path.rglob("*"):
            if path.is_file():
                key = f"run/{path.relative_to(tmp_path)}"
                client.put_object(Bucket=store.bucket, Key=key, Body=path.read_bytes())
        remote = f"s3://{store.bucket}/run"
        local_curves = read_training_curves(str(tmp_path / "model_run"))
        assert local_curves.metrics
        assert read_training_curves(f"{remote}/model_run") == local_curves
        assert read_evaluation(f"{remote}/evaluation") == read_evaluation(
            str(tmp_path / "evaluation")
        )


@pytest.mark.slow
@pytest.mark.e2e
def test_a_served_models_signatures_read_as_tensorflow_reads_them(two_local_runs, tmp_path):
    """`serving_dir.serving_signatures` (tensorboard's MetaGraphDef, no TensorFlow) and
    TensorFlow's SavedModel proto (`signature_defs`, components/serving/baseline/component.py)
    on every version the runs served: the same signatures with the same inputs; none without
    saved_model.pb."""
    from components.serving.baseline.component import signature_defs
    from components.serving.serving_dir import serving_signatures

    served = sorted((two_local_runs.output_dir / "serving_model").iterdir())
    assert served
    for version in served:
        expected = tuple(
            sorted((n, tuple(sorted(s.inputs))) for n, s in signature_defs(str(version)).items())
        )
        assert serving_signatures(str(version)) == expected
        assert {"serving_default", "serving_json"} <= {name for name, _ in expected}
    assert serving_signatures(str(tmp_path)) == ()
