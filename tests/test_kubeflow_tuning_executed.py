"""The tuning package (`kubeflow.compile --tuning`), executed against the Kubernetes stand-in.

As tests/test_kubeflow_tfjob_executed.py runs the training package: run_compiled.py
plays the backend's driver (untyped input artifacts, the extra `executor-logs`
output) and each step is a process of the project's environment. The Tune step
finds tests/kubernetes_standin.py through a kubeconfig (KUBECONFIG), serves
KerasTuner's oracle in its own process and creates two worker pods, which the
stand-in starts as keras-tuner processes asking the oracle for trials over gRPC
on 127.0.0.1. The data and the pipeline root, and with it the search's
directory, are on the S3 stand-in (tests/s3_standin.py), as on a cluster: the
steps get the store's endpoint from the package and its keys from the
secret, which the stand-in resolves into the worker pods as a kubelet does.

One execution, with the two faults a cluster brings a Tune step, one per
attempt (run_compiled.py strikes them in turn). The first attempt is preempted
in the middle of its search (`--preempt-mid-search Tune`): once a trial's
`trial.json` in the bucket says COMPLETED and another's RUNNING (output_probe.py
--search). Its process group is killed, as a pod's on a node shutting down; its
worker pods, which no owner reference ties to it, are left running, as on a
cluster. The retry deletes them (the pods of every attempt share their names)
before it creates its own, runs only the trials the kill cut off, and freezes
the winner of exactly the budget. That second attempt is preempted in turn once
it has written its output to the bucket (`--preempt Tune`, the search done, its
pods deleted; faults.py watches an s3:// output through output_probe.py); the
third finds the oracle's state in the search directory, creates no pod and
writes the same winner.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from kubeflow.step_ids import TUNE
from pipeline.object_store import CREDENTIAL_VARIABLES
from tests.conftest import REPO_ROOT
from tests.harness import (
    DATA_ROOT,
    PIPELINE_ROOT,
    RETRIED,
    SECRET,
    compile_package,
    execute,
    lowest_score_trials_model,
    s3_settings,
    schema_dir_in_project,
)
from tests.kubernetes_standin import KubernetesStandin
from tests.s3_standin import s3_standin
from tests.span_data import span_rows, write_span

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

NAMESPACE = "kubeflow-user-example-com"
TOKEN = "tune-step-token"
# Three trials, two at a time, so that one is running whichever ends first; long
# enough for the mid-search kill to land before the next one ends.
TRIALS = 3
STEPS_PER_TRIAL = 200
# A few rows, some in each of ExampleGen's splits: the trials' input repeats them.
ROWS = 60


def tuning_settings(tmp: Path, schema_dir: str, endpoint: str) -> Path:
    """Two worker pods, TRIALS trials of STEPS_PER_TRIAL steps; Tune retried at once, as the
    DAG's steps; the data and the pipeline root in the S3 stand-in's bucket."""
    retried = {step: {"max_retries": 2, "backoff": "0s"} for step in (*RETRIED, TUNE)}
    return s3_settings(
        tmp,
        endpoint,
        schema_dir=schema_dir,
        retries={"defaults": {"max_retries": 0}, "components": retried},
        tuning={
            "workers": 2,
            "max_trials": TRIALS,
            "steps_per_trial": STEPS_PER_TRIAL,
            "deadline": "15m",
        },
    )


@pytest.fixture(scope="module")
def store():
    with s3_standin() as standin:
        yield standin


@pytest.fixture(scope="module")
def tuning_run(store, tmp_path_factory):
    """The package executed with the Tune step killed mid-search, then at its output."""
    tmp = tmp_path_factory.mktemp("kubeflow_tuning")
    store.upload(write_span(tmp / "data", 1, span_rows(1)[:ROWS]), f"{DATA_ROOT}/span-1/data.csv")
    schema_dir = schema_dir_in_project(tmp)
    standin = KubernetesStandin(
        sys.executable,
        users={TOKEN: f"system:serviceaccount:{NAMESPACE}:default-editor"},
        # The worker pods' keys come from the store's secret, as their manifest says.
        secrets={SECRET: store.secret_data()},
        base_env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONUNBUFFERED": "1"},
    )
    try:
        package = compile_package(
            tuning_settings(tmp, schema_dir, store.endpoint), tmp / "tuning.yaml", "--tuning"
        )
        with standin, pytest.MonkeyPatch.context() as env:
            kubeconfig = standin.kubeconfig(tmp / "kubeconfig", namespace=NAMESPACE, token=TOKEN)
            env.setenv("KUBECONFIG", str(kubeconfig))
            # The steps' keys, which a pod gets from the secret (platform spec's secretAsEnv).
            for variable, value in zip(
                CREDENTIAL_VARIABLES, (store.access_key_id, store.secret_access_key), strict=True
            ):
                env.setenv(variable, value)
            faults = ("--preempt-mid-search", TUNE, "--preempt", TUNE)
            run = execute(package, tmp, "tuning", *faults, "--log-dir", str(tmp / "logs"))
            running = standin.running_pods()
    finally:
        shutil.rmtree(REPO_ROOT / schema_dir)
    return {
        "tmp": tmp,
        "run": run,
        "created": [p for p in standin.created if p["kind"] == "Pod"],
        "deleted": standin.deleted_pods,
        "left": dict(standin.pods),
        "running": running,
    }


def test_every_step_of_the_tuning_package_succeeded(tuning_run):
    steps = tuning_run["run"]["steps"]
    assert TUNE in steps
    assert {k: v["status"] for k, v in steps.items() if v["status"] != "SUCCESS"} == {}


def bucket_trials(store) -> dict[str, dict]:
    """Each trial's own file in the search directory, as KerasTuner wrote it: {URI: its
    ETag, LastModified and content}."""
    client = store.client()
    bucket = PIPELINE_ROOT.removeprefix("s3://").split("/")[0]
    trials = {}
    for key in store.keys(f"{PIPELINE_ROOT}/tuning/"):
        if key.endswith("/trial.json") and "/trial_" in key:
            answer = client.get_object(Bucket=bucket, Key=key)
            trials[f"s3://{bucket}/{key}"] = {
                "etag": answer["ETag"],
                "last_modified": answer["LastModified"].isoformat(),
                "trial": json.loads(answer["Body"].read()),
            }
    return trials


def test_the_tune_output_holds_the_frozen_winner_of_exactly_the_budget(tuning_run, store):
    from trainer.hyperparameters import HYPERPARAMETERS_FILE_NAME, load_frozen

    (uri,) = tuning_run["run"]["steps"][TUNE]["outputs"]["hyperparameters"]
    assert uri.startswith(f"{PIPELINE_ROOT}/"), uri
    local = store.download(uri, tuning_run["tmp"] / "tune_output")
    frozen = load_frozen(local / HYPERPARAMETERS_FILE_NAME)
    assert frozen.provenance["trials"] == TRIALS and frozen.provenance["partial"] is False
    # The search's state is in the bucket under the pipeline root, where a retried
    # pod finds it: KerasTuner's oracle and one directory per trial.
    keys = store.keys(f"{PIPELINE_ROOT}/tuning/")
    assert any(k.endswith("/oracle.json") for k in keys), keys
    assert len({k.split("/trial_")[1].split("/")[0] for k in keys if "/trial_" in k}) == TRIALS
    # Exactly the budget completed, and no trial more was started.
    after = bucket_trials(store)
    assert sorted(t["trial"]["status"] for t in after.values()) == ["COMPLETED"] * TRIALS
    assert frozen.model == lowest_score_trials_model(t["trial"] for t in after.values())


def test_a_tune_step_killed_mid_search_is_retried_without_running_a_completed_trial_again(
    tuning_run, store
):
    """SIGKILL to the Tune step's process group once a trial's file says COMPLETED and
    another's RUNNING; KFP's retry finishes the search on the same output URI."""
    tune = tuning_run["run"]["steps"][TUNE]
    assert tune["attempts"] == 3, tune["log_tail"]
    assert "[preempted: killed in the middle of its search]" in tune["earlier_log_tails"][0]
    seen = tune["search_at_kill"]
    completed = {uri: t for uri, t in seen.items() if t["status"] == "COMPLETED"}
    assert completed and any(t["status"] == "RUNNING" for t in seen.values()), seen
    # A trial completed before the kill never ran again: a trial run again writes its
    # file when it starts (RUNNING) and when it ends, a new version each time.
    after = bucket_trials(store)
    for uri, trial in completed.items():
        now = after[uri]
        assert (now["trial"]["score"], now["etag"], now["last_modified"]) == (
            trial["score"],
            trial["etag"],
            trial["last_modified"],
        ), uri


def test_the_retry_deletes_the_worker_pods_the_killed_attempt_left_running(tuning_run):
    """No owner reference ties a worker pod to the Tune step's pod, so a kill leaves the
    workers running: each waits for its chief up to an hour on every call (keras-tuner
    1.4.8, src/distribute/oracle_client.py: `wait_for_ready=True`, TIMEOUT line 31). The
    retry, whose pods take the same names, deletes them before it creates its own."""
    created = tuning_run["created"]
    names = [p["metadata"]["name"] for p in created]
    assert len(names) == 4 and names[:2] == names[2:], names
    assert [name.rsplit("-", 2)[1:] for name in names[:2]] == [["worker", "0"], ["worker", "1"]]
    assert all(p["metadata"]["namespace"] == NAMESPACE for p in created)
    retry_log = Path(tuning_run["run"]["steps"][TUNE]["log_files"][1]).read_text()
    for name in names[:2]:
        assert f"Deleted pod {NAMESPACE}/{name}, left by an earlier attempt" in retry_log
    # Not ended when last seen (the stand-in records a phase as a GET reads it); the
    # retry's own ended and were deleted.
    phases = [p.phases[-1] for p in tuning_run["deleted"]]
    assert set(phases[:2]) <= {"Pending", "Running"}, phases
    assert phases[2:] == ["Succeeded", "Succeeded"], phases
    assert tuning_run["left"] == {} and tuning_run["running"] == []
    assert "Winner: trial" in retry_log


def test_a_tune_step_preempted_at_its_output_resumes_without_running_trials_again(tuning_run):
    tune = tuning_run["run"]["steps"][TUNE]
    assert tune["attempts"] == 3
    assert "[preempted: killed while writing its outputs]" in tune["earlier_log_tails"][1]
    # Four pods in all, the killed attempts': the last found the budget spent in the
    # search's state.
    assert len(tuning_run["created"]) == 4
    last_log = Path(tune["log_files"][-1]).read_text()
    assert "Running Trial" not in last_log
    assert "Winner: trial" in last_log
