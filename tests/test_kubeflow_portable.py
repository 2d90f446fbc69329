"""The compiled package with every Beam step on `flink`, through Beam's portable job API.

Beam's own job service (`local_job_service_main`, standing in for Flink's job
server) and worker pool (`worker_pool_main`, what the sidecar of each task
manager runs) start on free loopback ports from the project's environment.
The pool starts each worker through tests/beam_boot.py, which does what the
image's Go boot binary does there (pipeline options from the provision
service into `sdk_worker_main`).
The package, compiled with the Kubernetes defaults (EXTERNAL workers) and
s3:// roots on a loopback S3 server, is executed as
tests/test_kubeflow_executed.py does. Each step gets only its pod's
environment, and the worker pool only what `kubeflow.worker_pool`'s sidecar
gives it.

Reproduced: the Job API (prepare, stage artifacts, run, state), artifact
staging, the Fn API to external workers, the compiled options. Not: Flink's
or Spark's translation of the pipeline, the Java job servers, a distributed
shuffle, the Go boot binary itself, workers on other machines.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kubeflow.compile import pipeline_step_ids
from kubeflow.settings import KubeflowSettings, load_settings
from kubeflow.worker_pool import sidecar_container
from pipeline.beam import JOB_SERVICE_TIMEOUT_S
from pipeline.steps import DAG_STEPS
from tests.conftest import read_taxi_rows, write_csv
from tests.harness import (
    DATA_ROOT,
    SERVING_DIR,
    assert_scores_raw_rows,
    compile_package,
    execute,
    execute_isolated,
    local_settings,
    refusing_port,
    s3_settings,
)
from tests.s3_standin import s3_standin

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

ROWS = 600
BOOT = Path(__file__).resolve().parent / "beam_boot.py"
WORKER_POOL = Path(__file__).resolve().parent / "beam_worker_pool.py"
SERVICE_START_TIMEOUT_S = 120


def read_address(address_file: Path, process: subprocess.Popen, timeout_s: float) -> str:
    """The address a service bound on port 0 and wrote to `address_file`."""
    deadline = time.monotonic() + timeout_s
    while not address_file.exists():
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{process.args} wrote no address within {timeout_s} s")
        time.sleep(0.1)
    text = address_file.read_text().strip()
    return text if ":" in text else f"localhost:{text}"


def wait_for_grpc(address: str, process: subprocess.Popen, timeout_s: float) -> None:
    import grpc

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        with contextlib.closing(grpc.insecure_channel(address)) as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=2)
                return
            except grpc.FutureTimeoutError:
                continue
    raise TimeoutError(f"nothing answered at {address} within {timeout_s} s")


def pod_environment(container: dict, secrets: dict[str, dict[str, str]], home: Path) -> dict:
    """What Kubernetes gives a container: its `env`, secret references resolved."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home)}
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
        else:
            ref = variable["valueFrom"]["secretKeyRef"]
            env[variable["name"]] = secrets[ref["name"]][ref["key"]]
    return env


@contextlib.contextmanager
def beam_process(args: list[str], env: dict, cwd: Path, address_file: Path):
    """A Beam service (`python ARGS`) on a port it binds itself (0) and writes to
    `address_file`; its address, once it answers."""
    log = (cwd / f"{address_file.stem}.log").open("w")
    process = subprocess.Popen([sys.executable, *args], env=env, cwd=cwd, stdout=log, stderr=log)
    try:
        address = read_address(address_file, process, SERVICE_START_TIMEOUT_S)
        wait_for_grpc(address, process, SERVICE_START_TIMEOUT_S)
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def flink_settings(path: Path, job_endpoint: str, pool_address: str) -> KubeflowSettings:
    """`path`'s settings with every Beam step on flink, workers as the defaults say."""
    raw = yaml.safe_load(path.read_text())
    raw["beam"] = {
        "defaults": {
            "engine": "flink",
            "options": {
                "job_endpoint": job_endpoint,
                # The pool listens on a port of its own here; in a pod, localhost:50000.
                "environment_config": pool_address,
            },
        }
    }
    path.write_text(yaml.safe_dump(raw))
    return load_settings(path, pipeline_step_ids(), set(DAG_STEPS.beam_ids))


@pytest.fixture(scope="module")
def portable(tmp_path_factory):
    from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc

    tmp = tmp_path_factory.mktemp("kubeflow_portable")
    header, rows = read_taxi_rows(limit=ROWS)
    with s3_standin() as store:
        store.upload(write_csv(tmp / "data.csv", header, rows), f"{DATA_ROOT}/data.csv")
        settings_file = s3_settings(tmp, store.endpoint)
        # The sidecar's environment is the store's; the Beam addresses come after.
        settings = load_settings(settings_file, pipeline_step_ids(), set(DAG_STEPS.beam_ids))
        secrets = {settings.object_store.credentials.secret: store.secret_data()}
        pool_env = pod_environment(sidecar_container(settings), secrets, tmp)
        # Flink's job server is Java and touches no artifact; this one gets no store access.
        service_env = {"PATH": pool_env["PATH"], "HOME": str(tmp)}
        job_port_file, pool_address_file = tmp / "job.port", tmp / "pool.address"
        with (
            beam_process(
                ["-m", "apache_beam.runners.portability.local_job_service_main",
                 "--port", "0", "--port_file", str(job_port_file)],
                service_env, tmp, job_port_file,
            ) as job_endpoint,
            beam_process(
                [str(WORKER_POOL), str(pool_address_file), str(BOOT)],
                pool_env, tmp, pool_address_file,
            ) as pool_address,
        ):  # fmt: skip
            flink_settings(settings_file, job_endpoint, pool_address)
            package = compile_package(settings_file, tmp / "pipeline.yaml")
            summary = execute_isolated(package, tmp, "portable", store.secret_data())
            import grpc

            with contextlib.closing(grpc.insecure_channel(job_endpoint)) as channel:
                service = beam_job_api_pb2_grpc.JobServiceStub(channel)
                jobs = service.GetJobs(beam_job_api_pb2.GetJobsRequest()).job_info
        (version,) = store.children(SERVING_DIR)
        model_dir = store.download(f"{SERVING_DIR}/{version}", tmp / "model")
        raw_rows = store.read_csv(f"{DATA_ROOT}/data.csv")[:50]
        yield {
            "summary": summary,
            "jobs": jobs,
            "model_dir": model_dir,
            "raw_rows": raw_rows,
            "package": package,
            "secret": store.secret_data(),
            "endpoint": store.endpoint,
        }


def test_every_beam_step_ran_as_a_job_of_the_job_service(portable):
    from apache_beam.portability.api import beam_job_api_pb2

    steps = portable["summary"]["steps"]
    assert all(step["status"] == "SUCCESS" for step in steps.values())
    # From the job service's own records: one finished job per Beam step.
    states = [beam_job_api_pb2.JobState.Enum.Name(job.state) for job in portable["jobs"]]
    assert states == ["DONE"] * len(DAG_STEPS.beam_ids), states


def test_pushed_model_scores_raw_rows(portable, taxi_spec):
    assert_scores_raw_rows(portable["model_dir"], portable["raw_rows"], taxi_spec)


def test_beam_steps_hand_workers_the_store_but_no_secret(portable):
    spec, _ = list(yaml.safe_load_all(portable["package"].read_text()))
    text = portable["package"].read_text()
    assert all(value not in text for value in portable["secret"].values())
    for step in DAG_STEPS.beam_ids:
        args = spec["deploymentSpec"]["executors"][f"{step}_executor"]["container"]["args"]
        assert "--environment_type=EXTERNAL" in args
        assert f"--s3_endpoint_url={portable['endpoint']}" in args
        assert "--s3_region_name=us-east-1" in args
        assert "--beam_plugins=pipeline.s3_plugin" in args


def test_job_endpoint_where_nothing_listens_fails_the_step_naming_it(tmp_path):
    header, rows = read_taxi_rows(limit=50)
    data_root = tmp_path / "data"
    write_csv(data_root / "data.csv", header, rows)
    # One attempt: what a dead endpoint's failure says is the subject here; that a failed
    # Beam step is retried is tests/test_retries.py's (executed packages, per backend).
    settings_file = local_settings(tmp_path, data_root, retries={"defaults": {"max_retries": 0}})
    with refusing_port() as dead, refusing_port() as no_pool:
        flink_settings(settings_file, f"localhost:{dead}", f"localhost:{no_pool}")
        package = compile_package(settings_file, tmp_path / "pipeline.yaml")
        summary = execute(package, tmp_path, "dead", expect_success=False)
    # Nothing after ExampleGen runs; the other root, SchemaImporter, runs no Beam and
    # may go before or after it (kfp.local, like Argo, goes on with other branches);
    # the exit handler runs last.
    assert sorted(summary["order"][:-1]) == [
        "CsvExampleGen",
        "InputSnapshot",
        "SchemaImporter",
    ], summary["order"]
    assert summary["order"][-1] == "RunStatus"
    step = summary["steps"]["CsvExampleGen"]
    assert step["status"] == "FAILURE"
    assert step["seconds"] < JOB_SERVICE_TIMEOUT_S + 45, step["seconds"]
    log = "\n".join(step["log_tail"])
    assert f"Beam job service at localhost:{dead} did not answer within" in log
    # The run's status report names the step and the job service.
    (report,) = summary["steps"]["RunStatus"]["outputs"]["report"]
    page = Path(report).read_text()
    assert "CsvExampleGen failed: JobServiceError" in page
    assert f"localhost:{dead}" in page
