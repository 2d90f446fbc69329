"""Shared fixtures: the real configuration, shrunk; slices of the real data."""

from __future__ import annotations

import collections
import contextlib
import csv
import io
import os
import pickle
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# tests/harness.py asserts for several test modules: its asserts report their
# values as a test module's do (registered before any test module imports it).
pytest.register_assert_rewrite("tests.harness")
# `./dev test --suite-profile DIR`: the suite's profile (docs/tests.md); off by default.
pytest_plugins = ("tests.suite_profile",)

REPO_ROOT = Path(__file__).resolve().parents[1]
TAXI_CSV = REPO_ROOT / "data" / "chicago_taxi" / "data.csv"
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
# The template's Kubeflow settings, which the golden spec is compiled from. The
# tests read this copy, not kubeflow/pipeline.yaml: that file is a project's
# own, and a fork edits it (tests/test_template.py keeps the two equal here).
TEMPLATE_SETTINGS_FILE = GOLDEN_DIR / "kubeflow_settings.yaml"


T = TypeVar("T")


def built_once(tmp_path_factory, name: str, build: Callable[[Path], T]) -> T:
    """A session fixture's value, built once for the whole run.

    Under pytest-xdist (./dev test) each worker is a session of its own, so a
    plain session fixture would be built once per worker. Here the first
    worker that asks builds it, under a lock, in a directory all workers share
    (their base temp's parent), and the others load the pickled value. The
    values are paths and plain data that the tests only read.
    """
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    directory = base / f"built-once-{name}"
    value_file = directory / "value.pickle"
    with FileLock(str(base / f"built-once-{name}.lock")):
        if value_file.exists():
            return pickle.loads(value_file.read_bytes())
        directory.mkdir(exist_ok=True)
        value = build(directory)
        value_file.write_bytes(pickle.dumps(value))
        return value


# Fixtures that train, run Beam or run the DAG: a test using one, however
# indirectly, is slow whatever its own markers say (./dev test --fast leaves it out).
SLOW_FIXTURES = frozenset(
    {"taxi_trainer_inputs", "small_model_base", "two_local_runs", "parquet_local_run"}
)
# A fast-tier test (not marked slow) that takes longer than this, set up and
# run, belongs in the slow tier. Every run lists such tests at its end; only a
# run given --enforce-fast-limit fails them (benchmarks/fast_tier.py, on an
# idle machine): on a busy one a correct test can take twice as long, and the
# machine's load alone must never fail a run.
# FAST_TEST_LIMIT_S in the environment sets it for one run (the guard's own test).
FAST_TEST_LIMIT_S = float(os.environ.get("FAST_TEST_LIMIT_S", "10"))
# In a whole-suite run the fast tests share the cores with training, Beam and
# compiled packages, and took up to 1.3x their fast-tier time in CI.
FAST_TEST_LIMIT_IN_WHOLE_SUITE_S = 2 * FAST_TEST_LIMIT_S
ENFORCE_FAST_LIMIT = "--enforce-fast-limit"
_OVER_LIMIT = "fast_tier_over_limit"
# The order xdist hands modules to workers in (./dev runs it with --dist
# loadscope --no-loadscope-reorder, so collection order is that order): the
# longest modules first, longest-processing-time first, so that none of them
# starts late and runs alone while the other worker idles; then the other
# slow modules, the most slow tests first; then the fast ones, hundreds of
# short tests that fill the end.
# The longest are docs/tests.md's ten slowest (tests/test_docs.py checks that
# each module there is named here), in the order of their modules' whole time.
LONGEST_MODULES = (
    "tests.test_kubeflow_executed",
    "tests.test_kubeflow_cluster_services",
    "tests.test_kubeflow_tfjob_executed",
    "tests.test_kubeflow_tuning_executed",
    "tests.test_kubeflow_scoring_executed",
    "tests.test_local_loop",
    "tests.test_watch_mode",
    "tests.test_bring_your_own_data",
    "tests.test_spans",
    "tests.test_drafted_spans",
    "tests.test_template",
    "tests.test_tuning",
)
_SPENT = pytest.StashKey[float]()


def module_rank(items: list[pytest.Item]) -> Callable[[pytest.Item], tuple[int, int]]:
    """The sort key of the order above: LONGEST_MODULES, then the other modules with
    slow tests, the most slow tests first, then the fast modules."""
    slow_tests = collections.Counter(
        item.module.__name__ for item in items if "slow" in item.keywords
    )

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = item.module.__name__
        if name in LONGEST_MODULES:
            return (0, LONGEST_MODULES.index(name))
        return (1, -slow_tests[name]) if slow_tests[name] else (2, 0)

    return rank


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    items.sort(key=module_rank(items))
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return
    skip = pytest.mark.skip(reason="needs a GPU; TensorFlow sees none")
    for item in gpu_items:
        item.add_marker(skip)


def fast_test_limit(config: pytest.Config) -> float:
    """FAST_TEST_LIMIT_S when the run leaves the slow tier out (`./dev test --fast`),
    else FAST_TEST_LIMIT_IN_WHOLE_SUITE_S."""
    fast_tier_only = "not slow" in (config.getoption("markexpr") or "")
    return FAST_TEST_LIMIT_S if fast_tier_only else FAST_TEST_LIMIT_IN_WHOLE_SUITE_S


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        ENFORCE_FAST_LIMIT,
        action="store_true",
        help="fail a fast-tier test that takes longer than the limit (docs/tests.md); "
        "meant for an idle machine: benchmarks/fast_tier.py",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when in ("setup", "call") and report.passed:
        spent = item.stash.get(_SPENT, 0.0) + report.duration
        item.stash[_SPENT] = spent
        limit = fast_test_limit(item.config)
        if report.when == "call" and "slow" not in item.keywords and spent > limit:
            # Carried to the controller by xdist with the report, for the summary.
            report.user_properties.append((_OVER_LIMIT, (round(spent, 1), limit)))
            if item.config.getoption(ENFORCE_FAST_LIMIT):
                report.outcome = "failed"
                report.longrepr = (
                    f"{item.nodeid} is in the fast tier but took {spent:.1f}s to set up and "
                    f"run (limit {limit:g}s): mark it @pytest.mark.slow, or use a fixture "
                    "in tests/conftest.py's SLOW_FIXTURES (docs/tests.md)"
                )
    return report


_over_limit: list[tuple[str, float, float]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for key, value in report.user_properties:
        if key == _OVER_LIMIT:
            _over_limit.append((report.nodeid, *value))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _over_limit:
        return
    enforced = config.getoption(ENFORCE_FAST_LIMIT)
    terminalreporter.section("fast-tier tests over their limit")
    for nodeid, spent, limit in sorted(_over_limit, key=lambda row: -row[1]):
        terminalreporter.write_line(f"{spent:6.1f}s (limit {limit:g}s)  {nodeid}")
    if not enforced:
        terminalreporter.write_line(
            f"not failed: {ENFORCE_FAST_LIMIT} fails them, on an idle machine "
            "(python -m benchmarks.fast_tier; a busy one slows correct tests)"
        )


def read_taxi_rows(limit: int | None = None) -> tuple[list[str], list[dict[str, str]]]:
    with TAXI_CSV.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = []
        for row in reader:
            rows.append(row)
            if limit is not None and len(rows) >= limit:
                break
        return list(reader.fieldnames or []), rows


def write_csv(path: Path, header: list[str], rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def taxi_as_parquet(
    taxi_csv: Path, root: Path, parts: int = 2, row_group_size: int | None = 600
) -> Path:
    """The rows of `taxi_csv` as Spark writes a table: `parts` snappy part files of
    row groups of `row_group_size` rows (None: one), its _SUCCESS marker and hidden
    .crc checksums beside them. An empty cell is a null, as a CSV reader takes it."""
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    table = pa_csv.read_csv(
        taxi_csv, convert_options=pa_csv.ConvertOptions(strings_can_be_null=True)
    )
    root.mkdir(parents=True, exist_ok=True)
    bounds = [table.num_rows * i // parts for i in range(parts + 1)]
    for part in range(parts):
        name = f"part-{part:05d}-1b2c.c000.snappy.parquet"
        rows = table.slice(bounds[part], bounds[part + 1] - bounds[part])
        # Parquet 2.6: pyarrow 10's default (2.4) stores nanoseconds as micros.
        pq.write_table(
            rows, root / name, version="2.6", compression="snappy", row_group_size=row_group_size
        )
        (root / f".{name}.crc").write_bytes(b"crc")
    (root / "_SUCCESS").write_bytes(b"")
    return root


@pytest.fixture(scope="session", autouse=True)
def temporary_files_under_basetemp(tmp_path_factory) -> Iterator[Path]:
    """The temporary directory of each worker and of what it starts is under
    its basetemp, which pytest rotates (the last three runs are kept).

    What libraries leave there (TensorFlow's autograph sources, Beam's staging
    directories, executed packages' scratch) then goes with the run instead of
    filling the host's /tmp run after run.
    """
    tmp = tmp_path_factory.getbasetemp() / "tmp"
    tmp.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(tmp))
        patch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
        yield tmp


@pytest.fixture(scope="session")
def taxi_slice(tmp_path_factory) -> Path:
    """A data root holding the first 3,000 rows of the real sample."""
    header, rows = read_taxi_rows(limit=3000)
    root = tmp_path_factory.mktemp("taxi_slice")
    write_csv(root / "data.csv", header, rows)
    return root


@pytest.fixture
def fast_config():
    """The real default configuration, shrunk for tests (habit: never a parallel config)."""
    from pipeline.pipeline_config import PipelineConfig

    return PipelineConfig(train_steps=60, eval_steps=5).with_runtime(
        per_replica_batch_size=64, accelerator="cpu", shuffle_buffer_size=1000
    )


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / name


def update_goldens() -> bool:
    """Set UPDATE_GOLDENS=1 to rewrite golden files from the current output."""
    return os.environ.get("UPDATE_GOLDENS") == "1"


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def load_schema():
    """The embedded taxi task's curated schema."""
    from schemas import load_schema_dir, read_schema

    return read_schema(load_schema_dir().schema_file)


@pytest.fixture(scope="session")
def taxi_spec():
    """The embedded taxi task's dataset spec."""
    from schemas import load_schema_dir

    return load_schema_dir().spec


def big_tipper_labels(rows: list[dict[str, str]]):
    """The label Transform computes, recomputed from raw CSV rows."""
    import numpy as np

    from trainer.custom import BIG_TIP_FRACTION

    return np.array([float(r["tips"]) > BIG_TIP_FRACTION * float(r["fare"]) for r in rows])


def analyze_and_transform(rows: list[dict[str, str]], schema, root: Path, spec=None):
    """Real tf.Transform analysis of `rows` on Beam, written where the Trainer expects it.

    Returns the TFTransformOutput and the rows transformed by the written
    graph: the path serving takes, so both are exercised. `spec`: the dataset
    spec (default: the taxi task's), handed over as TFX does, in custom_config.
    """
    import functools

    import apache_beam as beam
    import tensorflow as tf
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io
    from tfx_bsl.public import tfxio as public_tfxio

    from schemas import load_schema_dir
    from tests.raw_examples import serialize_rows
    from trainer.preprocessing import FORCE_TF_COMPAT_V1, preprocessing_fn
    from trainer.transform_graph import TransformGraph

    spec = spec or load_schema_dir().spec
    bound_preprocessing_fn = functools.partial(
        preprocessing_fn, custom_config=spec.to_custom_config()
    )
    graph_dir = root / "transform_graph"
    serialized = serialize_rows(rows, schema)
    tfxio = public_tfxio.TFExampleBeamRecord(
        physical_format="inmem", telemetry_descriptors=["test"], schema=schema
    )
    with (
        beam.Pipeline() as p,
        tft_beam.Context(temp_dir=str(root / "tmp"), force_tf_compat_v1=FORCE_TF_COMPAT_V1),
    ):
        raw = p | beam.Create(serialized) | tfxio.BeamSource()
        transform_fn = (raw, tfxio.TensorAdapterConfig()) | tft_beam.AnalyzeDataset(
            bound_preprocessing_fn
        )
        _ = transform_fn | tft_beam.WriteTransformFn(str(graph_dir))
    # The TFX Transform executor also records the raw schema; serving reads it.
    metadata_io.write_metadata(
        dataset_metadata.DatasetMetadata(schema),
        str(graph_dir / tft.TFTransformOutput.RAW_METADATA_DIR),
    )
    output = tft.TFTransformOutput(str(graph_dir))
    parsed = tf.io.parse_example(serialized, output.raw_feature_spec())
    # The serving model's own wrapper: TFT's transform_raw_features runs a
    # TF1-mode graph only in graph mode.
    return output, TransformGraph(output)(parsed)


@pytest.fixture(scope="session")
def taxi_trainer_inputs(tmp_path_factory):
    """Real tf.Transform output for 2,000 taxi rows, and the rows as train/eval
    TFRecords: transformed (what a materializing Transform hands the Trainer)
    and raw (ExampleGen's examples, for a Trainer that applies the graph).

    What the Trainer component receives, without running the DAG.
    """
    return built_once(tmp_path_factory, "taxi_trainer_inputs", build_trainer_inputs)


def build_trainer_inputs(root: Path) -> dict:
    import tensorflow as tf

    from tests.raw_examples import serialize_rows

    schema = load_schema()
    _, rows = read_taxi_rows(limit=2000)
    _, transformed = analyze_and_transform(rows, schema, root)
    # Each feature's column as one array: indexing a tensor row by row runs an
    # eager op per cell.
    columns = {key: values.numpy() for key, values in transformed.items()}

    def transformed_example(i: int) -> bytes:
        feature = {}
        for key, values in columns.items():
            value = values[i].item()
            if isinstance(value, float):
                feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
            else:
                feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    raw = serialize_rows(rows, schema)

    def write(name: str, records) -> str:
        path = root / f"{name}.tfrecord.gz"
        with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
            for record in records:
                writer.write(record)
        return str(path)

    return {
        "transform_output": str(root / "transform_graph"),
        "train_files": write("train", map(transformed_example, range(1500))),
        "eval_files": write("eval", map(transformed_example, range(1500, 2000))),
        "raw_train_files": write("raw_train", raw[:1500]),
        "raw_eval_files": write("raw_eval", raw[1500:]),
        "raw_rows": rows[1500:],
        "schema": schema,
    }


@pytest.fixture(scope="session")
def small_model_base(tmp_path_factory, taxi_trainer_inputs, taxi_spec) -> Path:
    """A TF Serving model base path holding version 1 of a model trained for 5 steps:
    for the serving tests, which need a real SavedModel, not a good one."""

    def build(root: Path) -> Path:
        return train_small_model(root / "base", taxi_trainer_inputs, taxi_spec)

    return built_once(tmp_path_factory, "small_model_base", build)


@pytest.fixture(scope="session")
def other_small_model_base(tmp_path_factory, taxi_trainer_inputs, taxi_spec) -> Path:
    """`small_model_base`'s model trained from another seed: the same inputs, signatures
    and spec, other weights, so other scores on the same rows (a test that must tell
    two served versions apart by what they score)."""

    def build(root: Path) -> Path:
        return train_small_model(root / "base", taxi_trainer_inputs, taxi_spec, seed=7)

    return built_once(tmp_path_factory, "other_small_model_base", build)


def train_small_model(base: Path, data: dict, taxi_spec, *, seed: int | None = None) -> Path:
    from trainer.config import ModelConfig, RuntimeConfig, TrainerConfig
    from trainer.run import train_and_export

    config = TrainerConfig(
        model=ModelConfig(hidden_units=(16,), dropout=0.0),
        runtime=RuntimeConfig(
            strategy="one_device",
            accelerator="cpu",
            precision="float32",
            per_replica_batch_size=64,
            shuffle_buffer_size=100,
        ),
    )
    if seed is not None:
        config = replace(config, seed=seed)
    train_and_export(
        config=config,
        spec=taxi_spec,
        train_files=[data["train_files"]],
        eval_files=[data["eval_files"]],
        transform_output=data["transform_output"],
        serving_model_dir=str(base / "1"),
        model_run_dir=str(base.parent / "run"),
        train_steps=5,
        eval_steps=1,
    )
    return base


def snapshot_files(directory: Path) -> dict[Path, tuple[int, int]]:
    """Relative path -> (size, mtime) of every file under `directory`."""
    return {
        p.relative_to(directory): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.is_file()
    }


# The two runs of `two_local_runs` train for different numbers of steps, so that
# the second run's candidate is another model than its baseline (the first
# run's, served), and scores differently: a report or an evaluation that swaps,
# duplicates or mixes up the two models' values shows it. The second trains
# longer and overfits the slice: it passes the value threshold and fails the
# change threshold, so it is not blessed (tests/test_e2e.py holds this).
TWO_RUNS_TRAIN_STEPS = (60, 200)


@dataclass(frozen=True)
class TwoLocalRuns:
    """Two `local_runner` runs on one output directory: the second has a baseline, the
    first run's model, and a candidate of its own (`train_steps`)."""

    output_dir: Path
    # The data both runs read. Built once for all workers, from the first worker's
    # `taxi_slice`: a test that reruns on this output and expects the cache reads
    # this root, not its own worker's slice (another path, so another ExampleGen).
    data_root: Path
    exit_codes: tuple[int, int]
    train_steps: tuple[int, int]
    first: object  # RunReport (pipeline.local.run_summary.summarize_latest_run)
    second: object  # RunReport
    first_stdout: str
    second_stdout: str
    first_version: Path
    served_files_before_second: dict
    served_files_after_second: dict


@pytest.fixture(scope="session")
def two_local_runs(tmp_path_factory, taxi_slice) -> TwoLocalRuns:
    """The real runner, twice, on a slice of the real data (shared by e2e and report tests).

    The second run trains longer (TWO_RUNS_TRAIN_STEPS): its Trainer, Evaluator
    and Pusher run again and the data steps come from cache. Its candidate is a
    new model, evaluated against the first run's, which stays the one version
    served: the new model falls more than the change threshold allows below it.
    """
    return built_once(tmp_path_factory, "two_local_runs", lambda root: run_twice(root, taxi_slice))


@dataclass(frozen=True)
class LocalRun:
    """One `local_runner` run: its output directory, exit code, summary and printout."""

    output_dir: Path
    exit_code: int
    report: object  # RunReport (pipeline.local.run_summary.summarize_latest_run)
    stdout: str


def run_local_runner(data_root: Path, output_dir: Path, train_steps: int) -> LocalRun:
    """`local_runner.py` as a user runs it on `data_root`, in this process."""
    from tfx.orchestration import metadata as tfx_metadata

    import local_runner
    from pipeline.local.run_summary import summarize_latest_run

    args = ["--data-root", str(data_root), "--output-dir", str(output_dir), "--eval-steps", "5"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = local_runner.main([*args, "--train-steps", str(train_steps)])
    sys.stdout.write(out.getvalue())
    metadata = tfx_metadata.sqlite_metadata_connection_config(str(output_dir / "metadata.sqlite"))
    return LocalRun(
        output_dir, rc, summarize_latest_run(metadata, "taxi-big-tipper"), out.getvalue()
    )


@pytest.fixture(scope="session")
def parquet_local_run(tmp_path_factory, taxi_slice) -> LocalRun:
    """The real runner once on `taxi_slice`'s rows written as one Parquet file, as
    `two_local_runs` first runs on the CSV (tests/test_parquet_to_examples.py compares
    them). One row group: ExampleGen reads it as one block, as it reads the CSV."""

    def build(root: Path) -> LocalRun:
        data_root = taxi_as_parquet(
            taxi_slice / "data.csv", root / "data", parts=1, row_group_size=None
        )
        return run_local_runner(data_root, root / "out", TWO_RUNS_TRAIN_STEPS[0])

    return built_once(tmp_path_factory, "parquet_local_run", build)


def run_twice(root: Path, taxi_slice: Path) -> TwoLocalRuns:
    output_dir = root / "out"
    first_steps, second_steps = TWO_RUNS_TRAIN_STEPS
    first = run_local_runner(taxi_slice, output_dir, first_steps)
    versions = sorted((output_dir / "serving_model").iterdir())
    assert len(versions) == 1, f"expected one pushed version after run 1, found {versions}"
    before = snapshot_files(versions[0])
    second = run_local_runner(taxi_slice, output_dir, second_steps)
    return TwoLocalRuns(
        output_dir=output_dir,
        data_root=taxi_slice,
        exit_codes=(first.exit_code, second.exit_code),
        train_steps=TWO_RUNS_TRAIN_STEPS,
        first=first.report,
        second=second.report,
        first_stdout=first.stdout,
        second_stdout=second.stdout,
        first_version=versions[0],
        served_files_before_second=before,
        served_files_after_second=snapshot_files(versions[0]),
    )
