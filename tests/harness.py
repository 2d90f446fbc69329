"""Helpers shared by several test modules live here; a test module imports from here,
never from another test module.

Each section below holds what one subject's tests share. What a single module
alone uses stays in that module, and fixtures stay with their tests (or in
tests/conftest.py). tests/test_architecture.py checks that no test module
imports another.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
import yaml
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer
from tfx.components.example_gen import utils as example_gen_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import proto_utils

from components.report.evaluation import OVERALL_SLICE
from components.serving.serving_dir import SERVED_EVALUATION_FILE
from contract.dataset.parse import load_spec
from kubeflow import pipeline_steps as kubeflow_steps
from kubeflow.steps.step_records import RECORD_FILE, StepRecord
from pipeline import steps as dag
from pipeline.beam import beam_pipeline_args
from pipeline.local.node_launch import tfx_not_shipped_to_beam_workers
from pipeline.pipeline import build_eval_config, create_pipeline
from pipeline.pipeline_config import PipelineConfig
from tests import suite_profile
from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE, load_schema
from tests.raw_examples import serialize_rows
from tests.span_data import span_schema_dir
from trainer.export import SERVING_SIGNATURE, SPEC_ASSET
from trainer.json_signature import CONTRACT_ASSET, contract_from_dicts, instance_from_example
from trainer.model_support import PROBABILITIES_OUTPUT

# --- reading the HTML run report ---
# Its elements and their data-* attributes, for the tests that check what a report shows.


class _Elements(HTMLParser):
    """Every start tag with its attributes, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))


def parse(html: str) -> list[tuple[str, dict[str, str]]]:
    parser = _Elements()
    parser.feed(html)
    return parser.elements


def with_attr(elements, name: str, **match: str) -> list[dict[str, str]]:
    return [
        attrs
        for _tag, attrs in elements
        if name in attrs
        and all(attrs.get(k.rstrip("_").replace("_", "-")) == v for k, v in match.items())
    ]


def frozen_hyperparameter_rows(html: str) -> dict[str, str]:
    """The run report's frozen-hyperparameters table, row key -> shown value (unescaped)."""
    import html as html_module

    (table,) = re.findall(r'<table id="hyperparameters">(.*?)</table>', html, re.S)
    return {
        html_module.unescape(key): html_module.unescape(value)
        for key, value in re.findall(
            r'<tr data-key="([^"]*)"><th>[^<]*</th><td>([^<]*)</td></tr>', table
        )
    }


def assert_self_contained(html: str) -> None:
    elements = parse(html)
    assert not [a for t, a in elements if t in ("script", "link", "iframe", "object")]
    for tag, attrs in elements:
        for key in ("src", "href"):
            value = attrs.get(key)
            if value is not None:
                assert value.startswith(("data:", "#")), f"<{tag} {key}={value[:60]!r}>"
    assert not re.search(r"url\(\s*['\"]?(?!data:)", html), "a CSS url() that is not data:"
    assert not re.search(r"@import|https?://(?!www\.w3\.org/)", html.replace("xmlns", "")), (
        "a reference to the network"
    )


def report_path_printed(stdout: str) -> Path:
    (line,) = [line for line in stdout.splitlines() if line.startswith("Report: ")]
    return Path(line.split()[1])


def svg_texts(svg: str) -> list[str]:
    """Every text of an SVG document, read by an XML parser (which refuses broken XML)."""
    from xml.etree import ElementTree

    tree = ElementTree.fromstring(svg)
    return ["".join(t.itertext()) for t in tree.iter("{http://www.w3.org/2000/svg}text")]


# What a CSV cell can hold that some renderer reads as markup (STYLE.md, habit 21).
HOSTILE_VALUES = (
    "$0_to_$10",
    "C:\\data\\x",
    "<b>&amp;",
    "[1]",
    "#1",
    "two\nlines",
    "bell\x07 nul\x00 esc\x1b",
    "next line\x85 sep\u2028",
)


# --- batch scoring ---


def served_copy(small_model_base: Path, root: Path, versions=("1",)) -> Path:
    """Copies of the small model as versions of a serving directory under `root`."""
    for version in versions:
        shutil.copytree(small_model_base / "1", root / "serving" / version)
    return root / "serving"


# --- the DAG's expected shape, and the DAG built without running it ---
# For the tests of the TFX DAG and of what the Kubeflow compile makes of it.


EXPECTED_EDGES = {
    (dag.EXAMPLE_GEN, dag.STATISTICS_GEN),
    (dag.EXAMPLE_GEN, dag.TRANSFORM),
    (dag.EXAMPLE_GEN, dag.EVALUATOR),
    (dag.STATISTICS_GEN, dag.EXAMPLE_VALIDATOR),
    (dag.STATISTICS_GEN, dag.DATA_GATE),
    (dag.SCHEMA_IMPORTER, dag.EXAMPLE_VALIDATOR),
    (dag.SCHEMA_IMPORTER, dag.TRANSFORM),
    (dag.SCHEMA_IMPORTER, dag.TRAINER),
    (dag.EXAMPLE_VALIDATOR, dag.DATA_GATE),
    (dag.DATA_GATE, dag.TRAINER),
    (dag.STATISTICS_GEN, dag.DRIFT_GATE),
    (dag.SCHEMA_IMPORTER, dag.DRIFT_GATE),
    (dag.DRIFT_GATE, dag.TRAINER),
    (dag.STATISTICS_GEN, dag.PUSHER),
    (dag.TRANSFORM, dag.TRAINER),
    (dag.TRAINER, dag.EVALUATOR),
    (dag.TRAINER, dag.PUSHER),
    (dag.TRAINER, dag.BASELINE),
    (dag.BASELINE, dag.EVALUATOR),
    (dag.EVALUATOR, dag.PUSHER),
}
# The Kubeflow DAG's last step reads the artifacts the report shows.
RUN_REPORT_EDGES = {
    (dag.EXAMPLE_GEN, kubeflow_steps.RUN_REPORT),
    (dag.DRIFT_GATE, kubeflow_steps.RUN_REPORT),
    (dag.STATISTICS_GEN, kubeflow_steps.RUN_REPORT),
    (dag.EXAMPLE_VALIDATOR, kubeflow_steps.RUN_REPORT),
    (dag.TRAINER, kubeflow_steps.RUN_REPORT),
    (dag.EVALUATOR, kubeflow_steps.RUN_REPORT),
    (dag.BASELINE, kubeflow_steps.RUN_REPORT),
    (dag.PUSHER, kubeflow_steps.RUN_REPORT),
}


def build(tmp_path, config: PipelineConfig | None = None, *, dataset=None, **extra):
    from schemas import load_schema_dir

    config = config or PipelineConfig()
    return create_pipeline(
        dataset=dataset or load_schema_dir().spec,
        pipeline_root=str(tmp_path / "root"),
        data_root=str(tmp_path / "data"),
        schema_path=str(tmp_path / "schema.pbtxt"),
        serving_model_dir=str(tmp_path / "serving"),
        train_steps=config.train_steps,
        eval_steps=config.eval_steps,
        trainer_config=config.trainer,
        enable_cache=config.enable_cache,
        **extra,
    )


# --- ExampleGen executors run on real rows, and their examples read back ---
# A local in-memory Beam step's arguments (pipeline/beam.py).
IN_MEMORY_BEAM_ARGS = tuple(beam_pipeline_args("in_memory"))


# For comparing our ExampleGen executor with TFX's stock CSV one, split by split.


def beam_executor(executor_class, beam_pipeline_args, out: Path):
    """A Beam executor with these arguments, built as the local runner builds it
    (TFX not packaged for its workers: pipeline/local/node_launch.py)."""
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=list(beam_pipeline_args), tmp_dir=str(out / ".tmp")
    )
    with tfx_not_shipped_to_beam_workers():
        return executor_class(context)


def run_example_gen(
    executor_class,
    data_root: Path,
    out: Path,
    exec_properties: dict,
    beam_pipeline_args: tuple[str, ...] = IN_MEMORY_BEAM_ARGS,
):
    """ExampleGen's executor on `data_root`: its tf.Examples under `out` (returned), and
    ours writes the same rows as Parquet under `parquet_examples_dir(out)`."""
    return run_example_gen_outputs(
        executor_class, data_root, out, exec_properties, beam_pipeline_args
    )["examples"]


def parquet_examples_dir(out: Path) -> Path:
    return out.with_name(f"{out.name}-parquet")


def run_example_gen_outputs(
    executor_class,
    data_root: Path,
    out: Path,
    exec_properties: dict,
    beam_pipeline_args: tuple[str, ...] = IN_MEMORY_BEAM_ARGS,
) -> dict:
    """`run_example_gen`, returning both outputs (`examples`, `parquet_examples`); a stock
    executor writes the first alone."""
    examples = standard_artifacts.Examples()
    examples.uri = str(out)
    parquet_examples = standard_artifacts.Examples()
    parquet_examples.uri = str(parquet_examples_dir(out))
    properties = {
        "input_base": str(data_root),
        "output_config": proto_utils.proto_to_json(
            example_gen_utils.make_default_output_config(
                proto_utils.json_to_proto(exec_properties["input_config"], example_gen_pb2.Input())
            )
        ),
        "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE,
        "output_file_format": example_gen_pb2.FORMAT_TFRECORDS_GZIP,
        **exec_properties,
    }
    executor = beam_executor(executor_class, beam_pipeline_args, out)
    executor.Do({}, {"examples": [examples], "parquet_examples": [parquet_examples]}, properties)
    return {"examples": examples, "parquet_examples": parquet_examples}


def split_records(examples) -> dict[str, list[bytes]]:
    """Each split's tf.Examples, serialized deterministically (map order is not), sorted."""
    return {
        split: sorted(
            tf.train.Example.FromString(record.numpy()).SerializeToString(deterministic=True)
            for f in sorted(Path(examples.uri, f"Split-{split}").glob("*.gz"))
            for record in tf.data.TFRecordDataset(str(f), compression_type="GZIP")
        )
        for split in ("train", "eval")
    }


# --- bad data: the corruptions a run must stop on, and the feature each names ---
# For the local run's data gate and the executed Kubeflow package's failed run.


def _missing_column(header, rows):
    return [c for c in header if c != "payment_type"], rows


def wrong_type(header, rows):
    return header, [
        {**r, "fare": "twelve dollars"} if i % 3 == 0 else r for i, r in enumerate(rows)
    ]


def _label_outside_schema(header, rows):
    return header, [{**r, "tips": "-5.0"} if i % 10 == 0 else r for i, r in enumerate(rows)]


def _nan_in_numeric(header, rows):
    return header, [{**r, "trip_miles": "NaN"} if i % 10 == 0 else r for i, r in enumerate(rows)]


CASES = {
    "missing_column": (_missing_column, ["feature 'payment_type'", "Column dropped"]),
    "wrong_type": (wrong_type, ["feature 'fare'", "type"]),
    "label_outside_schema": (_label_outside_schema, ["feature 'tips'", "Out-of-range"]),
    # "NaN" is a float to CSV type inference: without the schema's disallow_nan it
    # trained a model that answers one constant, and the run said nothing of NaN.
    "nan_in_numeric": (
        _nan_in_numeric,
        ["feature 'trip_miles'", "Float feature has NaN values", "NaN of"],
    ),
}
# The feature each case's anomaly names, as the run report lists it.
ANOMALOUS_FEATURE = {
    "missing_column": "payment_type",
    "wrong_type": "fare",
    "label_outside_schema": "tips",
    "nan_in_numeric": "trip_miles",
}


# --- requests to the JSON serving signature, built from eval rows ---
# For the TF Serving and KServe tests that call the served model as a client does.


# Eval rows per request.
ROWS = 40


def rows_with_gaps(data, spec) -> list[dict[str, str]]:
    """Eval rows, with a float, a string and a zero-is-missing int cell emptied here and there."""
    rows = [dict(r) for r in data["raw_rows"][:ROWS]]
    for i, row in enumerate(rows):
        if i % 3 == 0:
            row["fare"] = ""
        if i % 4 == 0:
            row["company"] = ""
        if i % 5 == 0:
            row["trip_start_hour"] = ""
        if row.get("trip_seconds", "") == "":
            row["trip_seconds"] = "600"  # an int numeric feature: no JSON marker for missing
    return rows


def examples(rows, spec) -> list[bytes]:
    return serialize_rows(rows, load_schema(), drop=spec.serving_excluded_columns())


def contract(served):
    path = served["base"] / "1" / CONTRACT_ASSET
    return contract_from_dicts(json.loads(path.read_text()))


def instances(served, serialized: list[bytes]) -> list[dict]:
    inputs = contract(served)
    found = [instance_from_example(tf.train.Example.FromString(s), inputs) for s in serialized]
    assert all(i is not None for i in found)
    return found


# --- the stand-in harness (kubeflow/standin_harness/), in the current-KFP-SDK environment
# (kubeflow/kfp_sdk/): for the tests that check the compiled package with a current kfp
# SDK, or run it.


KFP_SDK_PROJECT = REPO_ROOT / "kubeflow" / "kfp_sdk"
STANDIN_HARNESS = REPO_ROOT / "kubeflow" / "standin_harness"


def uv_binary() -> str:
    bundled = REPO_ROOT / ".tools" / "bin" / "uv"
    found = str(bundled) if bundled.exists() else shutil.which("uv")
    if not found:
        pytest.fail("uv not found: run the tests through ./dev test, which installs it")
    return found


def run_in_standin_harness(script: str, *args: str, timeout: int) -> subprocess.CompletedProcess:
    """`python kubeflow/standin_harness/SCRIPT ARGS...` in the current-KFP-SDK environment."""
    command = [uv_binary(), "run", "--project", str(KFP_SDK_PROJECT), "--locked", "python"]
    return subprocess.run(
        [*command, str(STANDIN_HARNESS / script), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# The checked-in settings moved onto an in-cluster MinIO, credentials from its secret.
MINIO = {
    "pipeline_root": "s3://mlpipeline/tfx/taxi",
    "serving_model_dir": "s3://mlpipeline/serving/taxi",
    "object_store": {
        "endpoint": "http://minio-service.kubeflow:9000",
        "region": "us-east-1",
        "credentials": {
            "secret": "mlpipeline-minio-artifact",
            "access_key_id_key": "accesskey",
            "secret_access_key_key": "secretkey",
        },
    },
}


# The line a replica (or a TrainJob's node) logs before it calls run_fn (kubeflow/tfjob/replica.py).
TRAINING_STARTS = "Training model on this replica"


def image_environment() -> dict[str, str]:
    """What a replica's container has before its own `env`: the image's variables."""
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "PYTHONUNBUFFERED": "1",
        "TF_CPP_MIN_LOG_LEVEL": "1",
    }


def multi_node_settings(engine: str, **changes):
    """The template's Kubeflow settings training on `engine` (tfjob, trainjob) with
    gpu_multi_node, the step's own pod small, changed by `changes` (dotted paths; None
    removes a key)."""
    import copy

    from kubeflow.package_settings import pipeline_step_ids
    from kubeflow.settings import parse_settings

    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    raw["training"]["engine"] = engine
    raw["config_variant"] = "gpu_multi_node"
    raw["components"][dag.TRAINER] = {"resources": {"cpu_request": "1", "memory_request": "2Gi"}}
    for path, value in changes.items():
        *parents, key = path.split(".")
        target = raw
        for part in parents:
            target = target.setdefault(part, {})
        if value is None:
            target.pop(key, None)
        else:
            target[key] = copy.deepcopy(value)
    return parse_settings(raw, pipeline_step_ids())


def check_multi_node(settings) -> None:
    """kubeflow.settings.training.check_training on `settings`, as the compile calls it."""
    from kubeflow.settings.training import check_training
    from trainer.fork.config_file import variant

    check_training(
        settings.training,
        variant(settings.config_variant).trainer.runtime,
        config_variant=settings.config_variant,
        trainer=settings.placement_for(dag.TRAINER),
        trainer_id=dag.TRAINER,
    )


# --- the compiled Kubeflow package, executed step by step with kfp.local ---
# Settings, compile, execution and what the steps recorded, for every executed-package test.


TRAIN_STEPS = 20
EXECUTION_TIMEOUT_S = 900
RETRIED = (*dag.DAG_STEPS.beam_ids, dag.TRAINER)
INFERENCE_SERVICE = "taxi-big-tipper"
SERVING = {
    "inference_service": INFERENCE_SERVICE,
    "service_account": "kserve-models",
    "ready_timeout": "2m",
    "smoke": {"rows": 8},
}


def local_settings(tmp: Path, data_root: Path | str, **overrides) -> Path:
    """kubeflow/pipeline.yaml with local paths, a CPU variant and few train steps.

    `overrides` replace top-level settings after that (object-store paths, say).
    """
    settings = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    settings.update(
        pipeline_root=str(tmp / "pipeline_root"),
        serving_model_dir=str(tmp / "serving"),
        # The steps read the schema where the image holds the project: here, this checkout.
        project_root_in_image=str(REPO_ROOT),
        config_variant="local_cpu",
        parameters={"data_root": str(data_root), "train_steps": TRAIN_STEPS},
        # A thousand rows: Beam in one process beats starting a worker per core.
        beam={"defaults": {"engine": "direct", "options": {"direct_running_mode": "in_memory"}}},
        # The checked-in policy, without the minute's wait before a retry.
        retries={
            "defaults": {"max_retries": 0},
            "components": {step: {"max_retries": 2, "backoff": "0s"} for step in RETRIED},
        },
    )
    settings.pop("schedule", None)
    settings.update(overrides)
    path = tmp / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


# The backend every execution plays: the newest release read, its driver's
# executor input, and Argo set up as docs/kubeflow-operations.md says (no
# cluster-wide templateDefaults retryStrategy, so a failed step gets its own
# retries). Stock 2.17's OnError default is tested in tests/test_retries.py.
RECOMMENDED_CLUSTER = ("--backend-release", "2.17.0", "--template-retry-policy", "none")


def execute(
    package: Path, tmp: Path, name: str, *options: str, expect_success: bool = True
) -> dict:
    """The package executed by run_compiled.py; `options` are its further flags."""
    summary_file = tmp / f"{name}.json"
    proc = run_in_standin_harness(
        "run_compiled.py",
        "--package", str(package),
        "--pipeline-root", str(tmp / "pipeline_root"),
        "--python", sys.executable,
        "--summary", str(summary_file),
        *RECOMMENDED_CLUSTER,
        *options,
        timeout=EXECUTION_TIMEOUT_S,
    )  # fmt: skip
    assert summary_file.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    suite_profile.record_execution(name, summary)
    if expect_success:
        failed = {
            k: v["log_tail"]
            for k, v in summary["steps"].items()
            if v["status"] not in ("SUCCESS", "CACHED")
        }
        assert proc.returncode == 0 and summary["succeeded"], (summary["error"], failed)
    return summary


def compile_package(settings_file: Path, package: Path, *flags: str) -> Path:
    """`python -m kubeflow.compile --config SETTINGS --output PACKAGE [flags]` (`--scoring`,
    say), run in this process: its `main` is the command (tests/test_kubeflow.py runs the
    command itself), and a process of its own would import TFX once more for each package."""
    from kubeflow import compile as kfp_compile

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = kfp_compile.main(["--config", str(settings_file), "--output", str(package), *flags])
    assert code == 0, printed.getvalue()
    return package


def schema_dir_in_project(tmp: Path, **options) -> str:
    """A span-reading schema dir where settings.schema_dir allows it (inside the project),
    under the ignored build/; its path relative to the project."""
    # tmp's name repeats in each xdist worker's base temp: the worker's id keeps it unique.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    relative = Path("build") / "test-schemas" / f"{worker}-{tmp.name}"
    span_schema_dir(REPO_ROOT / relative, **options)
    return str(relative)


def output_metadata(step: dict, output: str) -> dict:
    """The metadata the step's executor recorded on its (first) `output` artifact."""
    return step["executor_output"]["artifacts"][output]["artifacts"][0]["metadata"]


def assert_scores_raw_rows(model_dir: Path, rows: list[dict[str, str]], spec) -> None:
    """The served signature turns raw CSV rows into one float32 probability each."""
    serve = tf.saved_model.load(str(model_dir)).signatures[SERVING_SIGNATURE]
    serialized = serialize_rows(rows, load_schema(), drop=spec.serving_excluded_columns())
    probabilities = serve(examples=tf.constant(serialized))[PROBABILITIES_OUTPUT].numpy()
    assert probabilities.shape == (len(rows), 1) and probabilities.dtype == np.float32
    assert np.all((probabilities >= 0) & (probabilities <= 1))


def step_record(step: dict) -> StepRecord:
    """What a step recorded about its attempts, beside its outputs."""
    first_output = sorted(uri for uris in step["outputs"].values() for uri in uris)[0]
    return StepRecord.from_json((Path(first_output).parent / RECORD_FILE).read_text())


def status_report(execution: dict) -> tuple[str, dict[str, str]]:
    """The RunStatus exit handler's page, and the state it gives each step."""
    step = execution["steps"][kubeflow_steps.RUN_STATUS]
    assert step["status"] == "SUCCESS", step["log_tail"]
    (report,) = step["outputs"]["report"]
    html = Path(report).read_text()
    states = {e["data-step"]: e["data-state"] for e in with_attr(parse(html), "data-step")}
    return html, states


# --- the compiled package on an S3-compatible store ---
# Settings pointing at the S3 stand-in, and executions with only a pod's environment.


SECRET = "pipeline-store"
PIPELINE_ROOT = "s3://pipelines/tfx/taxi"
SERVING_DIR = "s3://pipelines/serving/taxi"
DATA_ROOT = "s3://pipelines/data/taxi"


def s3_settings(tmp: Path, endpoint: str, **overrides) -> Path:
    """`local_settings` with the data, the pipeline root and the serving dir in the
    S3 stand-in's bucket; `overrides` as local_settings takes them."""
    settings = {
        "pipeline_root": PIPELINE_ROOT,
        "serving_model_dir": SERVING_DIR,
        "parameters": {"data_root": DATA_ROOT, "train_steps": TRAIN_STEPS},
        "object_store": {
            "endpoint": endpoint,
            "region": "us-east-1",
            "credentials": {
                "secret": SECRET,
                "access_key_id_key": "accesskey",
                "secret_access_key_key": "secretkey",
            },
        },
    }
    return local_settings(tmp, DATA_ROOT, **{**settings, **overrides})


def execute_isolated(
    package: Path,
    tmp: Path,
    name: str,
    secret: dict,
    cache_root: Path | None = None,
    options: tuple[str, ...] = (),
    **kwargs,
) -> dict:
    """`execute` with only a pod's environment and the store's secret; `options`: its flags."""
    secret_file = tmp / f"{name}-secret.json"
    secret_file.write_text(json.dumps(secret))
    cache = ("--cache-root", str(cache_root)) if cache_root else ()
    return execute(
        package,
        tmp,
        name,
        "--isolated-env",
        "--secret",
        f"{SECRET}={secret_file}",
        *cache,
        *options,
        **kwargs,
    )


def lowest_score_trials_model(trials: Iterable[dict]) -> dict:
    """The ModelConfig values of the completed trial with the lowest score, from the trials'
    own files (`trial.json`, not a runner's best.yaml): the earlier trial on a tie."""
    import keras_tuner

    from trainer.search_space import search_space
    from trainer.tuning import model_values

    completed = [t for t in trials if t["status"] == "COMPLETED"]
    best = min(completed, key=lambda t: (t["score"], int(t["trial_id"])))
    hp = keras_tuner.HyperParameters()
    hp.values.update(best["hyperparameters"]["values"])
    return model_values(search_space(hp))


# --- ports ------------------------------------------------------------------------------------


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A port bound and never listened on, held for the block: connections to it are
    refused, and no other process can take it meanwhile (a probed "free" port could be)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


# --- the Evaluator ----------------------------------------------------------------------------
# One Evaluator execution on a finished run's artifacts, and TFMA's outputs read back the way
# `tfma` reads them, for the tests that compare the batched metrics with TFMA's evaluator.

# Regression errors may differ in the last float32 bits: TFMA sums MAE and MSE in Python floats
# one example at a time, Keras sums RMSE in float32 per 1,000 examples, the batched path sums
# float64 with numpy. Everything else (counts, accuracies, precision, recall, matrices) is equal.
TOLERANT_METRICS = ("mean_absolute_error", "mean_squared_error", "root_mean_squared_error")
REGRESSION_RELATIVE_TOLERANCE = 1e-6


def latest_artifact(directory: Path) -> Path:
    return max(directory.iterdir(), key=lambda p: int(p.name))


def _artifact(cls, uri: Path, splits: list[str] | None = None):
    artifact = cls()
    artifact.uri = str(uri)
    if splits:
        artifact.split_names = artifact_utils.encode_split_names(splits)
    return artifact


def evaluator_inputs(run_root: Path, baseline: Path, out: Path, spec: Path):
    """(input_dict, output_dict, exec_properties) of an Evaluator execution on the run's
    eval split, its candidate against `baseline`, as TFX hands them to the executor."""
    examples = _artifact(
        standard_artifacts.Examples,
        latest_artifact(run_root / "ExampleGen" / "examples"),
        ["train", "eval"],
    )
    model = _artifact(standard_artifacts.Model, latest_artifact(run_root / "Trainer" / "model"))
    baseline_model = _artifact(standard_artifacts.Model, baseline)
    baseline_model.set_int_custom_property("has_model", 1)
    evaluation = _artifact(standard_artifacts.ModelEvaluation, out / "evaluation")
    blessing = _artifact(standard_artifacts.ModelBlessing, out / "blessing")
    return (
        {"examples": [examples], "model": [model], "baseline_model": [baseline_model]},
        {"evaluation": [evaluation], "blessing": [blessing]},
        {
            "eval_config": proto_utils.proto_to_json(build_eval_config(load_spec(spec))),
            "example_splits": json.dumps(["eval"]),
            "fairness_indicator_thresholds": "null",
        },
    )


def without_evaluation_record(baseline: Path, copy: Path) -> Path:
    """A copy of a served baseline without the record of its pushing run's evaluation,
    so that the Evaluator scores it (components/evaluator/record.py)."""
    shutil.copytree(baseline, copy)
    (copy / "Format-Serving" / SERVED_EVALUATION_FILE).unlink(missing_ok=True)
    return copy


def run_evaluator(executor_class, out: Path, inputs: tuple) -> None:
    """Runs `executor_class` on `evaluator_inputs(...)`, Beam in memory."""
    beam_executor(executor_class, IN_MEMORY_BEAM_ARGS, out).Do(*inputs)


def evaluate(executor_class, run_root: Path, baseline: Path, out: Path, spec: Path):
    """Runs `executor_class` on the run's eval split, candidate against `baseline`;
    returns (its output directory, the blessing artifact)."""
    inputs = evaluator_inputs(run_root, baseline, out, spec)
    run_evaluator(executor_class, out, inputs)
    return out / "evaluation", inputs[1]["blessing"][0]


def _metric_value(value) -> object:
    which = value.WhichOneof("type")
    return value.double_value.value if which == "double_value" else str(getattr(value, which))


def read_evaluation(out: Path) -> tuple[dict, dict, tfma.ValidationResult]:
    """({slice: {metric key: value}}, {slice: {plot key: value}}, validation) as TFMA reads them."""
    metrics = {
        str(m.slice_key): {str(kv.key): _metric_value(kv.value) for kv in m.metric_keys_and_values}
        for m in tfma_writer.load_and_deserialize_metrics(str(out))
    }
    plots = {
        str(p.slice_key): {str(kv.key): str(kv.value) for kv in p.plot_keys_and_values}
        for p in tfma_writer.load_and_deserialize_plots(str(out))
    }
    return metrics, plots, tfma.load_validation_result(str(out))


def metrics_by_tfma(uri: str, model_name: str | None = None) -> dict[tuple[str, str], float]:
    """{(slice, metric): value} of one model in the evaluation at `uri`, as TFMA's own
    `tfma.load_eval_result` reads it (not the report's parser), slices named as the
    report names them. The candidate's include each `<metric>_diff` vs. the baseline."""
    values = {}
    for slice_key, metrics in tfma.load_eval_result(uri, model_name=model_name).slicing_metrics:
        slice_name = ", ".join(f"{c} = {v}" for c, v in slice_key) or OVERALL_SLICE
        for by_class in metrics.values():
            for by_name in by_class.values():
                for name, value in by_name.items():
                    if "doubleValue" in value:
                        values[slice_name, name] = float(value["doubleValue"])
    return values


def candidate_vs_baseline_by_tfma(uri: str) -> dict[tuple[str, str, str], float]:
    """{(slice, metric, "candidate" | "baseline" | "diff"): value}, TFMA's, for a run with a
    baseline: the report's metrics table as it should be."""
    values = {}
    for (slice_name, name), value in metrics_by_tfma(uri, "candidate").items():
        if name.endswith("_diff"):
            values[slice_name, name.removesuffix("_diff"), "diff"] = value
        else:
            values[slice_name, name, "candidate"] = value
    for (slice_name, name), value in metrics_by_tfma(uri, "baseline").items():
        values[slice_name, name, "baseline"] = value
    return values


def assert_models_differ(tfma_values: dict[tuple[str, str, str], float]) -> None:
    """The candidate and the baseline score differently overall, so that a report that
    swaps or duplicates their values cannot equal TFMA's."""
    overall = OVERALL_SLICE
    candidate = tfma_values[overall, "binary_accuracy", "candidate"]
    baseline = tfma_values[overall, "binary_accuracy", "baseline"]
    assert abs(candidate - baseline) > 1e-3, (candidate, baseline)


def _failures(validation: tfma.ValidationResult) -> set[tuple[str, str]]:
    return {
        (str(s.slice_key), str(f.metric_key))
        for s in validation.metric_validations_per_slice
        for f in s.failures
    }


def assert_same_evaluation(ours: tuple, theirs: tuple) -> None:
    """Same slices, keys and values (regression errors to a relative 1e-6), plots, validation.

    Two evaluations without metrics are refused, not found equal: an Evaluator that
    wrote nothing must not pass as one that agrees.
    """
    for name, evaluation in (("ours", ours), ("theirs", theirs)):
        assert evaluation[0], f"{name}: no metrics at all; the evaluation wrote none"
        empty = sorted(key for key, values in evaluation[0].items() if not values)
        assert not empty, f"{name}: slices without metrics: {empty}"
    assert ours[0].keys() == theirs[0].keys()
    for slice_key, values in theirs[0].items():
        assert ours[0][slice_key].keys() == values.keys(), slice_key
        for key, expected in values.items():
            got = ours[0][slice_key][key]
            if isinstance(expected, float) and math.isnan(expected):
                assert math.isnan(got), (slice_key, key)
            elif any(f'name: "{name}"' in key for name in TOLERANT_METRICS):
                tolerance = REGRESSION_RELATIVE_TOLERANCE
                assert got == pytest.approx(expected, rel=tolerance, abs=tolerance), (
                    slice_key,
                    key,
                )
            else:
                assert got == expected, (slice_key, key)
    assert ours[1] == theirs[1]
    assert ours[2].validation_ok == theirs[2].validation_ok
    assert _failures(ours[2]) == _failures(theirs[2])
    assert ours[2].missing_slices == theirs[2].missing_slices


def taxi_schema_dir_copy(root: Path, *, keys: bool = True) -> Path:
    """A copy of the embedded task's dataset directory (its spec names `trip_id` as the
    key), for a test to add to; `keys=False`: with no `keys:` line."""
    schema_dir = shutil.copytree(REPO_ROOT / "schemas" / "chicago_taxi", root / "ds")
    if not keys:
        spec = schema_dir / "dataset.yaml"
        lines = spec.read_text().splitlines(keepends=True)
        spec.write_text("".join(line for line in lines if not line.startswith("keys:")))
    return schema_dir


def fake_version(base: Path, version: str, spec, *, complete: bool = True) -> Path:
    """A version directory as the Pusher leaves it: the spec asset, saved_model.pb last."""
    directory = base / version
    (directory / SPEC_ASSET).parent.mkdir(parents=True)
    (directory / SPEC_ASSET).write_text(json.dumps(spec.to_dict()))
    if complete:
        (directory / "saved_model.pb").write_bytes(b"")
    return directory


# --- a local run's artifacts, as the Kubeflow RunReport step takes them ------------------------
# RunReport's inputs by the type of the artifact that fills them in a local run's ML Metadata.
RUN_REPORT_INPUT_TYPES = {
    "examples": "Examples",
    "drift": "components.DataDrift",
    "statistics": "ExampleStatistics",
    "anomalies": "ExampleAnomalies",
    "model_run": "ModelRun",
    "evaluation": "ModelEvaluation",
    "blessing": "ModelBlessing",
    "pushed_model": "PushedModel",
    "baseline_model": "Model",
}


def metadata_store_of(output_dir: Path):
    """The local run's ML Metadata store, opened with MLMD's own client."""
    from ml_metadata.metadata_store import metadata_store
    from tfx.orchestration import metadata as tfx_metadata

    return metadata_store.MetadataStore(
        tfx_metadata.sqlite_metadata_connection_config(str(output_dir / "metadata.sqlite"))
    )


def run_report_inputs(output_dir: Path, run_id: str) -> dict[str, object]:
    """RunReport's input key -> the TFX artifact of local run `run_id` that fills it:
    ExampleGen's examples (Transform's carry no span), LatestServedModel's Model (the
    Trainer's carries no `has_model`)."""
    from tfx.types import artifact_utils

    store = metadata_store_of(output_dir)
    run = store.get_context_by_type_and_name("pipeline_run", run_id)
    types_by_id = {t.id: t for t in store.get_artifact_types()}
    found = {}
    for artifact in store.get_artifacts_by_context(run.id):
        name = types_by_id[artifact.type_id].name
        if name == "Examples" and "span" not in artifact.custom_properties:
            continue
        if name == "Model" and "has_model" not in artifact.custom_properties:
            continue
        found[name] = artifact_utils.deserialize_artifact(types_by_id[artifact.type_id], artifact)
    return {key: found[name] for key, name in RUN_REPORT_INPUT_TYPES.items()}


def checkout_files() -> list[str]:
    """This checkout's files as git sees them: tracked, and new ones not ignored."""
    root = Path(__file__).resolve().parents[1]
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return sorted(f for f in listed.split("\0") if f and (root / f).is_file())
