"""The tuning package (`kubeflow.compile --tuning`), executed against the Kubernetes stand-in.

As tests/test_kubeflow_tfjob_executed.py runs the training package: run_compiled.py
plays the backend's driver (untyped input artifacts, the extra `executor-logs`
output) and each step is a process of the project's environment. The Tune step
finds tests/kubernetes_standin.py through a kubeconfig (KUBECONFIG), serves
KerasTuner's oracle in its own process and creates two worker pods, which the
stand-in starts as keras-tuner processes asking the oracle for trials over gRPC
on 127.0.0.1. The pipeline root stays on this machine, as the TFJob and scoring
executions keep theirs: the executor's faults watch local paths.

One execution, with a fault a cluster brings: the Tune step's first attempt is
preempted once it has written its output (the search done, its pods deleted).
KFP retries it on the same output URI; the retry finds the oracle's state in the
search directory under the pipeline root, creates no pod and writes the same winner.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from kubeflow.step_ids import TUNE
from tests.conftest import REPO_ROOT
from tests.harness import (
    RETRIED,
    compile_package,
    execute,
    local_settings,
    schema_dir_in_project,
)
from tests.kubernetes_standin import KubernetesStandin
from tests.span_data import span_rows, write_span

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

NAMESPACE = "kubeflow-user-example-com"
TOKEN = "tune-step-token"
TRIALS = 2
# A few rows, some in each of ExampleGen's splits: the trials' input repeats them.
ROWS = 60


def tuning_settings(tmp: Path, data_root: Path, schema_dir: str) -> Path:
    """Two worker pods, two trials of few steps; Tune retried at once, as the DAG's steps."""
    retried = {step: {"max_retries": 2, "backoff": "0s"} for step in (*RETRIED, TUNE)}
    return local_settings(
        tmp,
        data_root,
        schema_dir=schema_dir,
        retries={"defaults": {"max_retries": 0}, "components": retried},
        tuning={"workers": 2, "max_trials": TRIALS, "steps_per_trial": 5, "deadline": "15m"},
    )


@pytest.fixture(scope="module")
def tuning_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kubeflow_tuning")
    data_root = tmp / "data"
    write_span(data_root, 1, span_rows(1)[:ROWS])
    schema_dir = schema_dir_in_project(tmp)
    standin = KubernetesStandin(
        sys.executable,
        users={TOKEN: f"system:serviceaccount:{NAMESPACE}:default-editor"},
        base_env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONUNBUFFERED": "1"},
    )
    try:
        package = compile_package(
            tuning_settings(tmp, data_root, schema_dir), tmp / "tuning.yaml", "--tuning"
        )
        with standin, pytest.MonkeyPatch.context() as env:
            kubeconfig = standin.kubeconfig(tmp / "kubeconfig", namespace=NAMESPACE, token=TOKEN)
            env.setenv("KUBECONFIG", str(kubeconfig))
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


def test_the_tune_output_holds_the_frozen_winner_of_both_trials(tuning_run):
    from trainer.hyperparameters import HYPERPARAMETERS_FILE_NAME, load_frozen

    (uri,) = tuning_run["run"]["steps"][TUNE]["outputs"]["hyperparameters"]
    frozen = load_frozen(Path(uri) / HYPERPARAMETERS_FILE_NAME)
    assert frozen is not None, f"no {HYPERPARAMETERS_FILE_NAME} in {uri}"
    assert frozen.provenance["trials"] == TRIALS and frozen.provenance["partial"] is False
    # The search's state is under the pipeline root, where a retried pod finds it.
    search_root = tuning_run["tmp"] / "pipeline_root" / "tuning"
    assert [p.name for p in search_root.iterdir()], search_root


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
