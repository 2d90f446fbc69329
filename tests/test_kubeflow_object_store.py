"""The compiled package on an S3-compatible store: pipeline root, serving dir and data on s3://.

An S3 server runs on loopback (moto's; see tests/s3_standin.py for what it is
not). The package is compiled with `object_store:` pointing at it and
executed step by step as `tests/test_kubeflow_executed.py` does, twice, each
step with only the environment its pod would get: the container spec's `env`
and the credentials secret of the platform spec, resolved from a fake
secret. Nothing is inherited from this process, so a variable the compile
forgot fails the step. The Beam steps run in-memory here (a thousand rows);
the workers of the default multi-processing mode, which register s3://
through `--beam_plugins`, are tested on their own below.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from pipeline.object_store import (
    BEAM_PLUGIN_MODULE,
    CONNECT_TIMEOUT_S,
    MAX_ATTEMPTS,
    READ_TIMEOUT_S,
    ObjectStoreError,
    check_reachable,
)
from tests.conftest import REPO_ROOT, read_taxi_rows, write_csv
from tests.harness import (
    DATA_ROOT,
    PIPELINE_ROOT,
    SERVING_DIR,
    assert_scores_raw_rows,
    compile_package,
    execute_isolated,
    refusing_port,
    s3_settings,
)
from tests.s3_standin import s3_standin, silent_endpoint

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

# The fewest rows that give the Evaluator both classes in every slice it gates on.
ROWS = 600
# The store check's worst case, plus the step's start-up.
UNREACHABLE_BOUND_S = MAX_ATTEMPTS * (CONNECT_TIMEOUT_S + READ_TIMEOUT_S) + 60


@pytest.fixture(scope="module")
def store():
    with s3_standin() as standin:
        yield standin


@pytest.fixture(scope="module")
def executions(store, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kubeflow_s3")
    header, rows = read_taxi_rows(limit=ROWS)
    store.upload(write_csv(tmp / "data.csv", header, rows), f"{DATA_ROOT}/data.csv")
    package = compile_package(s3_settings(tmp, store.endpoint), tmp / "pipeline.yaml")
    # The second execution takes the data steps and the Trainer from kfp.local's
    # cache (their outputs stay in the bucket) and runs what reads the serving dir.
    cache = {"cache_root": tmp / "kfp-cache"}
    first = execute_isolated(package, tmp, "first", store.secret_data(), **cache)
    served_after_first = store.children(SERVING_DIR)
    second = execute_isolated(package, tmp, "second", store.secret_data(), **cache)
    return {"tmp": tmp, "first": first, "second": second, "served": served_after_first}


def test_every_artifact_is_written_to_the_store(executions, store):
    for name in ("first", "second"):
        # (A step taken from cache has no outputs of its own in the summary.)
        uris = [u for step in executions[name]["steps"].values()
                for us in step.get("outputs", {}).values() for u in us]  # fmt: skip
        assert uris and all(u.startswith(PIPELINE_ROOT + "/") for u in uris), uris
    examples = executions["first"]["steps"]["CsvExampleGen"]["outputs"]["examples"][0]
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
    assert_scores_raw_rows(model_dir, store.read_csv(f"{DATA_ROOT}/data.csv")[:50], taxi_spec)
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


def test_second_execution_finds_the_first_model_as_its_baseline(executions, store, tmp_path):
    from components.report.contents import read_evaluation

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
    lines = [
        f"{k:<20} {v['startup_seconds'] or 0:>10.1f} {v['seconds']:>8.1f}" for k, v in steps.items()
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


def test_an_unreachable_store_fails_each_step_within_a_bounded_time(store, tmp_path):
    """Every step that meets the store gives up within the check's budget, naming it. The
    endpoint refuses connections, so the steps fail after the check's retries; a store
    that accepts and never answers costs the whole budget, once per step, and is given
    up within it (the next test, on the same check)."""
    with refusing_port() as port:
        endpoint = f"http://127.0.0.1:{port}"
        package = compile_package(s3_settings(tmp_path, endpoint), tmp_path / "pipeline.yaml")
        summary = execute_isolated(
            package, tmp_path, "refused", store.secret_data(), expect_success=False
        )
    for step in steps_that_ran(summary):
        assert step["seconds"] < UNREACHABLE_BOUND_S, step["seconds"]
        log = "\n".join(step["log_tail"])
        assert f"object store {endpoint}, bucket 'pipelines': no answer" in log


def test_a_store_that_never_answers_is_given_up_within_the_checks_budget(monkeypatch):
    """The check hands boto3 its attempts and its connect and read timeouts, so a store
    that accepts connections and never answers costs at most attempts x (connect + read).
    Checked with shorter waits than the product's (5 s and 15 s, three attempts: a
    minute of a test worker doing nothing); the same client is built either way."""
    from pipeline import object_store

    monkeypatch.setattr(object_store, "CONNECT_TIMEOUT_S", 1)
    monkeypatch.setattr(object_store, "READ_TIMEOUT_S", 2)
    budget = object_store.MAX_ATTEMPTS * (1 + 2)
    with silent_endpoint() as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "b")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        started = time.monotonic()
        with pytest.raises(ObjectStoreError) as raised:
            check_reachable([f"{PIPELINE_ROOT}/x"])
        spent = time.monotonic() - started
    # Each attempt connects and then waits out the read timeout: the waits are the ones set.
    # (boto3's standard mode also sleeps up to 1 s, then 2 s, between attempts.)
    assert object_store.MAX_ATTEMPTS * 2 <= spent < budget + 3 + 5, spent
    assert f"object store {endpoint}, bucket 'pipelines': no answer" in str(raised.value)
    assert "after 3 attempts (1 s to connect, 2 s to read)" in str(raised.value)


@pytest.mark.parametrize("plugin", [True, False], ids=["with_plugin", "without_plugin"])
def test_beam_worker_processes_read_s3_through_the_plugin(store, plugin, tmp_path):
    """The compiled `--beam_plugins` is what lets TensorFlow in a Beam worker reach s3://."""
    prefix = f"s3://pipelines/probe/{'with' if plugin else 'without'}"
    beam_args = ["--direct_running_mode=multi_processing", "--direct_num_workers=1"]
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
