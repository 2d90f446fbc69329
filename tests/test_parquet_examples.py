"""ExampleGen's Parquet copy (components/example_gen/parquet_examples.py) is what StatisticsGen and
Transform see from the tf.Examples: the same columns, the same statistics per split,
the same Transform graph; and Transform over it still writes tf.Examples
(components/transform/executor.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx.components.statistics_gen import executor as statistics_executor
from tfx.components.transform import executor as stock_transform_executor
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import io_utils, proto_utils
from tfx_bsl.coders import example_coder
from tfx_bsl.coders.csv_decoder import ColumnType

from components.example_gen.encoding import encode_examples
from components.example_gen.executor import SpanResolvingExecutor
from components.example_gen.input_settings import input_config
from components.example_gen.parquet_examples import feature_columns, feature_schema
from components.transform.executor import (
    ParquetAnalysisExecutor,
    ParquetColumnError,
    schema_columns,
)
from tests.conftest import load_schema
from tests.harness import IN_MEMORY_BEAM_ARGS, beam_executor, run_example_gen_outputs

SPLITS = ("train", "eval")

# TFDV's quantiles sketch (tensorflow_data_validation 1.16, statistics/stats_options.py,
# `epsilon` default 0.01): a quantile is within this fraction of the rows of the true one.
SKETCH_EPSILON = 0.01

CORNER_KINDS = {
    "i": ColumnType.INT,
    "f": ColumnType.FLOAT,
    "s": ColumnType.STRING,
    "li": ColumnType.INT,
    "lf": ColumnType.FLOAT,
    "ls": ColumnType.STRING,
    "absent": ColumnType.FLOAT,
    "u": ColumnType.UNKNOWN,
}


def corner_batch() -> pa.RecordBatch:
    """Every shape a reader hands the encoder: nulls, zeros, empty strings, float64 that
    rounds, lists with null elements, null and empty lists; `absent` is in no row."""
    return pa.RecordBatch.from_pydict(
        {
            "i": pa.array([0, None, -(2**63), 7], pa.int64()),
            "f": pa.array([0.1, None, 1e300 / 1e300, -0.0], pa.float64()),
            "s": pa.array(["", None, "é", "x"], pa.string()),
            "li": pa.array([[1, None, 2], None, [], [3]], pa.list_(pa.int64())),
            "lf": pa.array([[0.5], [None], None, [1.25, 2.5]], pa.list_(pa.float32())),
            "ls": pa.array([[b"a", b""], None, [None], [b"z"]], pa.large_list(pa.binary())),
            "u": pa.nulls(4),
        }
    )


def decoded(batch: pa.RecordBatch, kinds) -> pa.RecordBatch:
    """What TFX reads the batch's tf.Examples as (schema-less, as StatisticsGen does)."""
    return example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(encode_examples(batch, kinds))


def by_name(batch: pa.RecordBatch) -> dict[str, tuple[pa.DataType, list]]:
    return {f.name: (f.type, batch.column(f.name).to_pylist()) for f in batch.schema}


def test_feature_columns_are_the_decoded_examples_columns():
    batch = corner_batch()
    assert by_name(feature_columns(batch, CORNER_KINDS)) == by_name(decoded(batch, CORNER_KINDS))


def test_feature_columns_survive_parquet(tmp_path):
    """Written and read back (Beam's Parquet source reads with pyarrow), large types too."""
    columns = feature_columns(corner_batch(), CORNER_KINDS)
    pq.write_table(pa.Table.from_batches([columns]), tmp_path / "x.parquet", compression="none")
    read = pq.ParquetFile(tmp_path / "x.parquet").read_row_group(0)
    assert read.schema == feature_schema(CORNER_KINDS)
    assert read.to_pylist() == pa.Table.from_batches([columns]).to_pylist()


def test_a_null_for_a_missing_value_is_not_what_the_examples_decode_to():
    """The negative case: TFDV counts a null as missing and [] as present with no values."""
    batch = pa.RecordBatch.from_pydict({"i": pa.array([1, None], pa.int64())})
    kinds = {"i": ColumnType.INT}
    with_null = pa.array([[1], None], pa.large_list(pa.int64()))
    assert decoded(batch, kinds).column(0).to_pylist() == [[1], []]
    assert feature_columns(batch, kinds).column(0).to_pylist() == [[1], []]
    assert with_null.to_pylist() != feature_columns(batch, kinds).column(0).to_pylist()


def test_schema_columns_reorders_and_refuses_another_type():
    declared = pa.schema([("b", pa.large_list(pa.int64())), ("a", pa.large_list(pa.float32()))])
    batch = pa.RecordBatch.from_pydict(
        {
            "a": pa.array([[1.0]], pa.large_list(pa.float32())),
            "extra": pa.array([[1]], pa.large_list(pa.int64())),
            "b": pa.array([[2]], pa.large_list(pa.int64())),
        }
    )
    assert schema_columns(batch, declared).schema == declared
    wrong = pa.RecordBatch.from_pydict(
        {"a": pa.array([[1.0]], pa.large_list(pa.float32())), "b": pa.array([2], pa.int64())}
    )
    with pytest.raises(ParquetColumnError, match=r"^Parquet column 'b' is int64"):
        schema_columns(wrong, declared)
    with pytest.raises(ParquetColumnError, match=r"^the Parquet examples have no column 'b'"):
        schema_columns(pa.RecordBatch.from_arrays([batch.column(0)], names=["a"]), declared)


# --- The taxi sample, through ExampleGen, StatisticsGen and Transform -----------------


@pytest.fixture(scope="module")
def taxi_outputs(taxi_slice, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("parquet_examples") / "examples"
    properties = {"input_config": proto_utils.proto_to_json(input_config(None))}
    return run_example_gen_outputs(SpanResolvingExecutor, taxi_slice, out, properties)


def test_example_gen_writes_the_same_splits_and_rows_as_parquet(taxi_outputs):
    examples, parquet = taxi_outputs["examples"], taxi_outputs["parquet_examples"]
    assert examples_utils.get_payload_format(parquet) == example_gen_pb2.FORMAT_PARQUET
    assert parquet.split_names == examples.split_names
    for split in SPLITS:
        records = [
            r.numpy()
            for f in sorted(Path(artifact_utils.get_split_uri([examples], split)).glob("*.gz"))
            for r in tf.data.TFRecordDataset(str(f), compression_type="GZIP")
        ]
        files = sorted(Path(artifact_utils.get_split_uri([parquet], split)).iterdir())
        assert [f.name.rsplit("-of-", 1)[0] for f in files] == [
            f"data_parquet-{i:05d}" for i in range(len(files))
        ]
        table = pa.concat_tables(pq.read_table(f) for f in files)
        from_examples = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(records)
        # Row for row, in the files' order: the same rows, shuffled alike.
        assert by_name(pa.Table.from_batches([from_examples]).combine_chunks().to_batches()[0]) == (
            by_name(table.combine_chunks().to_batches()[0])
        )


def statistics(examples, out: Path) -> dict[str, statistics_pb2.DatasetFeatureStatistics]:
    """TFX's StatisticsGen executor over `examples`: split -> its statistics."""
    stats = standard_artifacts.ExampleStatistics()
    stats.uri = str(out)
    executor = beam_executor(statistics_executor.Executor, IN_MEMORY_BEAM_ARGS, out)
    executor.Do(
        {"examples": [examples]},
        {"statistics": [stats]},
        {"exclude_splits": json.dumps([])},
    )
    result = {}
    for split in SPLITS:
        path = Path(artifact_utils.get_split_uri([stats], split), "FeatureStats.pb")
        (dataset,) = statistics_pb2.DatasetFeatureStatisticsList.FromString(
            path.read_bytes()
        ).datasets
        result[split] = dataset
    return result


def _fields(message, skip=()) -> dict:
    return {f.name: v for f, v in message.ListFields() if f.name not in skip}


def _same_quantile(a: float, b: float, values: np.ndarray, rows: int) -> bool:
    """Two quantile estimates agree when their ranks among the values are within the
    sketch's epsilon of each other (each is within epsilon of the true rank)."""
    rank = lambda v: np.searchsorted(values, v, side="right")  # noqa: E731
    return abs(int(rank(a)) - int(rank(b))) <= 2 * SKETCH_EPSILON * rows + 1


def assert_histograms_close(ours, theirs, values: np.ndarray, rows: int, what: str) -> None:
    assert ours.type == theirs.type, what
    assert len(ours.buckets) == len(theirs.buckets), what
    assert ours.num_nan == theirs.num_nan and ours.num_undefined == theirs.num_undefined, what
    for a, b in zip(ours.buckets, theirs.buckets, strict=True):
        if ours.type == statistics_pb2.Histogram.QUANTILES:
            assert _same_quantile(a.low_value, b.low_value, values, rows), what
            assert _same_quantile(a.high_value, b.high_value, values, rows), what
        else:
            assert a.low_value == pytest.approx(b.low_value, rel=1e-9), what
            assert a.high_value == pytest.approx(b.high_value, rel=1e-9), what
        assert a.sample_count == pytest.approx(b.sample_count, abs=SKETCH_EPSILON * rows), what


def assert_statistics_equal(ours, theirs, columns: dict[str, np.ndarray]) -> None:
    """Counts exact, moments to 1e-9, histograms and quantiles within the sketch's
    epsilon, top-k exact; feature by feature."""
    assert ours.num_examples == theirs.num_examples
    rows = ours.num_examples
    mine = {f.path.step[0]: f for f in ours.features}
    other = {f.path.step[0]: f for f in theirs.features}
    assert sorted(mine) == sorted(other)
    for name, feature in mine.items():
        expected = other[name]
        assert feature.type == expected.type, name
        which = feature.WhichOneof("stats")
        assert which == expected.WhichOneof("stats"), name
        stats, expected_stats = getattr(feature, which), getattr(expected, which)
        common, expected_common = stats.common_stats, expected_stats.common_stats
        skip = ("num_values_histogram", "weighted_common_stats", "feature_list_length_histogram")
        assert _fields(common, skip) == pytest.approx(_fields(expected_common, skip), rel=1e-9), (
            name
        )
        values = np.sort(columns[name]) if name in columns else np.array([])
        assert_histograms_close(
            common.num_values_histogram,
            expected_common.num_values_histogram,
            np.sort(np.array([len(v) for v in columns.get(name + "#lengths", [])])),
            rows,
            f"{name} num_values",
        )
        if which == "num_stats":
            moments = ("mean", "std_dev", "min", "max")
            assert {m: getattr(stats, m) for m in moments} == pytest.approx(
                {m: getattr(expected_stats, m) for m in moments}, rel=1e-9, abs=1e-12
            ), name
            assert stats.num_zeros == expected_stats.num_zeros, name
            assert _same_quantile(stats.median, expected_stats.median, values, rows), name
            assert len(stats.histograms) == len(expected_stats.histograms), name
            for h, e in zip(stats.histograms, expected_stats.histograms, strict=True):
                assert_histograms_close(h, e, values, rows, name)
        elif which == "string_stats":
            assert stats.unique == expected_stats.unique, name
            assert stats.avg_length == pytest.approx(expected_stats.avg_length, rel=1e-9), name
            assert list(stats.top_values) == list(expected_stats.top_values), name
            assert stats.rank_histogram == expected_stats.rank_histogram, name


def split_columns(examples, split: str) -> dict[str, np.ndarray]:
    """Each numeric feature's values, and every feature's per-row lengths, of a split."""
    records = [
        r.numpy()
        for f in sorted(Path(artifact_utils.get_split_uri([examples], split)).glob("*.gz"))
        for r in tf.data.TFRecordDataset(str(f), compression_type="GZIP")
    ]
    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(records)
    columns = {}
    for field in batch.schema:
        column = batch.column(field.name)
        if pa.types.is_null(field.type):
            continue
        columns[field.name + "#lengths"] = column.to_pylist()
        flat = column.flatten()
        if pa.types.is_integer(flat.type) or pa.types.is_floating(flat.type):
            columns[field.name] = flat.to_numpy(zero_copy_only=False).astype(np.float64)
    return columns


@pytest.mark.slow
def test_statistics_from_parquet_equal_those_from_the_examples(taxi_outputs, tmp_path):
    examples, parquet = taxi_outputs["examples"], taxi_outputs["parquet_examples"]
    ours = statistics(parquet, tmp_path / "parquet")
    theirs = statistics(examples, tmp_path / "examples")
    for split in SPLITS:
        assert ours[split].num_examples > 0
        assert_statistics_equal(ours[split], theirs[split], split_columns(examples, split))


def write_schema(directory: Path) -> standard_artifacts.Schema:
    directory.mkdir(parents=True)
    io_utils.write_pbtxt_file(str(directory / "schema.pbtxt"), load_schema())
    schema = standard_artifacts.Schema()
    schema.uri = str(directory)
    return schema


def run_transform(executor_class, examples, out: Path) -> tuple[Path, standard_artifacts.Examples]:
    """TFX's Transform executor as the pipeline configures it; its graph and examples."""
    from pipeline.pipeline import function_path
    from schemas import load_schema_dir
    from trainer.preprocessing import FORCE_TF_COMPAT_V1, preprocessing_fn

    graph = standard_artifacts.TransformGraph()
    graph.uri = str(out / "transform_graph")
    transformed = standard_artifacts.Examples()
    transformed.uri = str(out / "transformed_examples")
    executor = beam_executor(executor_class, IN_MEMORY_BEAM_ARGS, out)
    executor.Do(
        {"examples": [examples], "schema": [write_schema(out / "schema")]},
        {"transform_graph": [graph], "transformed_examples": [transformed]},
        {
            "preprocessing_fn": function_path(preprocessing_fn),
            "custom_config": json.dumps(load_schema_dir().spec.to_custom_config()),
            "disable_statistics": 1,
            "force_tf_compat_v1": int(FORCE_TF_COMPAT_V1),
        },
    )
    return Path(graph.uri), transformed


def transformed_rows(transformed, split: str) -> list[dict[str, list]]:
    """A split's transformed tf.Examples (as the Trainer reads them: gzipped TFRecords),
    each as its features' values, in the files' order (the in-memory runner keeps the
    input's order, and the Parquet rows are in the tf.Examples' order)."""
    files = sorted(Path(artifact_utils.get_split_uri([transformed], split)).glob("*.gz"))
    assert files, f"no gzipped TFRecords in {split}"
    rows = []
    for f in files:
        for record in tf.data.TFRecordDataset(str(f), compression_type="GZIP"):
            features = tf.train.Example.FromString(record.numpy()).features.feature
            rows.append(
                {
                    key: list(getattr(feature, feature.WhichOneof("kind")).value)
                    for key, feature in features.items()
                    if feature.WhichOneof("kind")
                }
            )
    return rows


@pytest.mark.slow
def test_transform_over_parquet_is_transform_over_the_examples(taxi_outputs, tmp_path):
    import tensorflow_transform as tft

    from tests.conftest import read_taxi_rows
    from tests.raw_examples import serialize_rows

    ours_graph, ours_examples = run_transform(
        ParquetAnalysisExecutor, taxi_outputs["parquet_examples"], tmp_path / "parquet"
    )
    stock_graph, stock_examples = run_transform(
        stock_transform_executor.Executor, taxi_outputs["examples"], tmp_path / "examples"
    )
    # Vocabularies (and every other asset) identical.
    assets = lambda graph: {  # noqa: E731
        p.relative_to(graph): p.read_bytes()
        for p in (graph / "transform_fn" / "assets").rglob("*")
        if p.is_file()
    }
    assert assets(ours_graph) and assets(ours_graph) == assets(stock_graph)
    # The analyzers' outputs (means, variances, bucket boundaries) are the graph's
    # constants: the same raw rows through both graphs, within 1e-6.
    _, rows = read_taxi_rows(limit=200)
    schema = load_schema()
    raw = tf.io.parse_example(
        serialize_rows(rows, schema), tft.TFTransformOutput(str(ours_graph)).raw_feature_spec()
    )
    from trainer.transform_graph import TransformGraph

    ours = TransformGraph(tft.TFTransformOutput(str(ours_graph)))(raw)
    stock = TransformGraph(tft.TFTransformOutput(str(stock_graph)))(raw)
    assert sorted(ours) == sorted(stock)
    for name in ours:
        a, b = ours[name], stock[name]
        if isinstance(a, tf.SparseTensor):
            a, b = tf.sparse.to_dense(a), tf.sparse.to_dense(b)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6, err_msg=name)
    # Materialized as tf.Examples, as the Trainer reads them, holding the same rows.
    assert examples_utils.get_payload_format(ours_examples) == example_gen_pb2.FORMAT_TF_EXAMPLE
    for split in SPLITS:
        mine, theirs = (
            transformed_rows(ours_examples, split),
            transformed_rows(stock_examples, split),
        )
        assert len(mine) == len(theirs) > 0
        for row, expected in zip(mine, theirs, strict=True):
            assert sorted(row) == sorted(expected)
            for key, values in row.items():
                if values and isinstance(values[0], bytes):
                    assert values == expected[key], key
                else:
                    np.testing.assert_allclose(values, expected[key], rtol=1e-6, atol=1e-6)
