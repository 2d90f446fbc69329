"""Submit and schedule through the real kfp client, against a stand-in KFP API on loopback."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from kubeflow import backend
from kubeflow.tfx_spec import all_tasks
from tests.conftest import REPO_ROOT, golden_path
from tests.kfp_standin import KfpStandIn
from tests.test_kubeflow_reference import REFERENCE_PROJECT, _uv

pytestmark = pytest.mark.slow

PACKAGE = golden_path("kubeflow_pipeline.yaml")


def submit(host: str, *args: str) -> subprocess.CompletedProcess:
    command = [_uv(), "run", "--project", str(REFERENCE_PROJECT), "--locked"]
    command += ["python", "-m", "kubeflow.submit", "--host", host, "--package", str(PACKAGE), *args]
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
    assert run["experiment_id"] == "exp-1"
    # The client sends the spec and, beside it, the Kubernetes platform section
    # (node selectors, tolerations) exactly as compiled.
    assert run["pipeline_spec"] == {"pipeline_spec": spec, "platform_spec": platform}
    assert run["runtime_config"]["parameters"] == {
        "data_root": "gs://bucket/data/2026-11",
        "train_args": '{"num_steps": 5000}',
    }


def test_schedule_creates_a_recurring_run_from_the_settings():
    with KfpStandIn() as kfp:
        proc = submit(kfp.host, "--schedule", "--train-steps", "300")
        assert proc.returncode == 0, proc.stderr[-3000:]
        (experiment,) = kfp.posted("/apis/v2beta1/experiments")
        (recurring,) = kfp.posted("/apis/v2beta1/recurringruns")
    assert experiment["display_name"] == "taxi-big-tipper"
    assert recurring["experiment_id"] == "exp-1"
    assert recurring["trigger"]["cron_schedule"]["cron"] == "0 0 3 * * *"
    assert recurring["max_concurrency"] in (1, "1")
    assert recurring["no_catchup"] is True
    assert recurring["runtime_config"]["parameters"] == {"train_args": '{"num_steps": 300}'}
    assert "Trainer" in all_tasks(recurring["pipeline_spec"]["pipeline_spec"])
    assert recurring["pipeline_spec"]["platform_spec"]["platforms"]["kubernetes"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--train-steps", "0"), "error: --train-steps: must be > 0, got 0"),
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


def test_a_backend_older_than_the_package_needs_is_refused_before_any_run():
    with KfpStandIn(tag_name="2.13.0") as kfp:
        proc = submit(kfp.host)
        assert proc.returncode == 2
        assert kfp.posted("/apis/v2beta1/experiments") == []
        assert kfp.posted("/apis/v2beta1/runs") == []
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(
            f"error: the Kubeflow Pipelines backend is 2.13.0; this package needs "
            f"{backend.MINIMUM_TEXT} or later for retries of steps inside the exit handler's "
            "sub-DAG"
        )
    )


def test_a_backend_that_names_no_release_is_warned_about_and_used():
    with KfpStandIn(tag_name="unknown") as kfp:
        proc = submit(kfp.host)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert len(kfp.posted("/apis/v2beta1/runs")) == 1
    assert (
        "warning: could not read the Kubeflow Pipelines backend's release (healthz tag_name); "
        f"this package needs {backend.MINIMUM_TEXT} or later"
    ) in proc.stderr


@pytest.mark.parametrize(
    ("tag", "release", "refused"),
    [
        ("2.14.0", (2, 14, 0), False),
        ("v2.15.1", (2, 15, 1), False),
        ("2.14.0-rc.1", (2, 14, 0), False),
        ("2.13.9", (2, 13, 9), True),
        ("2.5", (2, 5, 0), True),
        ("unknown", None, False),
        ("", None, False),
    ],
)
def test_release_tags_as_the_api_server_reports_them(tag, release, refused):
    assert backend.parse_release(tag) == release
    assert bool(backend.too_old(tag)) is refused
