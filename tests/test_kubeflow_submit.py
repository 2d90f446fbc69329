"""Submit and schedule through the real kfp client, against a stand-in KFP API on loopback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from kubeflow import backend
from kubeflow.tfx_spec import all_tasks
from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE, golden_path
from tests.harness import KFP_SDK_PROJECT, uv_binary
from tests.kfp_standin import KfpStandIn

pytestmark = pytest.mark.slow

PACKAGE = golden_path("kubeflow_pipeline.yaml")


def submit(host: str, *args: str, package: Path = PACKAGE) -> subprocess.CompletedProcess:
    command = [uv_binary(), "run", "--project", str(KFP_SDK_PROJECT), "--locked"]
    command += ["python", "-m", "kubeflow.submit", "--host", host, "--package", str(package), *args]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def test_one_run_carries_package_parameters_and_experiment():
    spec, platform = list(yaml.safe_load_all(PACKAGE.read_text()))
    with KfpStandIn() as kfp:
        proc = submit(
            kfp.host,
            "--data-root",
            "gs://bucket/data/2026-11",
            "--train-steps",
            "5000",
            "--experiment",
            "nightly",
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip().endswith("run run-1 in nightly")
        (experiment,) = kfp.posted("/apis/v2beta1/experiments")
        assert experiment["display_name"] == "nightly"
        (run,) = kfp.posted("/apis/v2beta1/runs")
    assert run["experiment_id"] == next(iter(kfp.experiments))
    # The client sends the spec and, beside it, the Kubernetes platform section
    # (node selectors, tolerations) exactly as compiled.
    assert run["pipeline_spec"] == {"pipeline_spec": spec, "platform_spec": platform}
    assert run["runtime_config"]["parameters"] == {
        "data_root": "gs://bucket/data/2026-11",
        "train_args": '{"num_steps": 5000}',
    }
    # The backend reads the root from the runtime config, never from the spec.
    assert run["runtime_config"]["pipeline_root"] == spec["defaultPipelineRoot"]


def test_schedule_creates_a_recurring_run_from_the_settings():
    with KfpStandIn() as kfp:
        proc = submit(kfp.host, "--schedule", "--train-steps", "300")
        assert proc.returncode == 0, proc.stderr[-3000:]
        (experiment,) = kfp.posted("/apis/v2beta1/experiments")
        (recurring,) = kfp.posted("/apis/v2beta1/recurringruns")
    assert experiment["display_name"] == "taxi-big-tipper"
    assert recurring["experiment_id"] == next(iter(kfp.experiments))
    assert recurring["trigger"]["cron_schedule"]["cron"] == "0 0 3 * * *"
    assert recurring["max_concurrency"] in (1, "1")
    assert recurring["no_catchup"] is True
    assert recurring["runtime_config"]["parameters"] == {"train_args": '{"num_steps": 300}'}
    spec = next(yaml.safe_load_all(PACKAGE.read_text()))
    assert recurring["runtime_config"]["pipeline_root"] == spec["defaultPipelineRoot"]
    assert "Trainer" in all_tasks(recurring["pipeline_spec"]["pipeline_spec"])
    assert recurring["pipeline_spec"]["platform_spec"]["platforms"]["kubernetes"]


@pytest.fixture(scope="module")
def scoring_package(tmp_path_factory) -> Path:
    """The batch scoring package compiled from the checked-in settings, the dataset's
    spec naming its key."""
    from kubeflow import compile as kfp_compile
    from kubeflow import package_settings
    from tests.harness import taxi_schema_dir_copy

    tmp = tmp_path_factory.mktemp("scoring_package")
    settings = package_settings.load_scoring_settings(TEMPLATE_SETTINGS_FILE)
    spec, platform = kfp_compile.compile_scoring_pipeline(settings, taxi_schema_dir_copy(tmp))
    kfp_compile.write_package(tmp / "scoring.yaml", spec, platform)
    return tmp / "scoring.yaml"


def test_the_scoring_package_is_scheduled_from_its_own_section(scoring_package, tmp_path):
    settings = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    with KfpStandIn() as kfp:
        proc = submit(
            kfp.host, "--schedule", "--data-root", "gs://bucket/new", package=scoring_package
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        (experiment,) = kfp.posted("/apis/v2beta1/experiments")
        (recurring,) = kfp.posted("/apis/v2beta1/recurringruns")
    assert experiment["display_name"] == settings["scoring_schedule"]["experiment"]
    assert recurring["trigger"]["cron_schedule"]["cron"] == settings["scoring_schedule"]["cron"]
    assert settings["scoring_schedule"]["cron"] != settings["schedule"]["cron"]
    assert recurring["max_concurrency"] in (1, "1")
    assert recurring["runtime_config"]["parameters"] == {"data_root": "gs://bucket/new"}
    assert "BatchScorer" in all_tasks(recurring["pipeline_spec"]["pipeline_spec"])

    del settings["scoring_schedule"]
    (tmp_path / "settings.yaml").write_text(yaml.safe_dump(settings))
    with KfpStandIn() as kfp:
        unscheduled = submit(kfp.host, "--schedule", "--config", str(tmp_path / "settings.yaml"),
                             package=scoring_package)  # fmt: skip
        trained = submit(kfp.host, "--train-steps", "300", package=scoring_package)
        outside = submit(kfp.host, "--model-version", "../1", package=scoring_package)
        training = submit(kfp.host, "--model-version", "7")
        assert kfp.requests == []
        pinned = submit(kfp.host, "--model-version", "7", package=scoring_package)
        assert pinned.returncode == 0, pinned.stderr[-3000:]
        (run,) = kfp.posted("/apis/v2beta1/runs")
    assert run["runtime_config"]["parameters"] == {"model_version": "7"}
    assert outside.returncode == 2 and "'../1' is not a version number" in outside.stderr
    assert training.returncode == 2 and "is not the scoring package" in training.stderr
    assert unscheduled.returncode == 2
    assert unscheduled.stderr.strip().splitlines()[-1] == (
        f"error: scoring_schedule: required in {tmp_path / 'settings.yaml'} for --schedule"
    )
    assert trained.returncode == 2
    assert trained.stderr.strip().splitlines()[-1] == (
        f"error: --train-steps: {scoring_package} is the scoring package, which trains nothing"
    )


def test_pipeline_root_flag_replaces_the_packages_root_in_runs_and_recurring_runs():
    with KfpStandIn() as kfp:
        once = submit(kfp.host, "--pipeline-root", "gs://other-bucket/tfx/root")
        assert once.returncode == 0, once.stderr[-3000:]
        scheduled = submit(kfp.host, "--schedule", "--pipeline-root", "gs://other-bucket/tfx/r2")
        assert scheduled.returncode == 0, scheduled.stderr[-3000:]
        (run,) = kfp.posted("/apis/v2beta1/runs")
        (recurring,) = kfp.posted("/apis/v2beta1/recurringruns")
    assert run["runtime_config"]["pipeline_root"] == "gs://other-bucket/tfx/root"
    assert recurring["runtime_config"]["pipeline_root"] == "gs://other-bucket/tfx/r2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--train-steps", "0"), "error: --train-steps: must be > 0, got 0"),
        (
            ("--pipeline-root", "minio://mlpipeline/v2/artifacts"),
            "error: --pipeline-root: 'minio://mlpipeline/v2/artifacts': no TensorFlow or Beam "
            "filesystem reads minio://. MinIO speaks S3: write s3://mlpipeline/v2/artifacts and "
            "set the store's endpoint (object_store.endpoint, e.g. "
            "http://minio-service.kubeflow:9000)",
        ),
        (
            ("--pipeline-root", "s3://mlpipeline/v2/artifacts"),
            "error: object_store: required when --pipeline-root is s3:// "
            "(s3://mlpipeline/v2/artifacts): set at least object_store.region, and the endpoint "
            "and credentials secret for MinIO or another S3-compatible store",
        ),
        (
            ("--data-root", "minio://mlpipeline/data"),
            "error: --data-root: 'minio://mlpipeline/data': no TensorFlow or Beam filesystem "
            "reads minio://. MinIO speaks S3: write s3://mlpipeline/data and set the store's "
            "endpoint (object_store.endpoint, e.g. http://minio-service.kubeflow:9000)",
        ),
        (
            # The checked-in settings (and so the golden package) name no object store.
            ("--data-root", "s3://mlpipeline/data"),
            "error: object_store: required when --data-root is s3:// (s3://mlpipeline/data): "
            "set at least object_store.region, and the endpoint and credentials secret for "
            "MinIO or another S3-compatible store",
        ),
    ],
)
def test_bad_arguments_fail_before_any_request(args, message):
    with KfpStandIn() as kfp:
        proc = submit(kfp.host, *args)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines()[-1] == message
        assert kfp.requests == []


RETRIES_WARNING = (
    "stock installs from 2.17.0 set workflowDefaults.spec.templateDefaults.retryStrategy "
    "{limit: '2', retryPolicy: OnError}"
)
NOT_READ_WARNING = "newer than the releases this package was read against (2.15.0 to 2.18.x)"


@pytest.mark.parametrize(
    ("tag", "refused", "says"),
    [
        # secretAsEnv.optional: 2.14's Argo compiler refuses it.
        (
            "2.14.0",
            "error: the Kubeflow Pipelines backend is 2.14.0; this package needs 2.15.0 "
            "or later for secretAsEnv.optional",
            None,
        ),
        ("2.15.0", None, None),
        ("2.17.0", None, RETRIES_WARNING),
        ("2.19.0", None, NOT_READ_WARNING),
        (
            "3.0.0",
            "error: the Kubeflow Pipelines backend is 3.0.0; this package supports "
            "2.15.0 to 2.18.x. The 3.x line removes ML Metadata",
            None,
        ),
        (
            "unknown",
            None,
            "warning: could not read the Kubeflow Pipelines backend's release "
            "(healthz tag_name); this package needs 2.15.0 to 2.18.x",
        ),
    ],
)
def test_submit_says_what_the_backends_release_means(tag, refused, says):
    with KfpStandIn(tag_name=tag) as kfp:
        proc = submit(kfp.host)
        runs = kfp.posted("/apis/v2beta1/runs")
        experiments = kfp.posted("/apis/v2beta1/experiments")
    # Ours, not uv's (it warns about VIRTUAL_ENV on the same stream).
    warnings = [
        line
        for line in proc.stderr.splitlines()
        if line.startswith("warning: ") and "Kubeflow Pipelines" in line
    ]
    if refused:
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines()[-1].startswith(refused)
        assert (runs, experiments) == ([], [])
        return
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(runs) == 1
    if says is None:
        assert warnings == []
    else:
        assert any(says in line for line in warnings), proc.stderr
    # Every 2.17+ backend gets the retries warning, a newer one too.
    assert any(RETRIES_WARNING in w for w in warnings) is (tag in ("2.17.0", "2.19.0"))


@pytest.mark.parametrize(
    ("tag", "release", "refused", "warned"),
    [
        ("2.15.0", (2, 15, 0), False, 0),
        ("v2.15.1", (2, 15, 1), False, 0),
        ("2.15.0-rc.1", (2, 15, 0), False, 0),
        ("2.16.1", (2, 16, 1), False, 0),
        ("2.17.0", (2, 17, 0), False, 1),
        ("2.18.2", (2, 18, 2), False, 1),
        ("2.19.0", (2, 19, 0), False, 2),
        ("2.14.4", (2, 14, 4), True, 0),
        ("2.13.9", (2, 13, 9), True, 0),
        ("2.5", (2, 5, 0), True, 0),
        ("3.0.0", (3, 0, 0), True, 0),
        ("v3.0.0-rc.1", (3, 0, 0), True, 0),
        ("unknown", None, False, 1),
        ("", None, False, 1),
    ],
)
def test_release_tags_as_the_api_server_reports_them(tag, release, refused, warned):
    assert backend.parse_release(tag) == release
    assert bool(backend.refusal(tag)) is refused
    if not refused:
        assert len(backend.warnings(tag)) == warned


def test_the_compile_and_the_docs_state_one_range():
    assert backend.requirement().startswith(
        f"Kubeflow Pipelines backend {backend.MINIMUM_TEXT} to {backend.NEWEST_READ_TEXT} "
    )
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"**{backend.MINIMUM_TEXT} to {backend.NEWEST_READ_TEXT}**" in readme


def test_the_tuning_package_is_never_scheduled(tmp_path):
    """Scheduled runs never tune (docs/tuning.md): `--schedule` refuses the tuning
    package in one line, before any call; one run of it is submitted."""
    from kubeflow import compile as kfp_compile
    from kubeflow import package_settings

    settings = package_settings.load_tuning_settings(TEMPLATE_SETTINGS_FILE)
    spec, platform = kfp_compile.compile_tuning_pipeline(settings)
    kfp_compile.write_package(tmp_path / "tuning.yaml", spec, platform)
    with KfpStandIn() as kfp:
        scheduled = submit(kfp.host, "--schedule", package=tmp_path / "tuning.yaml")
        assert kfp.requests == []
        once = submit(kfp.host, package=tmp_path / "tuning.yaml")
        assert once.returncode == 0, once.stderr[-3000:]
    assert scheduled.returncode == 2
    (line,) = [line for line in scheduled.stderr.splitlines() if line.startswith("error:")]
    assert "is the tuning package, and scheduled runs never tune" in line


def test_a_flag_path_outside_the_namespaces_prefix_is_refused_before_any_request(tmp_path):
    """With the platform's store preset, --data-root and --pipeline-root are held to the
    prefixes the namespace's secret may use, as the settings' own paths are."""
    settings = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    del settings["pipeline_root"], settings["serving_model_dir"]
    settings["kfp"] = {"namespace": "kubeflow-user-example-com"}
    settings["object_store"] = {"preset": "kubeflow-platform"}
    home = "s3://mlpipeline/private-artifacts/kubeflow-user-example-com"
    settings["parameters"]["data_root"] = f"{home}/data"
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(settings))
    with KfpStandIn(multi_user=True) as kfp:
        outside = "s3://mlpipeline/private-artifacts/team-b/data"
        data = submit(kfp.host, "--config", str(config), "--data-root", outside)
        root = submit(kfp.host, "--config", str(config), "--pipeline-root", "s3://other/tfx")
        assert kfp.requests == []
    for proc, flag in ((data, "--data-root"), (root, "--pipeline-root")):
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {flag}: s3://")
        assert "is outside the prefixes namespace kubeflow-user-example-com" in proc.stderr
