"""The compiled package against the services a cluster gives it: an S3-compatible
store for its pipeline root, serving directory and data, and a Beam job service for
its Beam steps.

An S3 server runs on loopback (moto's; see tests/s3_standin.py for what it is
not). Beam's own job service (`local_job_service_main`, standing in for
Flink's job server) and worker pool (`worker_pool_main`, what the sidecar of
each task manager runs) start on loopback ports they bind themselves, from the
project's environment; the pool starts each worker through
tests/beam_boot.py, which does what the image's Go boot binary does there
(pipeline options from the provision service into `sdk_worker_main`).

The package is compiled with `object_store:` pointing at the store and every
Beam step on `flink` (the Kubernetes defaults: EXTERNAL workers), and executed
step by step as tests/test_kubeflow_executed.py does, twice, each step with
only the environment its pod would get: the container spec's `env` and the
credentials secret of the platform spec, resolved from a fake secret. Nothing
is inherited from this process, so a variable the compile forgot fails the
step; the worker pool gets only what `kubeflow.worker_pool`'s sidecar gives
it. The workers of the default multi-processing mode, which register s3://
through `--beam_plugins`, are tested on their own below.

The data is Parquet as Spark writes a table (part files of several row groups,
a `_SUCCESS` marker, `.crc` checksums): ExampleGen plans the row groups from the
footers in its pod, and the workers read each from the store (the other
executed packages read CSV).

Reproduced: the Job API (prepare, stage artifacts, run, state), artifact
staging, the Fn API to external workers, the compiled options, the launcher's
downloads. Not: Flink's or Spark's translation of the pipeline, the Java job
servers, a distributed shuffle, the Go boot binary itself, workers on other
machines.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from components.store_files import CONNECT_TIMEOUT_S
from kubeflow.package_settings import pipeline_step_ids
from kubeflow.settings import KubeflowSettings, load_settings
from kubeflow.worker_pool import sidecar_container
from pipeline.beam import beam_pipeline_args
from pipeline.object_store import BEAM_PLUGIN_MODULE, ObjectStoreError, check_reachable
from pipeline.steps import DAG_STEPS
from tests.conftest import REPO_ROOT, read_taxi_rows, taxi_as_parquet, write_csv
from tests.harness import (
    DATA_ROOT,
    PIPELINE_ROOT,
    SERVING_DIR,
    assert_scores_raw_rows,
    compile_package,
    execute,
    execute_isolated,
    local_settings,
    refusing_port,
    run_example_gen,
    s3_settings,
    split_records,
)
from tests.s3_standin import s3_standin, silent_endpoint

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

# The fewest rows that give the Evaluator both classes in every slice it gates on.
ROWS = 600
# A refused connection fails each of the check's attempts at once, and boto3's standard
# retries wait at most 0.05 s, then 0.1 s, between attempts on an error that is not
# throttling (botocore 1.44, retries/standard.py, `ExponentialBackoff`): the client's
# set-up is most of this, with margin for a loaded 2-core machine. One connect timeout
# (CONNECT_TIMEOUT_S) already exceeds it.
REFUSAL_BOUND_S = 3
# A step's process before its check (starting Python, importing TensorFlow and TFX),
# with margin for a loaded 2-core machine; docs/object-stores.md gives what it measured.
STEP_START_UP_BOUND_S = 60
# The dead job endpoint's wait, set as a fork sets it (Beam's `job_server_timeout`):
# shorter than the default a step waits (tests/test_beam_options.py checks both).
DEAD_ENDPOINT_WAIT_S = 2


@pytest.fixture(scope="module")
def store():
    with s3_standin() as standin:
        yield standin


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


def flink_settings(
    path: Path, job_endpoint: str, pool_address: str, **options: int
) -> KubeflowSettings:
    """`path`'s settings with every Beam step on flink, workers as the defaults say;
    `options`: further Beam options."""
    raw = yaml.safe_load(path.read_text())
    raw["beam"] = {
        "defaults": {
            "engine": "flink",
            "options": {
                "job_endpoint": job_endpoint,
                # The pool listens on a port of its own here; in a pod, localhost:50000.
                "environment_config": pool_address,
                **options,
            },
        }
    }
    path.write_text(yaml.safe_dump(raw))
    return load_settings(path, pipeline_step_ids(), set(DAG_STEPS.beam_ids))


@pytest.fixture(scope="module")
def executions(store, tmp_path_factory):
    from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc

    tmp = tmp_path_factory.mktemp("kubeflow_cluster")
    header, rows = read_taxi_rows(limit=ROWS)
    # The data as Spark writes a table: its row groups are the Beam elements the
    # external workers read from the store (the other executed packages read CSV).
    parquet = taxi_as_parquet(write_csv(tmp / "data.csv", header, rows), tmp / "parquet", 2, 100)
    for path in parquet.iterdir():
        store.upload(path, f"{DATA_ROOT}/{path.name}")
    settings_file = s3_settings(tmp, store.endpoint)
    # The sidecar's environment is the store's; the Beam addresses come after.
    settings = load_settings(settings_file, pipeline_step_ids(), set(DAG_STEPS.beam_ids))
    secrets = {settings.object_store.credentials.secret: store.secret_data()}
    pool_env = pod_environment(sidecar_container(settings), secrets, tmp)
    # Flink's job server is Java and touches no artifact; this one gets no store access.
    service_env = {"PATH": pool_env["PATH"], "HOME": str(tmp)}
    job_port_file, pool_address_file = tmp / "job.port", tmp / "pool.address"
    # The second execution takes the data steps and the Trainer from kfp.local's
    # cache (their outputs stay in the bucket) and runs what reads the serving dir.
    cache = {"cache_root": tmp / "kfp-cache"}
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
        first = execute_isolated(package, tmp, "first", store.secret_data(), **cache)
        import grpc

        with contextlib.closing(grpc.insecure_channel(job_endpoint)) as channel:
            service = beam_job_api_pb2_grpc.JobServiceStub(channel)
            jobs = service.GetJobs(beam_job_api_pb2.GetJobsRequest()).job_info
        served_after_first = store.children(SERVING_DIR)
        second = execute_isolated(package, tmp, "second", store.secret_data(), **cache)
    return {
        "tmp": tmp,
        "parquet": parquet,
        "first": first,
        "second": second,
        "served": served_after_first,
        "jobs": jobs,
        "package": package,
        "secret": store.secret_data(),
        "endpoint": store.endpoint,
    }


def test_every_artifact_is_written_to_the_store(executions, store):
    for name in ("first", "second"):
        # (A step taken from cache has no outputs of its own in the summary.)
        uris = [u for step in executions[name]["steps"].values()
                for us in step.get("outputs", {}).values() for u in us]  # fmt: skip
        assert uris and all(u.startswith(PIPELINE_ROOT + "/") for u in uris), uris
    examples = executions["first"]["steps"]["ExampleGen"]["outputs"]["examples"][0]
    assert any("/Split-train/" in key for key in store.keys(examples))


def test_no_step_leaves_a_folder_marker(executions, store):
    """KFP's launcher fails to download an input that holds a zero-byte key ending in "/".

    kubeflow/pipelines#13476 (backend/src/v2/objectstore/object_store.go at
    2.17.0); docs/object-stores.md, "Inputs the launcher downloads".
    """
    assert store.keys(PIPELINE_ROOT + "/") and store.keys(SERVING_DIR + "/")
    assert store.folder_markers(PIPELINE_ROOT + "/") == []
    assert store.folder_markers(SERVING_DIR + "/") == []


def test_each_step_ran_after_the_launcher_downloaded_its_inputs_into_its_pod(executions):
    """As on a 2.15+ backend: every input artifact copied to /s3/... first, and the
    executor output file under the task root's local path (docs/executed-spec.md)."""
    steps = executions["first"]["steps"]
    for step_id, step in steps.items():
        has_inputs = any(step["handed"]["inputs"].values())
        assert (step["downloaded_bytes"] > 0) == has_inputs, step_id
        assert "/s3/pipelines/tfx/taxi/" in step["handed"]["output_file"], step_id
    # The Trainer's inputs: the transformed examples, the graph and the schema.
    assert steps["Trainer"]["downloaded_bytes"] > 10_000


def test_pushed_model_sits_in_the_bucket_and_scores_raw_rows_read_back(
    executions, store, taxi_spec, tmp_path
):
    (version,) = executions["served"]
    model_dir = store.download(f"{SERVING_DIR}/{version}", tmp_path / "model")
    _, rows = read_taxi_rows(limit=50)
    assert_scores_raw_rows(model_dir, rows, taxi_spec)
    # The report is the object at its artifact's URI, where the KFP UI reads it.
    report = executions["first"]["steps"]["RunReport"]["outputs"]["report"][0]
    html = store.client().get_object(Bucket="pipelines", Key=report[len("s3://pipelines/") :])
    assert "BLESSED" in html["Body"].read().decode()
    # The exit handler found every step's record in the bucket.
    status = executions["first"]["steps"]["RunStatus"]["outputs"]["report"][0]
    page = store.client().get_object(Bucket="pipelines", Key=status[len("s3://pipelines/") :])
    assert (
        page["Body"].read().decode().count('data-state="succeeded"')
        == len(executions["first"]["steps"]) - 1
    )


def test_example_gen_read_the_parquet_files_on_s3_as_they_are_read_locally(
    executions, store, tmp_path, taxi_spec
):
    """Footers planned in the step's pod, row groups read by the job service's workers
    through Beam's S3 filesystem; the examples are a local in-memory read's, with the
    dataset's ignored columns left unread as the package's ExampleGen leaves them."""
    from tfx.utils import proto_utils

    from components.example_gen.executor import INPUT_WINDOW_KEY, SpanResolvingExecutor
    from components.example_gen.input_settings import input_config, input_window

    (examples,) = executions["first"]["steps"]["ExampleGen"]["outputs"]["examples"]
    from_store = store.download(examples, tmp_path / "examples")
    properties = {
        "input_config": proto_utils.proto_to_json(input_config(None)),
        INPUT_WINDOW_KEY: input_window(None, 1, ignore=tuple(taxi_spec.ignore)),
    }
    local = run_example_gen(
        SpanResolvingExecutor, executions["parquet"], tmp_path / "local", properties
    )
    records = split_records(local)
    assert split_records(SimpleNamespace(uri=str(from_store))) == records
    assert sum(len(r) for r in records.values()) == ROWS


def test_second_execution_finds_the_first_model_as_its_baseline(executions, store, tmp_path):
    from components.report.evaluation import read_evaluation

    steps = executions["second"]["steps"]
    assert steps["Trainer"]["status"] == "CACHED" and steps["Evaluator"]["status"] == "SUCCESS"
    (version,) = executions["served"]
    baseline = executions["second"]["steps"]["LatestServedModel"]["executor_output"]
    metadata = baseline["artifacts"]["baseline_model"]["artifacts"][0]["metadata"]
    assert metadata["served_path"] == f"{SERVING_DIR}/{version}"
    evaluation = executions["second"]["steps"]["Evaluator"]["outputs"]["evaluation"][0]
    assert read_evaluation(str(store.download(evaluation, tmp_path / "eval"))).has_baseline


def test_steps_exit_zero_and_start_up_is_measured(executions, capsys):
    steps = executions["first"]["steps"]
    assert all(v["status"] == "SUCCESS" for v in steps.values())
    # Each step's TFX executor started, after its process and before its end.
    for step_id, step in steps.items():
        assert step["startup_seconds"] is not None, step_id
        assert 0 < step["startup_seconds"] < step["seconds"], (step_id, step)
    lines = [
        f"{k:<20} {v['startup_seconds']:>10.1f} {v['seconds']:>8.1f}" for k, v in steps.items()
    ]
    with capsys.disabled():
        print("\nOn s3:// (start-up s, total s):\n" + "\n".join(lines))
        first, second = executions["first"]["seconds"], executions["second"]["seconds"]
        print(f"executions: {first:.1f} s, then {second:.1f} s")


def steps_that_ran(summary: dict) -> list[dict]:
    """The steps an execution that the store stopped ran: the DAG's two roots, and the exit handler.

    Both roots need the store (SchemaImporter copies the schema into the
    pipeline root, InputSnapshot lists the data root), and both start, since
    neither waits for the other; nothing after them does. The exit handler
    runs after them, meets the same store, and fails the same way: no report.
    """
    assert sorted(summary["order"][:-1]) == ["InputSnapshot", "SchemaImporter"], summary["order"]
    assert summary["order"][-1] == "RunStatus"
    steps = [summary["steps"][step_id] for step_id in summary["order"]]
    assert all(step["status"] == "FAILURE" for step in steps), steps
    return steps


def test_wrong_credentials_fail_the_first_step_naming_the_store(store, tmp_path):
    package = compile_package(s3_settings(tmp_path, store.endpoint), tmp_path / "pipeline.yaml")
    wrong = {**store.secret_data(), "secretkey": "not-the-secret"}
    summary = execute_isolated(package, tmp_path, "wrong", wrong, expect_success=False)
    for step in steps_that_ran(summary):
        log = "\n".join(step["log_tail"])
        assert (
            f"object store {store.endpoint}, bucket 'pipelines': refused with "
            "SignatureDoesNotMatch" in log
        )
        assert "AWS_SECRET_ACCESS_KEY" in log


def test_missing_secret_key_fails_the_step_as_kubernetes_would(store, tmp_path):
    package = compile_package(s3_settings(tmp_path, store.endpoint), tmp_path / "pipeline.yaml")
    summary = execute_isolated(
        package, tmp_path, "nokey", {"accesskey": store.access_key_id}, expect_success=False
    )
    for step in steps_that_ran(summary):
        assert "couldn't find key secretkey in Secret pipeline-store" in "\n".join(step["log_tail"])


def use_store(monkeypatch, endpoint: str) -> None:
    """This process reaches `endpoint` as a step does, with made-up keys."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "b")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def test_a_refused_connection_is_given_up_at_once(monkeypatch):
    """The check's attempts on a port that refuses connections wait out no timeout."""
    with refusing_port() as port:
        endpoint = f"http://127.0.0.1:{port}"
        use_store(monkeypatch, endpoint)
        started = time.monotonic()
        with pytest.raises(ObjectStoreError, match=rf"object store {endpoint}, .*: no answer"):
            check_reachable([f"{PIPELINE_ROOT}/x"])
        spent = time.monotonic() - started
    assert spent < REFUSAL_BOUND_S < CONNECT_TIMEOUT_S, spent


def test_an_unreachable_store_fails_each_step_within_a_bounded_time(store, tmp_path):
    """Every step that meets the store gives up, naming it, in its start-up and a refusal's
    time. The endpoint refuses connections, so the check's attempts fail at once (the
    test before); a store that accepts and never answers costs the whole budget, once
    per step, and is given up within it (the next test, on the same check)."""
    with refusing_port() as port:
        endpoint = f"http://127.0.0.1:{port}"
        package = compile_package(s3_settings(tmp_path, endpoint), tmp_path / "pipeline.yaml")
        summary = execute_isolated(
            package, tmp_path, "refused", store.secret_data(), expect_success=False
        )
    for step in steps_that_ran(summary):
        assert step["seconds"] < STEP_START_UP_BOUND_S + REFUSAL_BOUND_S, step["seconds"]
        log = "\n".join(step["log_tail"])
        assert f"object store {endpoint}, bucket 'pipelines': no answer" in log


def test_a_store_that_never_answers_is_given_up_within_the_checks_budget(monkeypatch):
    """The check hands boto3 its attempts and its connect and read timeouts, so a store
    that accepts connections and never answers costs at most attempts x (connect + read).
    Checked with shorter waits than the product's (5 s and 15 s, three attempts: a
    minute of a test worker doing nothing); the same client is built either way (in
    components/store_files.py, which the light steps use too)."""
    from components import store_files

    monkeypatch.setattr(store_files, "CONNECT_TIMEOUT_S", 1)
    monkeypatch.setattr(store_files, "READ_TIMEOUT_S", 2)
    budget = store_files.MAX_ATTEMPTS * (1 + 2)
    with silent_endpoint() as endpoint:
        use_store(monkeypatch, endpoint)
        started = time.monotonic()
        with pytest.raises(ObjectStoreError) as raised:
            check_reachable([f"{PIPELINE_ROOT}/x"])
        spent = time.monotonic() - started
    # Each attempt connects and then waits out the read timeout: the waits are the ones set.
    # (boto3's standard mode also sleeps up to 1 s, then 2 s, between attempts.)
    assert store_files.MAX_ATTEMPTS * 2 <= spent < budget + 3 + 5, spent
    assert f"object store {endpoint}, bucket 'pipelines': no answer" in str(raised.value)
    assert "after 3 attempts (1 s to connect, 2 s to read)" in str(raised.value)


@pytest.mark.parametrize("plugin", [True, False], ids=["with_plugin", "without_plugin"])
def test_beam_worker_processes_read_s3_through_the_plugin(store, plugin, tmp_path):
    """The compiled `--beam_plugins` is what lets TensorFlow in a Beam worker reach s3://."""
    prefix = f"s3://pipelines/probe/{'with' if plugin else 'without'}"
    beam_args = beam_pipeline_args("multi_processing", num_workers=1)
    beam_args += [f"--beam_plugins={BEAM_PLUGIN_MODULE}"] if plugin else []
    proc = subprocess.run(
        [sys.executable, "-m", "tests.beam_worker_probe", prefix, *beam_args],
        cwd=REPO_ROOT, env=store.shell_environment(tmp_path), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    written = sorted(store.keys(prefix + "/"))
    if plugin:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert written == ["probe/with/1.txt", "probe/with/2.txt"]
    else:
        assert proc.returncode != 0 and written == []
        assert "File system scheme 's3' not implemented" in proc.stderr


def test_every_beam_step_ran_as_a_job_of_the_job_service(executions):
    from apache_beam.portability.api import beam_job_api_pb2

    # From the job service's own records: one finished job per Beam step of the first
    # execution (test_steps_exit_zero_and_start_up_is_measured: each step succeeded).
    states = [beam_job_api_pb2.JobState.Enum.Name(job.state) for job in executions["jobs"]]
    assert states == ["DONE"] * len(DAG_STEPS.beam_ids), states


def test_beam_steps_hand_workers_the_store_but_no_secret(executions):
    spec, _ = list(yaml.safe_load_all(executions["package"].read_text()))
    text = executions["package"].read_text()
    assert all(value not in text for value in executions["secret"].values())
    for step in DAG_STEPS.beam_ids:
        args = spec["deploymentSpec"]["executors"][f"{step}_executor"]["container"]["args"]
        assert "--environment_type=EXTERNAL" in args
        assert f"--s3_endpoint_url={executions['endpoint']}" in args
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
        # Beam's own option for the wait (the docs' setting), shorter than its default.
        flink_settings(
            settings_file,
            f"localhost:{dead}",
            f"localhost:{no_pool}",
            job_server_timeout=DEAD_ENDPOINT_WAIT_S,
        )
        package = compile_package(settings_file, tmp_path / "pipeline.yaml")
        summary = execute(package, tmp_path, "dead", expect_success=False)
    # Nothing after ExampleGen runs; the other root, SchemaImporter, runs no Beam and
    # may go before or after it (kfp.local, like Argo, goes on with other branches);
    # the exit handler runs last.
    assert sorted(summary["order"][:-1]) == [
        "ExampleGen",
        "InputSnapshot",
        "SchemaImporter",
    ], summary["order"]
    assert summary["order"][-1] == "RunStatus"
    step = summary["steps"]["ExampleGen"]
    assert step["status"] == "FAILURE"
    assert step["seconds"] < DEAD_ENDPOINT_WAIT_S + 45, step["seconds"]
    log = "\n".join(step["log_tail"])
    assert (
        f"Beam job service at localhost:{dead} did not answer within {DEAD_ENDPOINT_WAIT_S} s"
        in log
    )
    # The run's status report names the step and the job service.
    (report,) = summary["steps"]["RunStatus"]["outputs"]["report"]
    page = Path(report).read_text()
    assert "ExampleGen failed: JobServiceError" in page
    assert f"localhost:{dead}" in page
