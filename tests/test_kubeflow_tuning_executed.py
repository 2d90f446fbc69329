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

One execution, with a fault a cluster brings: the Tune step's first attempt is
preempted once it has written its output to the bucket (the search done, its
pods deleted; faults.py watches an s3:// output through output_probe.py).
KFP retries it on the same output URI; the retry finds the oracle's state in the
search directory in the bucket, creates no pod and writes the same winner.
"""

from __future__ import annotations

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
    s3_settings,
    schema_dir_in_project,
)
from tests.kubernetes_standin import KubernetesStandin
from tests.s3_standin import s3_standin
from tests.span_data import span_rows, write_span

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

NAMESPACE = "kubeflow-user-example-com"
TOKEN = "tune-step-token"
TRIALS = 2
# A few rows, some in each of ExampleGen's splits: the trials' input repeats them.
ROWS = 60


def tuning_settings(tmp: Path, schema_dir: str, endpoint: str) -> Path:
    """Two worker pods, two trials of few steps; Tune retried at once, as the DAG's steps;
    the data and the pipeline root in the S3 stand-in's bucket."""
    retried = {step: {"max_retries": 2, "backoff": "0s"} for step in (*RETRIED, TUNE)}
    return s3_settings(
        tmp,
        endpoint,
        schema_dir=schema_dir,
        retries={"defaults": {"max_retries": 0}, "components": retried},
        tuning={"workers": 2, "max_trials": TRIALS, "steps_per_trial": 5, "deadline": "15m"},
    )


@pytest.fixture(scope="module")
def store():
    with s3_standin() as standin:
        yield standin


@pytest.fixture(scope="module")
def tuning_run(store, tmp_path_factory):
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
            run = execute(package, tmp, "tuning", "--preempt", TUNE, "--log-dir", str(tmp / "logs"))
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


def test_the_tune_output_holds_the_frozen_winner_of_both_trials(tuning_run, store):
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


def test_the_worker_pods_ran_and_were_deleted(tuning_run):
    created = tuning_run["created"]
    assert [p["metadata"]["name"].rsplit("-", 2)[1:] for p in created] == [
        ["worker", "0"], ["worker", "1"]
    ]  # fmt: skip
    assert all(p["metadata"]["namespace"] == NAMESPACE for p in created)
    assert tuning_run["left"] == {} and tuning_run["running"] == []
    assert [p.phases[-1] for p in tuning_run["deleted"]] == ["Succeeded", "Succeeded"]


def test_a_preempted_tune_step_resumes_without_running_trials_again(tuning_run):
    tune = tuning_run["run"]["steps"][TUNE]
    assert tune["attempts"] == 2
    assert "[preempted: killed while writing its outputs]" in tune["earlier_log_tails"][0]
    # Two pods in all: the retry found the budget spent in the search's state.
    assert len(tuning_run["created"]) == 2
    retry_log = Path(tune["log_files"][-1]).read_text()
    assert "Running Trial" not in retry_log
    assert "Winner: trial" in retry_log
