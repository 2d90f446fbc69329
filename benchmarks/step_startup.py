"""What each step of the compiled packages loads before its work: start seconds, peak memory.

    ./dev exec python -m benchmarks.step_startup                 # this tree
    ./dev exec python -m benchmarks.step_startup --base main     # main beside this tree
    ./dev exec python -m benchmarks.step_startup --repeat 3      # best of three
    ./dev exec python -m benchmarks.step_startup --step RunStatus --base main  # one step
    ./dev exec python -m benchmarks.step_startup --step Pusher --base main  # by its step's name

Every executor that the training, scoring and tuning packages name (compiled
here from kubeflow/pipeline.yaml, with `serving:` set so that the Deploy step
is in) is started in a fresh interpreter, twice over:

- **executor**: `kubeflow.step_entrypoint` imported, then the executor class:
  what the project's own modules load for that step;
- **pod**: what a pod runs before the executor's `Do`, in
  `kubeflow.step_entrypoint.run`'s order: tensorflow-io's registration, TFX's
  container entrypoint (`kubeflow_v2_run_executor`), KFP's artifact types,
  then the executor class; for a light step (kubeflow/light_step.py), the
  function its pod runs instead;
- **run** (light steps only): `kubeflow.step_entrypoint.run` on a driver-shaped
  executor input (`light_step_arguments`), the step's work and its executor
  output file included.

Each row gives the wall seconds of those imports, the process's peak resident
memory (Linux's `VmHWM`; `ru_maxrss` elsewhere) and which of TensorFlow, TFMA
and Beam it loaded. With `--base REV` the same rows are taken from REV's
files (`git archive`, in a temporary directory) with the same interpreter, so
both trees run in one sitting at one load; the executors are those this
tree's packages name. The load average is printed before and after:
docs/benchmarks.md compares only figures taken below 1.5 on its two cores.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
EXECUTOR_FLAG = "--executor_class_path"
INVOCATION_FLAG = "--json_serialized_invocation_args"
# Modules whose presence the table reports, by the name it shows.
HEAVY = {"TensorFlow": "tensorflow", "TFMA": "tensorflow_model_analysis", "Beam": "apache_beam"}
EXECUTOR = "executor"
POD = "pod"
RUN = "run"
# Run in a fresh interpreter at a tree's root: argv[1] the mode, argv[2] the class path,
# argv[3] (run) a file holding the step's arguments. The pod's preamble follows
# kubeflow.step_entrypoint.run (written out here, so that an older tree, without
# light steps, is measured the same way).
_PROBE = """
import importlib, json, resource, sys, time
mode, class_path = sys.argv[1], sys.argv[2]
start = time.perf_counter()
from kubeflow import step_entrypoint
light = getattr(step_entrypoint, "light_step", None)
if mode == "run":
    with open(sys.argv[3]) as f:
        code = step_entrypoint.run(json.load(f))
    if code:
        raise SystemExit(f"the step exited with {code}")
elif mode == "pod" and light is not None and class_path in light.LIGHT_STEPS:
    light.step_function(class_path)
else:
    if mode == "pod":
        step_entrypoint.object_store.register_filesystems()
        from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor
        step_entrypoint.register_kfp_artifact_types()
    module, name = class_path.rsplit(".", 1)
    getattr(importlib.import_module(module), name)
seconds = time.perf_counter() - start
# This process's own peak (VmHWM, kB): ru_maxrss keeps the high-water mark of the
# process it was forked from across exec, a whole pytest worker's under the tests.
try:
    with open("/proc/self/status") as f:
        peak_kb = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({
    "seconds": seconds,
    "peak_mb": peak_kb / 1024,
    "modules": sorted(m for m in sys.modules if "." not in m),
}))
"""

# Run in ONE fresh interpreter at a tree's root: argv[1:] executor classes, imported in
# turn after the pod's first import (EXECUTOR's, one after the other); after each, the
# top-level modules the process holds and its peak so far.
_IN_TURN_PROBE = """
import importlib, json, sys, time
from kubeflow import step_entrypoint
for class_path in sys.argv[1:]:
    start = time.perf_counter()
    module, name = class_path.rsplit(".", 1)
    getattr(importlib.import_module(module), name)
    seconds = time.perf_counter() - start
    with open("/proc/self/status") as f:
        peak_kb = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
    print(json.dumps({
        "class_path": class_path,
        "seconds": seconds,
        "peak_mb": peak_kb / 1024,
        "modules": sorted(m for m in sys.modules if "." not in m),
    }))
"""


@dataclass(frozen=True)
class Startup:
    """One executor started in a fresh process."""

    seconds: float
    peak_mb: float
    modules: frozenset[str]

    def loads(self) -> list[str]:
        """The heavy libraries it loaded, by the names the table shows."""
        return [label for label, module in HEAVY.items() if module in self.modules]


def executor_classes(spec: dict) -> dict[str, list[str]]:
    """Every `--executor_class_path` a compiled spec's containers name, in the spec's order,
    with the container's arguments."""
    classes = {}
    for executor in spec["deploymentSpec"]["executors"].values():
        args = executor.get("container", {}).get("args", [])
        if EXECUTOR_FLAG in args:
            classes[args[args.index(EXECUTOR_FLAG) + 1]] = args
    return classes


def executor_steps(spec: dict) -> dict[str, str]:
    """Each `--executor_class_path` a compiled spec names -> the step it runs, by the
    executor's name in the spec (`Pusher_executor` -> Pusher)."""
    found = {}
    for name, executor in spec["deploymentSpec"]["executors"].items():
        args = executor.get("container", {}).get("args", [])
        if EXECUTOR_FLAG in args:
            found[args[args.index(EXECUTOR_FLAG) + 1]] = name.removesuffix("_executor")
    return found


def compiled_packages(tmp: Path) -> dict[str, dict[str, list[str]]]:
    """package -> the executor classes it names, each with its container's arguments
    (`compiled_specs`)."""
    return {package: executor_classes(spec) for package, spec in compiled_specs(tmp).items()}


def compiled_specs(tmp: Path) -> dict[str, dict]:
    """package -> its compiled spec: training, scoring and tuning, compiled in
    this process from kubeflow/pipeline.yaml with `serving:` set (the Deploy step) and the
    embedded dataset keyed on `trip_id` (scoring needs a key)."""
    from kubeflow import compile as kfp_compile
    from kubeflow import package_settings
    from kubeflow.settings import DEFAULT_SETTINGS_FILE

    raw = yaml.safe_load(DEFAULT_SETTINGS_FILE.read_text())
    raw["serving"] = {"inference_service": "taxi", "service_account": "kserve-models"}
    settings_file = tmp / "pipeline.yaml"
    settings_file.write_text(yaml.safe_dump(raw))
    schema_dir = tmp / "dataset"
    schema_dir.mkdir()
    for name in ("schema.pbtxt", "dataset.yaml"):
        (schema_dir / name).write_text((REPO_ROOT / "schemas" / "chicago_taxi" / name).read_text())
    with (schema_dir / "dataset.yaml").open("a") as f:
        f.write("keys: [trip_id]\n")
    training = kfp_compile.compile_pipeline(package_settings.load_package_settings(settings_file))
    scoring = kfp_compile.compile_scoring_pipeline(
        package_settings.load_scoring_settings(settings_file), schema_dir
    )
    tuning = kfp_compile.compile_tuning_pipeline(
        package_settings.load_tuning_settings(settings_file)
    )
    return {"training": training[0], "scoring": scoring[0], "tuning": tuning[0]}


# What a light step's run is handed (`light_step_arguments`): its parameters and its
# outputs' types, as the driver would hand them; the files it reads (`files`, text with
# ROOT filled in, or bytes); what its outputs show once it ran (`shows`: output -> text
# each holds); `dirs`, empty directories it finds among them.
_HTML = {"schemaTitle": "system.HTML", "schemaVersion": "0.0.1"}
_STRING = {"instanceSchema": "title: tfx.String\ntype: object\n"}
_VERSIONED_SPANS = "span-{SPAN}/v{VERSION}/*.csv"
# Stands for the run's root directory in a parameter (`light_step_arguments` fills it in).
ROOT = "{root}"
# The modification time of the files a light step reads (`files`): one fingerprint for
# every run of the same step.
FILES_MTIME = 1_704_164_645
# RunStatus's run: its Trainer and Evaluator succeeded and its Pusher failed, so the
# report reads the training curves and the evaluation (issue 62: without TensorFlow or
# TFMA). Their records and outputs are under the run's directory, as the steps left them.
_TRAINED_DAG = {
    "order": ["Trainer", "Evaluator", "Pusher"],
    "upstream": {"Evaluator": ["Trainer"], "Pusher": ["Evaluator"]},
    "outputs": {"model_run": ["Trainer", "model_run"], "evaluation": ["Evaluator", "evaluation"]},
}
_RUN = f"{ROOT}/run-1"


def _step_record(outcome: str, outputs: dict[str, str]) -> str:
    """A step's record (kubeflow/steps/step_records.py) of one attempt, with its outputs."""
    from kubeflow.steps import step_records

    attempt = step_records.Attempt(0, FILES_MTIME * 1000, FILES_MTIME * 1000 + 1, outcome)
    return step_records.StepRecord(
        attempts=(attempt,),
        outputs={name: (step_records.OutputArtifact(uri),) for name, uri in outputs.items()},
    ).to_json()


def trained_and_evaluated_run() -> dict[str, str | bytes]:
    """The files of a run whose Trainer and Evaluator succeeded: their records, the
    Trainer's event file (one epoch's loss) and the Evaluator's metrics, validation and
    config, in the formats TensorFlow and TFMA write, made without either."""
    from google.protobuf import json_format
    from tensorboard.compat.proto import event_pb2, summary_pb2

    from components.report import tfma_records
    from components.tfrecords import tfrecord_frames

    protos = tfma_records.protos()
    loss = summary_pb2.Summary.Value(tag="epoch_loss", simple_value=0.5)
    event = event_pb2.Event(step=0, summary=summary_pb2.Summary(value=[loss]))
    metrics = protos.MetricsForSlice()
    accuracy = metrics.metric_keys_and_values.add()
    accuracy.key.name = "binary_accuracy"
    accuracy.value.double_value.value = 0.75
    run = protos.EvalRun(version=importlib.metadata.version("tensorflow-model-analysis"))
    threshold = run.eval_config.metrics_specs.add().metrics.add(class_name="BinaryAccuracy")
    threshold.threshold.value_threshold.lower_bound.value = 0.5
    model_run, evaluation = "run-1/Trainer/model_run", "run-1/Evaluator/evaluation"
    return {
        "run-1/Trainer/step_record.json": _step_record(
            "succeeded", {"model_run": f"{_RUN}/Trainer/model_run"}
        ),
        "run-1/Evaluator/step_record.json": _step_record(
            "succeeded", {"evaluation": f"{_RUN}/Evaluator/evaluation"}
        ),
        "run-1/Pusher/step_record.json": _step_record("failed", {}),
        f"{model_run}/train/events.out.tfevents.{FILES_MTIME}.pod.1.v2": tfrecord_frames(
            [event.SerializeToString()]
        ),
        f"{evaluation}/metrics-00000-of-00001.tfrecord": tfrecord_frames(
            [metrics.SerializeToString()]
        ),
        f"{evaluation}/validations.tfrecord": tfrecord_frames(
            [protos.ValidationResult(validation_ok=True).SerializeToString()]
        ),
        f"{evaluation}/{tfma_records.EVAL_CONFIG_FILE}": json_format.MessageToJson(run),
    }


# The data gates' inputs: the statistics StatisticsGen, the anomalies ExampleValidator and
# the schema the importer wrote, in their files (components/gates/data_validation/executor.py), one
# numeric
# feature `fare` in two splits.
_STATISTICS = {"instanceSchema": "title: tfx.ExampleStatistics\ntype: object\n"}
_ANOMALIES = {"instanceSchema": "title: tfx.ExampleAnomalies\ntype: object\n"}
_SCHEMA = {"instanceSchema": "title: tfx.Schema\ntype: object\n"}
_INTEGER = {"instanceSchema": "title: tfx.Integer\ntype: object\n"}
_SPLITS = {"split_names": '["train", "eval"]'}
_UPSTREAM = "run-1/upstream"
_GATE_SCHEMA = 'feature {\n  name: "fare"\n  type: FLOAT\n}\n'


def gate_statistics(fares: list[float]) -> bytes:
    """A split's FeatureStats.pb: `fare`'s count and its quantile histogram (ten buckets)."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    statistics = statistics_pb2.DatasetFeatureStatisticsList()
    dataset = statistics.datasets.add(num_examples=len(fares))
    feature = dataset.features.add(type=statistics_pb2.FeatureNameStatistics.FLOAT)
    feature.path.step.append("fare")
    feature.num_stats.common_stats.num_non_missing = len(fares)
    histogram = feature.num_stats.histograms.add(type=statistics_pb2.Histogram.QUANTILES)
    ordered = sorted(fares)
    bounds = [ordered[k * len(ordered) // 10] for k in range(10)] + [ordered[-1]]
    for low, high in itertools.pairwise(bounds):
        histogram.buckets.add(low_value=low, high_value=high, sample_count=len(fares) / 10)
    return statistics.SerializeToString()


def gate_files(anomalous: bool = False, served: bool = False) -> dict[str, str | bytes]:
    """The gates' input files under the run: statistics of both splits, their anomalies
    (`anomalous`: the train split's `fare` out of its domain), the schema; with `served`, a
    served version under ROOT/serving whose training statistics had lower fares."""
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    fares = [float(n) for n in range(1, 21)]
    found: dict[str, str | bytes] = {f"{_UPSTREAM}/schema/schema.pbtxt": _GATE_SCHEMA}
    for split in ("train", "eval"):
        anomalies = anomalies_pb2.Anomalies()
        if anomalous and split == "train":
            info = anomalies.anomaly_info["fare"]
            info.short_description = "Out-of-range values"
            info.reason.add(
                type=anomalies_pb2.AnomalyInfo.FLOAT_TYPE_SMALL_FLOAT,
                short_description="Out-of-range values",
                description="Unexpectedly low values: -1 < 0",
            )
        found[f"{_UPSTREAM}/statistics/Split-{split}/FeatureStats.pb"] = gate_statistics(fares)
        found[f"{_UPSTREAM}/anomalies/Split-{split}/SchemaDiff.pb"] = anomalies.SerializeToString()
    if served:
        from components.serving.serving_dir import TRAINING_STATISTICS_FILE

        found["serving/7/saved_model.pb"] = b"model"
        found[f"serving/7/{TRAINING_STATISTICS_FILE}"] = gate_statistics([f / 2 for f in fares])
    return found


_FARE_DRIFT = json.dumps({"fare": {"measure": "quantile_shift", "threshold": 0.2, "mode": "fail"}})
_DRIFT_GATE = {
    # Nothing served yet: the gate passes and says so, without TFDV (so without TensorFlow).
    "parameters": {
        "serving_model_dir": f"{ROOT}/serving",
        "thresholds": _FARE_DRIFT,
        "rolled_out_record": "",
    },
    "files": gate_files,
    "inputs": {"statistics": (_STATISTICS, _SPLITS), "schema": (_SCHEMA, {})},
    "outputs": {"drift": {"instanceSchema": "title: components.DataDrift\ntype: object\n"}},
}


def _tfx_type(title: str) -> dict[str, str]:
    """A TFX artifact type as TFX's compiler writes it in the spec (an instance schema)."""
    return {"instanceSchema": f"title: {title}\ntype: object\n"}


_MODEL = _tfx_type("tfx.Model")
# A serving directory as the Pusher leaves it: version 3 served (a SavedModel's files, an
# empty directory, the Pusher's record), version 12 still being copied (no saved_model.pb):
# LatestServedModel copies version 3, whole.
SERVING_FILES: dict[str, str | bytes] = {
    "serving/3/saved_model.pb": b"\x08\x01saved model",
    "serving/3/variables/variables.index": b"index",
    "serving/3/variables/variables.data-00000-of-00001": b"\x00" * 64,
    "serving/3/assets.extra/push.json": '{"pushed_by": "ROOT/run-0/Pusher/pushed_model"}',
    "serving/12/variables/variables.index": b"half-copied",
}
SERVING_EMPTY_DIRS = ("serving/3/assets",)


def served_versions() -> dict[str, str | bytes]:
    return dict(SERVING_FILES)


def reported_run() -> dict[str, str | bytes]:
    """What RunReport reads of a run that trained, evaluated and deployed: the Trainer's
    event file and the Evaluator's output (`trained_and_evaluated_run`'s), as its inputs
    under run-1/upstream/, and the Deploy step's outcome."""
    moved = {
        "run-1/Trainer/model_run": "run-1/upstream/model_run",
        "run-1/Evaluator/evaluation": "run-1/upstream/evaluation",
    }
    found: dict[str, str | bytes] = {}
    for path, content in trained_and_evaluated_run().items():
        for old, new in moved.items():
            if path.startswith(old + "/"):
                found[new + path[len(old) :]] = content
    found["run-1/upstream/deployment/deployment.json"] = json.dumps(
        {
            "outcome": "promoted",
            "summary": "version 3 serves all traffic",
            "version": "3",
            "storage_uri": "s3://models/taxi/3",
            "url": None,
            "traffic": [{"tag": "latest", "percent": 100, "revision": "taxi-predictor-3"}],
        }
    )
    return found


# RunReport's inputs as the driver hands them: each artifact's type and metadata, as the
# step that wrote it reported them (ExampleGen's span both as the property and as the
# custom property TFX's entrypoint prefixes with `custom:`).
REPORTED_INPUTS = {
    "examples": (
        _tfx_type("tfx.Examples"),
        {
            "span": 4.0,
            "custom:span": 4.0,
            "version": 1.0,
            "split_names": '["train", "eval"]',
            "input_fingerprint": "split:single_split,num_files:1,total_bytes:9,xor_checksum:1",
        },
    ),
    "statistics": (_tfx_type("tfx.ExampleStatistics"), {"span": 4.0}),
    "anomalies": (_tfx_type("tfx.ExampleAnomalies"), {"span": 4.0}),
    "drift": (_tfx_type("components.DataDrift"), {}),
    "model_run": (_tfx_type("tfx.ModelRun"), {}),
    "evaluation": (_tfx_type("tfx.ModelEvaluation"), {}),
    "blessing": (_tfx_type("tfx.ModelBlessing"), {"blessed": 1.0}),
    "baseline_model": (_MODEL, {"has_model": 0.0}),
    "pushed_model": (_tfx_type("tfx.PushedModel"), {"pushed": 0.0}),
    "deployment": (_tfx_type("kubeflow_steps.Deployment"), {"outcome": "promoted"}),
}
_RUN_REPORT_PARAMETERS = {
    "pipeline_name": "taxi",
    "component_ids": json.dumps(["ExampleGen", "Trainer", "Evaluator", "Pusher", "Deploy"]),
    "hyperparameters": "null",
}
_METRICS = {"schemaTitle": "system.Metrics", "schemaVersion": "0.0.1"}
PUSHER = "components.serving.push.component.NoDuplicatePushExecutor"
# The Trainer's candidate, unlike the served version 3 (SERVING_FILES): a SavedModel's files
# and an empty directory under the Model artifact.
CANDIDATE_DIR = f"{_UPSTREAM}/model/Format-Serving"
CANDIDATE_FILES: dict[str, str | bytes] = {
    f"{CANDIDATE_DIR}/saved_model.pb": b"\x08\x01candidate",
    f"{CANDIDATE_DIR}/variables/variables.index": b"candidate index",
    f"{CANDIDATE_DIR}/variables/variables.data-00000-of-00001": b"\x01" * 64,
}


def pushed_candidate() -> dict[str, str | bytes]:
    """What the Pusher reads: the serving directory, the candidate, the statistics of both
    splits (the train split's go into the version) and the Evaluator's record."""
    from components.serving.serving_dir import EVALUATED_FILE

    fares = [float(n) for n in range(1, 21)]
    return {
        **SERVING_FILES,
        **CANDIDATE_FILES,
        f"{_UPSTREAM}/training_statistics/Split-train/FeatureStats.pb": gate_statistics(fares),
        f"{_UPSTREAM}/training_statistics/Split-eval/FeatureStats.pb": gate_statistics(fares[:10]),
        f"{_UPSTREAM}/evaluation/{EVALUATED_FILE}": json.dumps({"format": 1}),
    }


# The Pusher's parameter as TFX's compiler writes it (utils/proto_utils.py, `proto_to_json`).
PUSH_DESTINATION = json.dumps(
    {"filesystem": {"base_directory": f"{ROOT}/serving"}}, indent=2, sort_keys=True
)

LIGHT_STEP_INPUTS: dict[str, dict[str, Any]] = {
    "kubeflow.steps.run_status.component.RunStatus_Executor": {
        "parameters": {
            "final_status": {"state": "FAILED", "error": {"message": "Pusher failed"}},
            "pipeline_name": "taxi",
            "steps": json.dumps(_TRAINED_DAG),
            "task_name": "RunStatus",
        },
        "files": trained_and_evaluated_run,
        "outputs": {"report": _HTML},
        # Both sections read (a section that could not be read is left out, with a note).
        "shows": {"report": ['data-epoch="1"', 'data-kind="value"', 'data-passed="True"']},
        "hides": {"report": ["left out"]},
    },
    "kubeflow.steps.deploy.component.Deploy_Executor": {
        # A run whose Pusher pushed nothing: the InferenceService is left as it is.
        "parameters": {"serving": json.dumps({"inference_service": "taxi"})},
        "inputs": {
            "pushed_model": (
                {"instanceSchema": "title: tfx.PushedModel\ntype: object\n"},
                {"pushed": 0.0, "display_name": "pushed_model"},
            ),
            "examples": (
                {"instanceSchema": "title: tfx.Examples\ntype: object\n"},
                {"span": 0.0, "split_names": '["train", "eval"]'},
            ),
        },
        "outputs": {"deployment": {"instanceSchema": "title: kubeflow_steps.Deployment\n"}},
    },
    "kubeflow.steps.scoring_report.component.ScoringReport_Executor": {
        "parameters": {
            "final_status": {"state": "FAILED", "error": {"message": "ExampleGen failed"}},
            "pipeline_name": "taxi-scoring",
            "steps": json.dumps(
                {
                    "order": ["ExampleGen", "BatchScorer"],
                    "upstream": {"BatchScorer": ["ExampleGen"]},
                }
            ),
            "task_name": "ScoringReport",
            # Nothing served there: the report says so, as a first run's would.
            "serving_model_dir": f"{ROOT}/serving",
            "rolled_out_record": "",
            "settings": json.dumps(
                {
                    "allow_duplicate_keys": False,
                    "batch_size": 1024,
                    "keys": ["trip_id"],
                    "max_error_share": 0.001,
                    "output_format": "parquet",
                }
            ),
        },
        "outputs": {"report": _HTML},
    },
    "kubeflow.steps.input_snapshot.component.InputSnapshot_Executor": {
        # A window of two spans, one of them in two versions, under the run's root.
        "parameters": {
            "input_base": f"{ROOT}/data",
            "input_config": json.dumps(
                {"splits": [{"name": "single_split", "pattern": _VERSIONED_SPANS}]}
            ),
            "input_window": json.dumps({"pattern": _VERSIONED_SPANS, "spans": 2}),
        },
        "files": {
            "data/span-1/v1/part-0.csv": "a\n1\n",
            "data/span-2/v1/part-0.csv": "a\n2\n",
            "data/span-2/v2/part-0.csv": "a\n2\n3\n",
            "data/span-2/v2/part-1.csv": "a\n4\n",
        },
        "outputs": {"snapshot": _STRING},
        "output_parameters": ["snapshot"],
    },
    "components.gates.data_validation.component.DataValidationGate_Executor": {
        "parameters": {},
        "files": gate_files,
        "inputs": {"anomalies": (_ANOMALIES, _SPLITS), "statistics": (_STATISTICS, _SPLITS)},
        "outputs": {"examples_checked": _INTEGER},
        "shows": {"examples_checked": ["40"]},
    },
    "components.gates.drift.component.DataDriftGate_Executor": {
        **_DRIFT_GATE,
        "shows": {"drift/drift.json": ["nothing served under"]},
    },
    "components.gates.serving_data.component.ServingDataGate_Executor": {
        "parameters": {"excluded_columns": "[]"},
        "files": gate_files,
        "inputs": {"statistics": (_STATISTICS, _SPLITS), "schema": (_SCHEMA, {})},
        "outputs": {"examples_checked": _INTEGER},
        "shows": {"examples_checked": ["40"]},
        # TFDV validates, and TFDV's package loads both (components/gates/serving_data/executor.py).
        "loads": ["Beam", "TensorFlow"],
    },
    "tfx.components.schema_gen.import_schema_gen.executor.Executor": {
        "parameters": {"schema_file": f"{ROOT}/schemas/schema.pbtxt"},
        "files": {"schemas/schema.pbtxt": _GATE_SCHEMA},
        "outputs": {"schema": _SCHEMA},
        "shows": {"schema/schema.pbtxt": ['name: "fare"']},
    },
    "components.serving.baseline.component.LatestServedModel_Executor": {
        "parameters": {"serving_model_dir": f"{ROOT}/serving", "rolled_out_record": ""},
        "files": served_versions,
        "dirs": SERVING_EMPTY_DIRS,
        "inputs": {"candidate_model": (_MODEL, {})},
        "outputs": {"baseline_model": _MODEL},
    },
    "kubeflow.steps.run_report.component.RunReport_Executor": {
        "parameters": _RUN_REPORT_PARAMETERS,
        "files": reported_run,
        "inputs": REPORTED_INPUTS,
        "outputs": {"report": _HTML, "metrics": _METRICS},
        # The curves, the evaluation and the deployment read; what has no files is left out.
        "shows": {"report": ['data-epoch="1"', 'data-passed="True"', "promoted"]},
    },
    # A blessed candidate unlike the served model: a new version, with what ours adds.
    PUSHER: {
        "parameters": {"push_destination": PUSH_DESTINATION},
        "files": pushed_candidate,
        "dirs": (*SERVING_EMPTY_DIRS, f"{CANDIDATE_DIR}/assets"),
        "inputs": {
            "model": (_MODEL, {}),
            "model_blessing": (_tfx_type("tfx.ModelBlessing"), {"blessed": 1.0}),
            "training_statistics": (_STATISTICS, _SPLITS),
            "evaluation": (_tfx_type("tfx.ModelEvaluation"), {}),
        },
        "outputs": {"pushed_model": _tfx_type("tfx.PushedModel")},
        "shows": {"pushed_model/saved_model.pb": ["candidate"]},
    },
}
# Runs of the gates that LIGHT_STEP_INPUTS does not hold (it holds one per step), by name:
# the class path and the run's inputs. `fails`: the error the step ends with.
GATE_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "DataValidationGate, anomalous": (
        "components.gates.data_validation.component.DataValidationGate_Executor",
        {
            **LIGHT_STEP_INPUTS[
                "components.gates.data_validation.component.DataValidationGate_Executor"
            ],
            "files": lambda: gate_files(anomalous=True),
            "shows": {},
            "fails": "DataValidationError: data validation failed",
        },
    ),
    "DataDriftGate, served statistics": (
        "components.gates.drift.component.DataDriftGate_Executor",
        {
            **_DRIFT_GATE,
            "files": lambda: gate_files(served=True),
            "shows": {"drift/drift.json": ['"baseline_version": "7"']},
            "fails": "DataDriftError: data drift against the data that trained served model 7",
            # TFDV measures, and TFDV's package loads both (components/gates/drift/executor.py).
            "loads": ["Beam", "TensorFlow"],
        },
    ),
}


def light_step_arguments(
    class_path: str, args: list[str], root: Path, given: dict[str, Any] | None = None
) -> list[str]:
    """The compiled container `args` with a driver-shaped executor input for `class_path`:
    LIGHT_STEP_INPUTS: its parameters; its input artifacts, as an upstream step of the run
    left them under `root`/run-1/; the data files it reads, written under `root`; each
    output under `root`/run-1/<step>/, each output parameter's file under `root`/pod/.
    `given` replaces the step's LIGHT_STEP_INPUTS entry (another case of the same step,
    GATE_VARIANTS)."""
    step = class_path.rsplit(".", 1)[1].removesuffix("_Executor")
    given = LIGHT_STEP_INPUTS[class_path] if given is None else given
    files = given.get("files", {})
    for relative, content in (files() if callable(files) else files).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content.replace(ROOT, str(root)))
        os.utime(path, (FILES_MTIME, FILES_MTIME))
    for relative in given.get("dirs", ()):
        (root / relative).mkdir(parents=True, exist_ok=True)
    executor_input: dict[str, Any] = {
        "inputs": {
            "parameterValues": {
                name: value.replace(ROOT, str(root)) if isinstance(value, str) else value
                for name, value in given["parameters"].items()
            },
            "artifacts": {
                name: {
                    "artifacts": [
                        {
                            "name": f"run-1/upstream/{name}",
                            "type": artifact_type,
                            "uri": str(root / "run-1" / "upstream" / name),
                            "metadata": metadata,
                        }
                    ]
                }
                for name, (artifact_type, metadata) in given.get("inputs", {}).items()
            },
        },
        "outputs": {
            "artifacts": {
                name: {
                    "artifacts": [
                        {
                            "name": f"run-1/{step}/{name}",
                            "type": artifact_type,
                            "uri": str(root / "run-1" / step / name),
                        }
                    ]
                }
                for name, artifact_type in given["outputs"].items()
            },
            "outputFile": str(root / "pod" / step / "output_metadata.json"),
        },
    }
    if given.get("output_parameters"):
        executor_input["outputs"]["parameters"] = {
            name: {"outputFile": str(root / "pod" / step / "parameters" / name)}
            for name in given["output_parameters"]
        }
    argv = list(args)
    argv[argv.index(INVOCATION_FLAG) + 1] = json.dumps(executor_input)
    return argv


def start(
    class_path: str, mode: str = EXECUTOR, tree: Path = REPO_ROOT, args: list[str] | None = None
) -> Startup:
    """`class_path` started in a fresh interpreter at `tree`'s root, as `mode` says; RUN
    runs it on `args`, the step's full arguments."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"}
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory(prefix="step-args-") as tmp:
        args_file = Path(tmp) / "args.json"
        args_file.write_text(json.dumps(args or []))
        return _started(class_path, mode, tree, env, args_file)


def started_in_turn(class_paths: list[str], tree: Path = REPO_ROOT) -> dict[str, Startup]:
    """Each of `class_paths` imported in turn in one fresh interpreter at `tree`'s root, as
    EXECUTOR imports one alone: after each, what the process has loaded and its peak so
    far (`seconds`: that import's own, after the ones before it). A module is in a class's
    entry if the class or one before it loaded it, so the first entry holding a module
    names the class that loaded it; and a class's peak here is at least its peak alone."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-c", _IN_TURN_PROBE, *class_paths],
        cwd=tree, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the executor classes did not import in turn in {tree}: {last}")
    found = {}
    for line in done.stdout.strip().splitlines():
        values = json.loads(line)
        found[values["class_path"]] = Startup(
            values["seconds"], values["peak_mb"], frozenset(values["modules"])
        )
    return found


def _started(class_path: str, mode: str, tree: Path, env: dict, args_file: Path) -> Startup:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode, class_path, str(args_file)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{class_path} ({mode}) did not start in {tree}: {last}")
    values = json.loads(done.stdout.strip().splitlines()[-1])
    return Startup(values["seconds"], values["peak_mb"], frozenset(values["modules"]))


def best_of(
    class_path: str, mode: str, tree: Path, repeat: int, args: list[str] | None = None
) -> Startup:
    """The fastest of `repeat` starts; the peak memory and modules of that one."""
    return min(
        (start(class_path, mode, tree, args) for _ in range(repeat)), key=lambda s: s.seconds
    )


@contextlib.contextmanager
def tree_at(revision: str) -> Iterator[Path]:
    """`revision`'s files (`git archive`), in a temporary directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="step-startup-") as tmp:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", revision],
            cwd=REPO_ROOT,
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            raise SystemExit(f"error: --base {revision}: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        yield Path(tmp)


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def table_rows(label: str, classes: dict[str, list[str]], tree: Path, repeat: int) -> list[str]:
    rows = []
    for class_path, args in classes.items():
        runs = [(RUN, args)] if class_path in LIGHT_STEP_INPUTS else []
        for mode, step_args in [(EXECUTOR, None), (POD, None), *runs]:
            with tempfile.TemporaryDirectory(prefix="step-run-") as root:
                if step_args is not None:
                    step_args = light_step_arguments(class_path, step_args, Path(root))
                s = best_of(class_path, mode, tree, repeat, step_args)
            loads = ", ".join(s.loads()) or "none of them"
            cells = [label, f"`{class_path}`", mode, f"{s.seconds:.2f}", f"{s.peak_mb:.0f}", loads]
            rows.append("| " + " | ".join(cells) + " |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="a git revision to measure beside this tree")
    parser.add_argument("--repeat", type=int, default=2, help="starts per row; the best counts")
    parser.add_argument(
        "--package",
        choices=("training", "scoring", "tuning"),
        action="append",
        help="only these packages (default: all three)",
    )
    parser.add_argument(
        "--step",
        action="append",
        help="only executors whose class name or step starts with this (RunStatus, Pusher), "
        "repeatable",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    with tempfile.TemporaryDirectory(prefix="step-startup-") as tmp:
        specs = compiled_specs(Path(tmp))
    packages = {package: executor_classes(spec) for package, spec in specs.items()}
    if args.step:
        packages = {
            package: {
                c: a
                for c, a in classes.items()
                if any(
                    name.startswith(step)
                    for step in args.step
                    for name in (c.rsplit(".", 1)[1], executor_steps(specs[package])[c])
                )
            }
            for package, classes in packages.items()
        }
    wanted = args.package or list(packages)
    print(f"load average before: {load_average()} ({os.cpu_count()} cores)\n")
    with contextlib.ExitStack() as stack:
        trees = [("this tree", REPO_ROOT)]
        if args.base:
            trees.insert(0, (args.base, stack.enter_context(tree_at(args.base))))
        for package in wanted:
            if not packages[package]:
                continue
            print(f"{package} package, best of {args.repeat}\n")
            print("| tree | executor | start | seconds | peak MB | loads |")
            print("| --- | --- | --- | --- | --- | --- |")
            for label, tree in trees:
                print("\n".join(table_rows(label, packages[package], tree, args.repeat)))
            print()
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
