"""The Kubeflow package: same DAG as local, resources and placement where configured."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import pytest
import yaml

from kubeflow import compile as kfp_compile
from kubeflow import package_settings, run_parameters, spec_completion, tfx_spec
from kubeflow import pipeline_steps as kubeflow_steps
from kubeflow.package_settings import pipeline_step_ids
from kubeflow.settings import load_settings, parse_settings
from kubeflow.settings.fields import SettingsError
from kubeflow.step_ids import TUNE
from pipeline import fingerprint
from pipeline import steps as dag
from pipeline.beam import MULTI_PROCESSING_RUNNER_ARG
from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE, golden_path, update_goldens
from tests.harness import EXPECTED_EDGES, MINIO, RUN_REPORT_EDGES, build
from trainer.preprocessing import preprocessing_fn
from trainer.run import run_fn

# The steps of the checked-in settings' spec: every step but Deploy, which only a
# `serving:` section adds (tests/test_kserve.py).
STEP_IDS = pipeline_step_ids() - {kubeflow_steps.DEPLOY}
BEAM_STEPS = set(dag.DAG_STEPS.beam_ids)
RAW_SETTINGS = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())


@pytest.fixture(scope="module")
def settings():
    return load_settings(
        TEMPLATE_SETTINGS_FILE, STEP_IDS, BEAM_STEPS, package_settings.pipeline_retry_roles()
    )


@pytest.fixture(scope="module")
def compiled(settings):
    return kfp_compile.compile_pipeline(settings)


def _executors(spec):
    labels = tfx_spec.executor_labels(spec)
    return {task: spec["deploymentSpec"]["executors"][label] for task, label in labels.items()}


def _steps(spec):
    """The tasks that run a container, in every DAG of the spec (not the DAG tasks)."""
    labels = tfx_spec.executor_labels(spec)
    return {t: body for t, body in tfx_spec.all_tasks(spec).items() if t in labels}


def _platform(spec, platform):
    labels = tfx_spec.executor_labels(spec)
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    return {task: executors.get(label, {}) for task, label in labels.items()}


def test_same_steps_and_edges_as_the_local_dag(compiled):
    spec, _ = compiled
    root = spec["root"]["dag"]["tasks"]
    # The DAG runs inside TFX's exit-handler sub-DAG; the exit handler waits for all of it.
    assert set(root) == {kubeflow_steps.RUN_STATUS, "tfx-dag"}
    assert root[kubeflow_steps.RUN_STATUS]["dependentTasks"] == ["tfx-dag"]
    tasks = spec["components"]["tfx-dag"]["dag"]["tasks"]
    assert set(tasks) == STEP_IDS - {kubeflow_steps.RUN_STATUS}
    edges = {(up, task) for task, body in tasks.items() for up in body.get("dependentTasks", [])}
    assert edges == EXPECTED_EDGES | RUN_REPORT_EDGES | {
        (kubeflow_steps.INPUT_SNAPSHOT, dag.EXAMPLE_GEN)
    }


def test_a_cached_step_that_reads_the_data_has_the_data_in_its_cache_key(compiled):
    """Open-source KFP keys a step's cache on its parameters, image and command only.

    A cached step whose input is `data_root` would be served from cache on a
    scheduled run over new files under the same root (the bug this guards
    against: ExampleGen, cached, with only `data_root`). Such a step must
    also take a parameter that an uncached step computed from the data.
    """
    spec, _ = compiled
    tasks = _steps(spec)
    uncached = {t for t, body in tasks.items() if not body.get("cachingOptions", {})}
    assert {kubeflow_steps.INPUT_SNAPSHOT, dag.DRIFT_GATE, dag.BASELINE} <= uncached
    readers = {
        t: body["inputs"]["parameters"]
        for t, body in tasks.items()
        if any(
            p.get("componentInputParameter") == run_parameters.DATA_ROOT_PARAMETER
            for p in body.get("inputs", {}).get("parameters", {}).values()
        )
    }
    assert set(readers) == {kubeflow_steps.INPUT_SNAPSHOT, dag.EXAMPLE_GEN}
    for task, parameters in readers.items():
        if task in uncached:
            continue
        producers = {
            p["taskOutputParameter"]["producerTask"]
            for p in parameters.values()
            if "taskOutputParameter" in p
        }
        assert producers & uncached, f"{task} is cached on data_root alone"


def test_parameters_passed_between_steps_name_a_task_they_wait_for(compiled):
    spec, _ = compiled
    tasks = tfx_spec.all_tasks(spec)
    passed = [
        (task, p["taskOutputParameter"])
        for task, body in tasks.items()
        for p in body.get("inputs", {}).get("parameters", {}).values()
        if "taskOutputParameter" in p
    ]
    assert passed == [
        (
            dag.EXAMPLE_GEN,
            {"producerTask": kubeflow_steps.INPUT_SNAPSHOT, "outputParameterKey": "snapshot"},
        )
    ]
    for task, output in passed:
        assert output["producerTask"] in tasks[task]["dependentTasks"]
        producer = spec["components"][tasks[output["producerTask"]]["componentRef"]["name"]]
        assert producer["outputDefinitions"]["parameters"][output["outputParameterKey"]] == {
            "parameterType": "STRING"
        }


def test_a_parameter_from_a_task_not_in_the_pipeline_is_refused():
    tasks = {
        "B": {"inputs": {"parameters": {"x": {"taskOutputParameter": {"producerTask": "A_task"}}}}}
    }
    with pytest.raises(ValueError, match="B: parameter x comes from task 'A_task'"):
        tfx_spec.fix_output_parameter_producers(tasks)
    tasks["A"] = {}
    tfx_spec.fix_output_parameter_producers(tasks)
    assert tasks["B"]["inputs"]["parameters"]["x"]["taskOutputParameter"]["producerTask"] == "A"


def test_no_resolver_executor_that_open_source_kfp_lacks(compiled):
    spec, _ = compiled
    for label, executor in spec["deploymentSpec"]["executors"].items():
        assert "resolver" not in executor, label
        assert "container" in executor, label


def test_gpu_node_selector_and_toleration_only_where_configured(compiled):
    spec, platform = compiled
    executors = _executors(spec)
    placements = _platform(spec, platform)
    gpu_tasks = {
        t for t, e in executors.items() if "accelerator" in e["container"].get("resources", {})
    }
    assert gpu_tasks == {dag.TRAINER}
    assert executors[dag.TRAINER]["container"]["resources"]["accelerator"]["resourceType"] == (
        "nvidia.com/gpu"
    )
    tolerated = {t for t, p in placements.items() if p.get("tolerations")}
    assert tolerated == {dag.TRAINER}
    assert placements[dag.TRAINER] == {
        "nodeSelector": {"labels": {"cloud.google.com/gke-accelerator": "nvidia-l4"}},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    for task in STEP_IDS - {dag.TRAINER}:
        assert placements[task] == {
            "nodeSelector": {"labels": {"cloud.google.com/gke-nodepool": "cpu-pool"}}
        }


def test_every_step_has_resources_including_examplegen_and_importer(compiled):
    spec, _ = compiled
    executors = _executors(spec)
    for task in STEP_IDS:
        assert executors[task]["container"]["resources"]["resourceCpuLimit"], task
    assert executors[dag.EXAMPLE_GEN]["container"]["resources"]["resourceMemoryLimit"] == "16Gi"
    assert executors[dag.SCHEMA_IMPORTER]["container"]["resources"]["resourceMemoryLimit"] == "8Gi"


def test_runtime_parameters_pipeline_root_and_uncached_baseline(compiled, settings):
    spec, _ = compiled
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    assert parameters["data_root"]["defaultValue"] == settings.data_root
    assert parameters["train_args"]["defaultValue"] == '{"num_steps": 2000}'
    tasks = tfx_spec.all_tasks(spec)
    assert tasks[dag.EXAMPLE_GEN]["inputs"]["parameters"]["input_base"] == {
        "componentInputParameter": "data_root"
    }
    assert tasks[dag.TRAINER]["inputs"]["parameters"]["train_args"] == {
        "componentInputParameter": "train_args"
    }
    assert spec["defaultPipelineRoot"] == settings.pipeline_root
    assert spec["schemaVersion"] == "2.1.0"
    assert tasks[dag.BASELINE]["cachingOptions"] == {}
    assert tasks[dag.TRAINER]["cachingOptions"] == {"enableCache": True}


def test_module_paths_not_a_packaged_module_file(compiled):
    spec, _ = compiled
    trainer = tfx_spec.all_tasks(spec)[dag.TRAINER]["inputs"]["parameters"]
    assert trainer["run_fn"]["runtimeValue"]["constant"] == "trainer.run.run_fn"
    assert "module_file" not in trainer


_FINGERPRINT = re.compile(r'("code_fingerprint": ")[0-9a-f]+(")')


def _volatile_removed(doc):
    """The spec without what changes on its own: the SDK version, code fingerprints.

    Fingerprints change with every edit to trainer code; the test below checks them.
    """

    def mask(value):
        if isinstance(value, dict):
            return {k: mask(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mask(v) for v in value]
        if isinstance(value, str):
            return _FINGERPRINT.sub(r"\1<fingerprint>\2", value)
        return value

    doc = mask(copy.deepcopy(doc))
    doc.pop("sdkVersion", None)
    return doc


def test_transform_and_trainer_tasks_carry_the_code_fingerprint(compiled):
    spec, _ = compiled
    tasks = tfx_spec.all_tasks(spec)
    for node_id, fn in ((dag.TRANSFORM, preprocessing_fn), (dag.TRAINER, run_fn)):
        constant = tasks[node_id]["inputs"]["parameters"]["custom_config"]["runtimeValue"]
        custom_config = json.loads(constant["constant"])
        assert custom_config[fingerprint.CUSTOM_CONFIG_KEY] == fingerprint.code_fingerprint(fn)


def test_the_projects_own_settings_compile():
    """kubeflow/pipeline.yaml is the project's own (a fork's edits), not the tests' copy."""
    from kubeflow.settings import DEFAULT_SETTINGS_FILE

    own = load_settings(
        DEFAULT_SETTINGS_FILE, STEP_IDS, BEAM_STEPS, package_settings.pipeline_retry_roles()
    )
    spec, _ = kfp_compile.compile_pipeline(own)
    assert spec["defaultPipelineRoot"] == own.pipeline_root


def test_compiled_spec_matches_golden(compiled, tmp_path):
    spec, platform = compiled
    path = golden_path("kubeflow_pipeline.yaml")
    if update_goldens():
        kfp_compile.write_package(path, spec, platform)
    golden_spec, golden_platform = list(yaml.safe_load_all(path.read_text()))
    # Round-trip ours through the same writer so both sides are plain YAML data.
    ours = tmp_path / "pipeline.yaml"
    kfp_compile.write_package(ours, spec, platform)
    our_spec, our_platform = list(yaml.safe_load_all(ours.read_text()))
    assert _volatile_removed(our_spec) == _volatile_removed(golden_spec)
    assert our_platform == golden_platform


def test_resource_quantities_convert_like_kfp():
    from kubeflow.settings.placement import Placement, Resources

    spec = spec_completion.resource_spec(
        Placement(resources=Resources(cpu_limit="500m", memory_limit="32Gi", memory_request="16G"))
    )
    assert spec == {
        "cpuLimit": 0.5,
        "resourceCpuLimit": "500m",
        "memoryLimit": 34.359738368,
        "resourceMemoryLimit": "32Gi",
        "memoryRequest": 16.0,
        "resourceMemoryRequest": "16G",
    }


def _with(path: str, value):
    raw = copy.deepcopy(RAW_SETTINGS)
    target = raw
    *parents, last = path.split(".")
    for key in parents:
        target = target.setdefault(key, {})
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return raw


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("components.Trainr", {"resources": {"gpu": 1}}, r"unknown component id\(s\) \['Trainr'\]"),
        (
            "components.Trainer.resources",
            {"gpu": -1},
            r"components.Trainer.resources.gpu: must be >= 0",
        ),
        (
            "components.Trainer.resources",
            {"gpu": "one"},
            r"components.Trainer.resources.gpu: must be a int",
        ),
        (
            "components.Trainer.resources",
            {"cpu_request": "4", "cpu_limit": "2"},
            r"^components.Trainer.resources.cpu_request: 4 is more than cpu_limit 2; "
            r"Kubernetes refuses such a pod",
        ),
        (
            "defaults.resources",
            {"memory_request": "2G", "memory_limit": "1Gi"},
            r"^defaults.resources.memory_request: 2G is more than memory_limit 1Gi",
        ),
        (
            "training.tfjob.resources",
            {"cpu_request": "1500m", "cpu_limit": "1"},
            r"^training.tfjob.resources.cpu_request: 1500m is more than cpu_limit 1",
        ),
        (
            "components.Trainer.resources",
            {"cpu_request": "1K"},
            r"^components.Trainer.resources.cpu_request: '1K' is not a Kubernetes quantity",
        ),
        (
            "components.Trainer.tolerations",
            [{"key": "nvidia.com/gpu", "operator": "Exist"}],
            r"components.Trainer.tolerations\[0\].operator: must be one of",
        ),
        (
            "components.Trainer.tolerations",
            [{"key": "nvidia.com/gpu", "operator": "Exists", "value": "x"}],
            r"tolerations\[0\].value: must be empty when operator is Exists",
        ),
        (
            "components.Trainer.tolerations",
            [{"operator": "Equal", "value": "x"}],
            r"tolerations\[0\].key: required when operator is Equal",
        ),
        (
            "components.Trainer.tolerations",
            [{"key": "k", "effect": "NoRun"}],
            r"tolerations\[0\].effect: must be one of",
        ),
        ("components.Trainer.tolerations", "nvidia.com/gpu", r"tolerations: must be a list"),
        ("image", _DELETE, r"^image: required$"),
        ("image", "", r"^image: required$"),
        (
            "defaults.resources",
            {"memory_limit": "32 GB"},
            r"defaults.resources.memory_limit: '32 GB' is not",
        ),
        (
            "defaults.node_selector",
            {"pool": 5},
            r"defaults.node_selector.pool: 5 is not a Kubernetes label",
        ),
        ("schedule.cron", "0 3 * * *", r"schedule.cron: '0 3 \* \* \*' must have 6 fields"),
        (
            "scoring_schedule.cron",
            "0 5 * * *",
            r"^scoring_schedule.cron: '0 5 \* \* \*' must have 6 fields",
        ),
        ("scoring_schedule.every", "1d", r"^scoring_schedule: unknown field\(s\) \['every'\]"),
        ("parameters.train_steps", 0, r"parameters.train_steps: must be > 0"),
        ("parameters.data_path", "gs://x", r"parameters: unknown field\(s\) \['data_path'\]"),
        (
            "pipeline_root",
            "minio://mlpipeline/v2/artifacts",
            r"^pipeline_root: 'minio://mlpipeline/v2/artifacts': no TensorFlow or Beam filesystem "
            r"reads minio://\. MinIO speaks S3: write s3://mlpipeline/v2/artifacts and set the "
            r"store's endpoint",
        ),
        ("parameters.data_root", "minio://data/taxi", r"^parameters.data_root: .*write s3://data"),
        (
            "serving_model_dir",
            "hdfs://nn/serving",
            r"^serving_model_dir: .*hdfs:// is not supported",
        ),
        (
            "serving_model_dir",
            "s3:///serving",
            r"^serving_model_dir: 's3:///serving' names no bucket",
        ),
        (
            "pipeline_root",
            "s3://mlpipeline/tfx",
            r"^object_store: required when pipeline_root is s3:// \(s3://mlpipeline/tfx\)",
        ),
        (
            "object_store",
            {"region": "us-east-1", "verify_tls": False},
            r"^object_store.verify_tls: turning TLS verification off is not supported.*ca_file",
        ),
        (
            "object_store",
            {"endpoint": "minio-service.kubeflow:9000", "region": "us-east-1"},
            r"^object_store.endpoint: 'minio-service.kubeflow:9000' is not http\(s\)://HOST",
        ),
        (
            "object_store",
            {"endpoint": "minio://minio-service:9000", "region": "us-east-1"},
            r"^object_store.endpoint: .*give the store's S3 API address",
        ),
        ("object_store", {"endpoint": "http://minio:9000"}, r"^object_store.region: required"),
        ("object_store", {"region": "Europe West"}, r"^object_store.region: 'Europe West' is not"),
        (
            "object_store",
            {"region": "us-east-1", "ca_file": "certs/ca.pem"},
            r"^object_store.ca_file: 'certs/ca.pem' must be an absolute path",
        ),
        (
            "object_store",
            {"region": "us-east-1", "credentials": {"secret": "s", "access_key_id_key": "a"}},
            r"^object_store.credentials.secret_access_key_key: required",
        ),
        (
            "object_store",
            {
                "region": "us-east-1",
                "credentials": {
                    "secret": "My_Secret",
                    "access_key_id_key": "a",
                    "secret_access_key_key": "b",
                },
            },
            r"^object_store.credentials.secret: 'My_Secret' is not a Kubernetes Secret name",
        ),
        ("object_store", {"region": "us-east-1", "bucket": "x"}, r"^object_store: unknown field"),
    ],
)
def test_configuration_errors_name_the_field(path, value, message):
    with pytest.raises(SettingsError, match=message):
        parse_settings(_with(path, value), STEP_IDS)


def test_quantities_compile_as_kubernetes_reads_them():
    """Every suffix Kubernetes takes compiles (1k CPUs crashed the compile in float())."""
    raw = _with(
        "components.Trainer.resources",
        {"cpu_request": "1k", "cpu_limit": "2k", "memory_request": "1.5Gi", "memory_limit": "2G"},
    )
    placement = parse_settings(raw, STEP_IDS).placement_for(dag.TRAINER)
    spec = spec_completion.resource_spec(placement)
    assert (spec["cpuRequest"], spec["cpuLimit"], spec["resourceCpuRequest"]) == (
        1000.0,
        2000.0,
        "1k",
    )
    assert spec["memoryRequest"] == pytest.approx(1.5 * 2**30 / 1e9)
    assert spec["memoryLimit"] == 2.0


@pytest.mark.slow  # a `python -m kubeflow.compile` process: it imports TFX
def test_compile_command_states_the_supported_backends(tmp_path):
    out = tmp_path / "pipeline.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "kubeflow.compile", "--output", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Among the compile's closing lines (the root a run uses comes last).
    assert (
        "runs on Kubeflow Pipelines backend 2.15.0 to 2.18.x (2.15.0 for secretAsEnv.optional, "
        "retries of steps inside the exit handler's sub-DAG and the exit handler's final "
        "status; 3.x refused)"
    ) in proc.stdout.strip().splitlines()[-3:]
    assert out.exists()


def test_compile_command_reports_a_bad_config_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_with("components.Trainer.resources", {"gpu": -2})))
    out = tmp_path / "pipeline.yaml"
    # The command's main, whose exit code the process exits with (the test above runs it).
    assert kfp_compile.main(["--output", str(out), "--config", str(bad)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: components.Trainer.resources.gpu: must be >= 0, got -2"
    )
    assert not out.exists()


def test_our_kubeflow_package_does_not_shadow_kubeflows_sdks(tmp_path):
    """`kubeflow` is a namespace package: kubeflow.training & co. import beside it."""
    other = tmp_path / "site" / "kubeflow" / "training"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("NAME = 'kubeflow-training'\n")
    assert not (REPO_ROOT / "kubeflow" / "__init__.py").exists()
    code = (
        "import sys; sys.path.append(sys.argv[1]); "
        "import kubeflow.training, kubeflow.settings; "
        "print(kubeflow.training.NAME, kubeflow.settings.__name__)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["kubeflow-training", "kubeflow.settings"]


# --- Beam engines per step ------------------------------------------------------

DATAFLOW = {
    "engine": "dataflow",
    "options": {
        "project": "my-project",
        "region": "us-central1",
        "temp_location": "gs://my-bucket/tmp",
        "max_num_workers": 20,
        "experiments": ["use_runner_v2", "no_use_multiple_sdk_containers"],
    },
}
FLINK = {"engine": "flink", "options": {"job_endpoint": "flink-jobserver.flink:8099"}}


def _beam_args(spec, task):
    """The Beam flags in a step's container args (TFX's own are `--name value` pairs)."""
    args = _executors(spec)[task]["container"]["args"]
    return [a for a in args if a.startswith("--") and "=" in a]


def test_beam_steps_are_the_pipelines_beam_components(tmp_path):
    from tfx.dsl.components.base.base_beam_component import BaseBeamComponent

    pipeline = build(tmp_path)
    assert {c.id for c in pipeline.components if isinstance(c, BaseBeamComponent)} == BEAM_STEPS


def test_default_beam_engine_runs_each_beam_step_in_its_pod(compiled, settings):
    spec, _ = compiled
    for task in BEAM_STEPS:
        assert _beam_args(spec, task) == [
            MULTI_PROCESSING_RUNNER_ARG,
            "--direct_running_mode=multi_processing",
            "--direct_num_workers=0",
            f"--sdk_container_image={settings.image}",
        ], task


@pytest.mark.parametrize("engine", ["direct", "dataflow", "flink", "spark", "docker"])
def test_tfx_does_not_package_itself_for_any_engine(engine, monkeypatch):
    """TFX's own check (tfx/utils/dependency_utils.py) finds the workers' image in
    every engine's arguments, so no Beam step builds a TFX sdist under /tmp."""
    from tfx.utils import dependency_utils

    built = []
    monkeypatch.setattr(dependency_utils, "build_ephemeral_package", lambda: built.append(1))
    values = {
        "direct": {"engine": "direct"},
        "dataflow": DATAFLOW,
        "flink": FLINK,
        "spark": {"engine": "spark", "options": {"job_endpoint": "spark-jobserver:8099"}},
        "docker": {
            "engine": "flink",
            "options": {**FLINK["options"], "environment_type": "DOCKER"},
        },
    }[engine]
    settings = parse_settings(_with("beam.defaults", values), STEP_IDS, BEAM_STEPS)
    args = settings.beam_for(dag.TRANSFORM).pipeline_args(settings.image)
    assert dependency_utils.make_beam_dependency_flags(args) == args
    assert built == []
    # The guard's negative: the same arguments less the image would have TFX package itself.
    without_image = [a for a in args if not a.startswith("--sdk_container_image=")]
    monkeypatch.setattr(dependency_utils, "build_ephemeral_package", lambda: "/tmp/tfx.tar.gz")
    assert dependency_utils.make_beam_dependency_flags(without_image)[-1] == (
        "--extra_package=/tmp/tfx.tar.gz"
    )


def test_one_step_on_dataflow_another_on_flink_the_rest_unchanged():
    raw = _with("beam.components", {"Transform": DATAFLOW, "Evaluator": FLINK})
    settings = parse_settings(raw, STEP_IDS, BEAM_STEPS)
    spec, _ = kfp_compile.compile_pipeline(settings)

    transform = _beam_args(spec, dag.TRANSFORM)
    assert transform[0] == "--runner=DataflowRunner"
    assert f"--sdk_container_image={settings.image}" in transform  # workers get our code
    assert transform.count("--experiments=use_runner_v2") == 1
    assert "--experiments=no_use_multiple_sdk_containers" in transform
    assert not any(a.startswith("--direct_") for a in transform)
    evaluator = _beam_args(spec, dag.EVALUATOR)
    # Kubernetes' default: the worker-pool sidecar in each task manager pod.
    assert evaluator == [
        "--runner=PortableRunner",
        "--environment_config=localhost:50000",
        "--environment_type=EXTERNAL",
        "--job_endpoint=flink-jobserver.flink:8099",
        f"--sdk_container_image={settings.image}",
    ]
    for task in BEAM_STEPS - {dag.TRANSFORM, dag.EVALUATOR}:
        assert _beam_args(spec, task)[:2] == [
            MULTI_PROCESSING_RUNNER_ARG,
            "--direct_running_mode=multi_processing",
        ]

    # Beam itself reads the compiled flags as meant.
    from apache_beam.options.pipeline_options import (
        GoogleCloudOptions,
        PipelineOptions,
        PortableOptions,
        StandardOptions,
        WorkerOptions,
    )

    dataflow = PipelineOptions(transform)
    assert dataflow.view_as(StandardOptions).runner == "DataflowRunner"
    assert dataflow.view_as(GoogleCloudOptions).project == "my-project"
    assert dataflow.view_as(GoogleCloudOptions).temp_location == "gs://my-bucket/tmp"
    assert dataflow.view_as(WorkerOptions).max_num_workers == 20
    assert dataflow.view_as(WorkerOptions).sdk_container_image == settings.image
    flink = PipelineOptions(evaluator).view_as(PortableOptions)
    assert flink.job_endpoint == "flink-jobserver.flink:8099"
    assert flink.environment_type == "EXTERNAL"
    assert flink.environment_config == "localhost:50000"


def test_docker_workers_when_set_explicitly():
    engine = {
        "engine": "flink",
        "options": {"job_endpoint": "flink-jobserver.flink:8099", "environment_type": "DOCKER"},
    }
    settings = parse_settings(_with("beam.defaults", engine), STEP_IDS, BEAM_STEPS)
    args = settings.beam_for(dag.TRANSFORM).pipeline_args(settings.image)
    assert args == [
        "--runner=PortableRunner",
        f"--environment_config={settings.image}",
        "--environment_type=DOCKER",
        "--job_endpoint=flink-jobserver.flink:8099",
        f"--sdk_container_image={settings.image}",
    ]


def test_portable_and_dataflow_workers_get_beams_s3_options_but_no_credentials():
    raw = {**copy.deepcopy(RAW_SETTINGS), **copy.deepcopy(MINIO)}
    raw["object_store"]["ca_file"] = "/etc/ssl/store/ca.pem"
    raw["beam"] = {
        "defaults": {"engine": "spark", "options": {"job_endpoint": "spark-jobserver:8099"}},
        "components": {
            "Transform": DATAFLOW,
            # An option set by hand wins over the one from object_store.
            "Evaluator": {**FLINK, "options": {**FLINK["options"], "s3_region_name": "eu-west-1"}},
            "ExampleGen": {"engine": "direct"},
        },
    }
    spec, _ = kfp_compile.compile_pipeline(parse_settings(raw, STEP_IDS, BEAM_STEPS))
    expected = {
        "--s3_region_name=us-east-1",
        "--s3_endpoint_url=http://minio-service.kubeflow:9000",
        "--s3_verify=/etc/ssl/store/ca.pem",
        "--beam_plugins=pipeline.s3_plugin",
    }
    for task in (dag.TRANSFORM, dag.STATISTICS_GEN):
        assert expected <= set(_beam_args(spec, task)), task
    evaluator = _beam_args(spec, dag.EVALUATOR)
    assert "--s3_region_name=eu-west-1" in evaluator
    assert "--s3_region_name=us-east-1" not in evaluator
    # In the step's own pod, boto3 reads the step's environment instead.
    example_gen = _beam_args(spec, dag.EXAMPLE_GEN)
    assert not [a for a in example_gen if a.startswith("--s3_")]
    assert "--beam_plugins=pipeline.s3_plugin" in example_gen
    for task in BEAM_STEPS:
        assert not [a for a in _beam_args(spec, task) if "access_key" in a], task

    from apache_beam.options.pipeline_options import PipelineOptions, S3Options

    s3 = PipelineOptions(_beam_args(spec, dag.STATISTICS_GEN)).view_as(S3Options)
    assert s3.s3_endpoint_url == "http://minio-service.kubeflow:9000"
    assert s3.s3_verify == "/etc/ssl/store/ca.pem"


def test_spark_through_an_external_worker_pool():
    engine = {
        "engine": "spark",
        "options": {
            "job_endpoint": "spark-jobserver:8099",
            "environment_type": "EXTERNAL",
            "environment_config": "localhost:50000",
        },
    }
    settings = parse_settings(_with("beam.defaults", engine), STEP_IDS, BEAM_STEPS)
    args = settings.beam_for(dag.STATISTICS_GEN).pipeline_args(settings.image)
    assert args == [
        "--runner=PortableRunner",
        "--environment_config=localhost:50000",
        "--environment_type=EXTERNAL",
        "--job_endpoint=spark-jobserver:8099",
        f"--sdk_container_image={settings.image}",
    ]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("beam.defaults", {"engine": "flinck"}, r"beam.defaults.engine: must be one of"),
        (
            "beam.components",
            {"Trainer": FLINK},
            r"beam.components: \['Trainer'\] run no Beam; the Beam steps are",
        ),
        (
            "beam.components.Transform",
            {"engine": "dataflow", "options": {"region": "r", "temp_location": "gs://b/t"}},
            r"beam.components.Transform.options.project: required for engine dataflow",
        ),
        (
            "beam.components.Transform",
            {
                "engine": "dataflow",
                "options": {"project": "p", "region": "r", "temp_location": "/tmp/x"},
            },
            r"temp_location: Dataflow needs a gs:// path",
        ),
        (
            "beam.components.Evaluator",
            {"engine": "flink", "options": {"job_endpoint": "http://flink:8099"}},
            r"beam.components.Evaluator.options.job_endpoint: 'http://flink:8099' is not host:port",
        ),
        (
            "beam.components.Evaluator",
            {
                "engine": "flink",
                "options": {"job_endpoint": "f:8099", "environment_type": "LOOPBACK"},
            },
            r"environment_type: must be DOCKER, EXTERNAL or PROCESS",
        ),
        (
            "beam.components.Evaluator",
            {
                "engine": "spark",
                "options": {"job_endpoint": "s:8099", "environment_type": "PROCESS"},
            },
            r"environment_config: required with environment_type PROCESS",
        ),
        (
            "beam.components.Evaluator",
            {
                "engine": "spark",
                "options": {"job_endpoint": "s:8099", "environment_config": "worker-pool"},
            },
            r"Evaluator.options.environment_config: 'worker-pool' is not host:port",
        ),
        (
            "beam.components.Evaluator",
            {"engine": "flink", "options": {"job_endpoint": "f:8099", "job_server_timeout": "5s"}},
            r"Evaluator.options.job_server_timeout: '5s' is not a whole number of seconds",
        ),
        (
            "beam.defaults",
            {"engine": "spark", "options": {"job_endpoint": "s:8099", "job_server_timeout": 0}},
            r"beam.defaults.options.job_server_timeout: 0 is not a whole number of seconds",
        ),
        (
            "beam.defaults",
            {"engine": "direct", "options": {"runner": "DataflowRunner"}},
            r"beam.defaults.options.runner: set `engine` instead",
        ),
        (
            "beam.defaults",
            {"options": {"--direct_num_workers": 4}},
            r"beam.defaults.options.--direct_num_workers: not a Beam option name",
        ),
        (
            "beam.defaults",
            {"options": {"save_main_session": False}},
            r"save_main_session: False sets nothing",
        ),
        (
            # A list repeats the flag; a list inside it would be written as one value.
            "beam.defaults",
            {"options": {"experiments": ["a", ["b", "c"]]}},
            r"beam.defaults.options.experiments\[1\]: must be a str or int or float",
        ),
        ("beam.engine", "dataflow", r"beam: unknown field\(s\) \['engine'\]"),
    ],
)
def test_beam_configuration_errors_name_the_field(path, value, message):
    with pytest.raises(SettingsError, match=message):
        parse_settings(_with(path, value), STEP_IDS, BEAM_STEPS)


@pytest.mark.parametrize(
    ("option", "instead"),
    [
        ("s3_access_key_id", "object_store.credentials"),
        ("s3_secret_access_key", "object_store.credentials"),
        ("s3_session_token", "object_store.credentials"),
        ("azure_connection_string", "azure_managed_identity_client_id"),
        ("my_plugin_password", "object_store.credentials"),
    ],
)
def test_a_credential_in_beam_options_is_refused_naming_the_secret_setting(option, instead):
    engine = {**DATAFLOW, "options": {**DATAFLOW["options"], option: "AKIA-planted"}}
    with pytest.raises(SettingsError) as raised:
        parse_settings(_with("beam.components.Transform", engine), STEP_IDS, BEAM_STEPS)
    message = str(raised.value)
    assert message.startswith(f"beam.components.Transform.options.{option}: a credential;")
    assert instead in message and "\n" not in message
    assert "AKIA-planted" not in message


def test_identity_options_that_hold_no_secret_still_pass():
    """The guard's negative: options naming who the workers are, not a key, compile."""
    options = {
        **DATAFLOW["options"],
        "service_account_email": "workers@my-project.iam.gserviceaccount.com",
        "impersonate_service_account": "deployer@my-project.iam.gserviceaccount.com",
        "dataflow_kms_key": "projects/p/locations/l/keyRings/r/cryptoKeys/k",
        "s3_region_name": "eu-west-1",
    }
    raw = _with("beam.components.Transform", {**DATAFLOW, "options": options})
    settings = parse_settings(raw, STEP_IDS, BEAM_STEPS)
    args = settings.beam_for(dag.TRANSFORM).pipeline_args(settings.image)
    assert "--service_account_email=workers@my-project.iam.gserviceaccount.com" in args


def test_no_secret_value_the_settings_name_reaches_the_compiled_package(tmp_path, monkeypatch):
    """Settings that name every secret a step gets (the store's key pair, KServe's and the
    training replicas' service accounts), compiled by a shell that holds the values."""
    planted = {
        "AWS_ACCESS_KEY_ID": "AKIAPLANTEDACCESSKEY",
        "AWS_SECRET_ACCESS_KEY": "planted/secret/access/key+0123456789",
        "AWS_SESSION_TOKEN": "planted-session-token-0123456789",
        "AZURE_STORAGE_CONNECTION_STRING": "AccountKey=plantedazurekey0123456789",
        "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "planted-gcp-key.json"),
    }
    (tmp_path / "planted-gcp-key.json").write_text('{"private_key": "planted-gcp-private-key"}')
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    raw = {**copy.deepcopy(RAW_SETTINGS), **copy.deepcopy(MINIO)}
    raw["serving"] = {"inference_service": "taxi", "service_account": "kserve-models"}
    # Workers outside the step's pod get the store's settings as Beam options.
    raw["beam"] = {"components": {"Transform": DATAFLOW, "Evaluator": FLINK}}
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump(raw))
    package = tmp_path / "pipeline.yaml"
    assert kfp_compile.main(["--output", str(package), "--config", str(config)]) == 0

    text = package.read_text()
    leaked = [v for v in [*planted.values(), "planted-gcp-private-key"] if v in text]
    assert leaked == []
    # What the package does hold: references to the secret and its keys, by name.
    secret_ref = MINIO["object_store"]["credentials"]
    for name in (secret_ref["secret"], secret_ref["access_key_id_key"], "kserve-models"):
        assert name in text, name
    assert "--s3_endpoint_url=http://minio-service.kubeflow:9000" in text


def test_unknown_beam_option_fails_the_compile_with_a_suggestion():
    engine = {**DATAFLOW, "options": {**DATAFLOW["options"], "max_num_worker": 5}}
    settings = parse_settings(_with("beam.components.Transform", engine), STEP_IDS, BEAM_STEPS)
    with pytest.raises(
        SettingsError,
        match=r"beam.components.Transform.options.max_num_worker: not a pipeline option of "
        r"apache-beam [0-9.]+; did you mean 'max_num_workers'\?",
    ):
        kfp_compile.compile_pipeline(settings)


def _minio_settings(credentials: bool = True):
    raw = {**copy.deepcopy(RAW_SETTINGS), **copy.deepcopy(MINIO)}
    raw["parameters"]["data_root"] = "s3://mlpipeline/data/taxi"
    if not credentials:
        del raw["object_store"]["credentials"]
    return parse_settings(raw, STEP_IDS, BEAM_STEPS)


@pytest.fixture(scope="module")
def compiled_minio():
    return kfp_compile.compile_pipeline(_minio_settings())


def test_every_step_gets_the_store_for_tensorflow_and_beam(compiled_minio):
    spec, platform = compiled_minio
    expected_env = {
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "S3_ENDPOINT": "http://minio-service.kubeflow:9000",
        "AWS_ENDPOINT_URL_S3": "http://minio-service.kubeflow:9000",
    }
    secret = {
        "keyToEnv": [
            {"secretKey": "accesskey", "envVar": "AWS_ACCESS_KEY_ID"},
            {"secretKey": "secretkey", "envVar": "AWS_SECRET_ACCESS_KEY"},
        ],
        "optional": False,
        "secretName": "mlpipeline-minio-artifact",
        "secretNameParameter": {"runtimeValue": {"constant": "mlpipeline-minio-artifact"}},
    }
    platforms = _platform(spec, platform)
    # Every step, our own components and the run report included.
    assert set(_executors(spec)) == STEP_IDS
    for task, executor in _executors(spec).items():
        container = executor["container"]
        assert {e["name"]: e["value"] for e in container["env"]} == expected_env, task
        assert container["command"] == spec_completion.STEP_COMMAND, task
        assert platforms[task]["secretAsEnv"] == [secret], task
        # No secret value, and no secret name as a plain variable, is ever in the spec.
        assert "AWS_ACCESS_KEY_ID" not in {e["name"] for e in container["env"]}
    assert spec["defaultPipelineRoot"] == "s3://mlpipeline/tfx/taxi"
    assert spec["root"]["inputDefinitions"]["parameters"]["data_root"]["defaultValue"] == (
        "s3://mlpipeline/data/taxi"
    )


def test_beam_steps_import_the_s3_plugin_in_their_workers(compiled_minio, compiled):
    from pipeline.object_store import BEAM_PLUGIN_MODULE

    for spec, expected in ((compiled_minio[0], True), (compiled[0], False)):
        for task, executor in _executors(spec).items():
            args = executor["container"]["args"]
            has_plugin = f"--beam_plugins={BEAM_PLUGIN_MODULE}" in args
            assert has_plugin == (expected and task in BEAM_STEPS), task


def test_pod_identity_injects_no_secret():
    spec, platform = kfp_compile.compile_pipeline(_minio_settings(credentials=False))
    for task, entry in _platform(spec, platform).items():
        assert "secretAsEnv" not in entry, task
    assert all("env" in e["container"] for e in _executors(spec).values())


def test_gcs_settings_add_no_environment_but_the_step_command(compiled):
    spec, platform = compiled
    for task, executor in _executors(spec).items():
        assert "env" not in executor["container"], task
        assert executor["container"]["command"] == spec_completion.STEP_COMMAND, task
        assert "secretAsEnv" not in _platform(spec, platform)[task]


@pytest.mark.slow  # three packages compiled
def test_one_settings_file_places_the_steps_of_all_three_packages(tmp_path):
    """A fork keeps one kubeflow/pipeline.yaml: entries for the scorer and the tuning
    step leave the training package as it was and reach their own packages; an id no
    package has is still refused, naming it."""
    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    scorer_resources = {"cpu_request": "3", "cpu_limit": "3", "memory_request": "5Gi",
                        "memory_limit": "5Gi"}  # fmt: skip
    raw.setdefault("components", {})[dag.BATCH_SCORER] = {"resources": scorer_resources}
    raw["components"][TUNE] = {"resources": scorer_resources}
    both = tmp_path / "pipeline.yaml"
    both.write_text(yaml.safe_dump(raw))

    plain = package_settings.load_package_settings(TEMPLATE_SETTINGS_FILE)
    more = package_settings.load_package_settings(both)
    training = [kfp_compile.compile_pipeline(s)[0] for s in (plain, more)]
    assert _volatile_removed(training[0]) == _volatile_removed(training[1])
    from tests.harness import taxi_schema_dir_copy

    keyed = taxi_schema_dir_copy(tmp_path)
    for step, spec in [
        (
            dag.BATCH_SCORER,
            kfp_compile.compile_scoring_pipeline(
                package_settings.load_scoring_settings(both), keyed
            )[0],
        ),
        (
            TUNE,
            kfp_compile.compile_tuning_pipeline(package_settings.load_tuning_settings(both))[0],
        ),
    ]:
        executor = spec["deploymentSpec"]["executors"][f"{step}_executor"]
        assert executor["container"]["resources"]["cpuLimit"] == 3.0, step

    raw["components"]["Tuner"] = {"resources": scorer_resources}
    both.write_text(yaml.safe_dump(raw))
    with pytest.raises(SettingsError, match="Tuner"):
        package_settings.load_package_settings(both)
