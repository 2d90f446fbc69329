"""The compiled package with `training.engine: tfjob`, executed against a Kubernetes stand-in.

As tests/test_kubeflow_executed.py runs a package (kfp.local, each step a
process of the project's environment), with one difference: the Trainer step
talks to tests/kubernetes_standin.py, which plays the API server and the
Training Operator on loopback and starts the job's Chief and worker as
processes with the TF_CONFIG the operator would inject. The step finds the
API through a kubeconfig (KUBECONFIG), where a pod would use its service
account.

One execution, with a fault a cluster brings: the worker of the first job is
OOM-killed as it starts training. The job fails, the step deletes it and fails
with the worker's last log lines; KFP retries the step, which creates the job
again; the two replicas train one model, and the run ends blessed and pushed.

The same stand-in plays KServe, with an InferenceService already serving an
earlier model (conftest's small one). The pushed version's canary revision
fails, so the Deploy step rolls back and fails the run. A second execution
(from cache up to the Evaluator) pushes the model again as a new version,
whose revision answers wrongly: rolled back too. The earlier model serves
throughout.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from kubeflow import pipeline_steps as kubeflow_steps
from kubeflow.tfjob.manifest import CONTAINER_NAME, RUN_ID_LABEL
from pipeline import steps as dag
from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE, read_taxi_rows
from tests.harness import (
    INFERENCE_SERVICE,
    SERVING,
    TRAINING_STARTS,
    assert_scores_raw_rows,
    compile_package,
    execute,
    image_environment,
    local_settings,
    output_metadata,
    schema_dir_in_project,
    status_report,
    step_record,
)
from tests.kubernetes_standin import KubernetesStandin, webhook_errors
from tests.span_data import span_rows, write_span

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

NAMESPACE = "kubeflow-user-example-com"
STEP_SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:default-editor"
TOKEN = "step-token"


def tfjob_settings(tmp: Path, data_root: Path, schema_dir: str) -> Path:
    """The executed test's settings, training on a TFJob of a Chief and one worker."""
    components = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())["components"]
    # The step only creates the job and waits: no GPU in its own pod.
    components[dag.TRAINER] = {"resources": {"cpu_request": "500m", "memory_request": "1Gi"}}
    return local_settings(
        tmp,
        data_root,
        schema_dir=schema_dir,
        components=components,
        serving=SERVING,
        training={
            "engine": "tfjob",
            "tfjob": {
                "workers": 1,
                "resources": {"cpu_request": "1", "memory_request": "4Gi"},
                "service_account": "default-editor",
                "deadline": "15m",
            },
        },
    )


@pytest.fixture(scope="module")
def tfjob_run(tmp_path_factory, small_model_base):
    tmp = tmp_path_factory.mktemp("kubeflow_tfjob")
    data_root = tmp / "data"
    write_span(data_root, 1, span_rows(1))
    schema_dir = schema_dir_in_project(tmp)
    standin = KubernetesStandin(
        sys.executable, users={TOKEN: STEP_SERVICE_ACCOUNT}, base_env=image_environment()
    )
    standin.kserve.add_object(NAMESPACE, "serviceaccounts", {"metadata": {"name": "kserve-models"}})
    standin.kserve.seed(NAMESPACE, INFERENCE_SERVICE, str(small_model_base))
    cache = ("--cache-root", str(tmp / "kfp-cache"))
    try:
        package = compile_package(tfjob_settings(tmp, data_root, schema_dir), tmp / "pipeline.yaml")
        with standin, pytest.MonkeyPatch.context() as env:
            kubeconfig = standin.kubeconfig(tmp / "kubeconfig", namespace=NAMESPACE, token=TOKEN)
            env.setenv("KUBECONFIG", str(kubeconfig))
            standin.oom_kill("-worker-0", after=TRAINING_STARTS, times=1)
            standin.kserve.fail_next_revision("RevisionFailed", "Back-off pulling image")
            run = execute(
                package, tmp, "tfjob", "--log-dir", str(tmp / "logs"), *cache,
                expect_success=False,
            )  # fmt: skip
            serving_after_first = standin.kserve.serving_storage_uri(NAMESPACE, INFERENCE_SERVICE)
            standin.kserve.answer_wrongly()
            wrong = execute(package, tmp, "wrong", *cache, expect_success=False)
            serving_after_wrong = standin.kserve.serving_storage_uri(NAMESPACE, INFERENCE_SERVICE)
            left_running = standin.running_replicas()
            logs = {
                r.pod: r.log_text()
                for job in [*standin.finished_jobs, *standin.jobs.values()]
                for r in job.replicas
            }
    finally:
        shutil.rmtree(REPO_ROOT / schema_dir)
    return {
        "tmp": tmp,
        "run": run,
        "wrong": wrong,
        "seeded": str(small_model_base),
        "serving_after_first": serving_after_first,
        "serving_after_wrong": serving_after_wrong,
        "created": standin.created,
        "deleted": standin.deleted,
        "left_running": left_running,
        "logs": logs,
        "spec": next(yaml.safe_load_all(package.read_text())),
    }


def test_the_trainer_step_creates_a_tfjob_the_operator_accepts(tfjob_run):
    first, second = tfjob_run["created"]
    assert first["metadata"]["name"] == second["metadata"]["name"]  # one name per task
    job = second
    assert webhook_errors(job) == []
    assert job["metadata"]["namespace"] == NAMESPACE  # the step's own namespace
    replicas = job["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in replicas.items()} == {"Chief": 1, "Worker": 1}
    pod = replicas["Worker"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["name"] == CONTAINER_NAME
    assert container["command"] == ["python", "-m", "kubeflow.tfjob.replica"]
    assert container["workingDir"] == str(REPO_ROOT)  # the settings' project_root_in_image
    assert pod["spec"]["serviceAccountName"] == "default-editor"
    assert pod["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "4Gi"}}
    assert job["spec"]["runPolicy"]["activeDeadlineSeconds"] == 15 * 60
    # Tied to the run: the run's id as KFP labels the run's pods.
    trainer = tfjob_run["run"]["steps"][dag.TRAINER]
    (model_uri,) = trainer["outputs"]["model"]
    run_id = Path(model_uri).parents[1].name
    assert job["metadata"]["labels"][RUN_ID_LABEL] == run_id
    assert pod["metadata"]["labels"][RUN_ID_LABEL] == run_id


def test_a_killed_worker_fails_the_attempt_with_its_log_and_the_job_is_deleted(tfjob_run):
    trainer = tfjob_run["run"]["steps"][dag.TRAINER]
    assert trainer["status"] == "SUCCESS" and trainer["attempts"] == 2
    name = tfjob_run["created"][0]["metadata"]["name"]
    assert tfjob_run["deleted"] == [name]  # the failed job, not the one that succeeded
    assert tfjob_run["left_running"] == []
    failed, succeeded = step_record(trainer).attempts
    assert (failed.outcome, succeeded.outcome) == ("failed", "succeeded")
    assert f"TFJob {NAMESPACE}/{name} failed" in failed.error
    assert "1 Worker replica(s) failed" in failed.error
    assert f"replica {name}-worker-0 (exit code 137, OOMKilled)" in failed.error
    assert TRAINING_STARTS in failed.error  # its last log lines
    html, states = status_report(tfjob_run["run"])
    assert states[dag.TRAINER] == "succeeded"
    assert "Trainer ran 2 times (KFP retried it)" in html
    assert "OOMKilled" in html


def test_both_replicas_train_one_model_and_the_chief_exports_it(tfjob_run):
    name = tfjob_run["created"][1]["metadata"]["name"]
    logs = tfjob_run["logs"]
    chief, worker = logs[f"{name}-chief-0"], logs[f"{name}-worker-0"]
    for log in (chief, worker):
        assert "strategy = multi_worker_mirrored" in log
        assert "replicas_in_sync = 2" in log
        assert "epoch 1/" in log  # the custom loop's epochs, on each replica
    trainer = tfjob_run["run"]["steps"][dag.TRAINER]
    (model_run,) = trainer["outputs"]["model_run"]
    resolved = json.loads((Path(model_run) / "trainer_config.json").read_text())
    assert resolved["resolved_runtime"]["replicas_in_sync"] == 2
    # The step streamed the Chief's log into its own, epochs included, before it ended.
    step_log = Path(trainer["log_files"][-1]).read_text()
    epochs = [line for line in step_log.splitlines() if line.startswith(f"[{name}-chief-0] ")]
    assert any("epoch 1/" in line for line in epochs)
    assert step_log.index(epochs[-1]) < step_log.index("Training complete on TFJob")


def test_the_run_is_blessed_and_pushes_a_model_that_scores_raw_rows(tfjob_run, taxi_spec, tmp_path):
    steps = tfjob_run["run"]["steps"]
    assert steps[dag.PUSHER]["status"] == "SUCCESS"
    first, _ = sorted((tfjob_run["tmp"] / "serving").iterdir())  # the second: the rerun's
    _, rows = read_taxi_rows(limit=20)
    # Rejected by the Deploy step: its saved_model.pb renamed, nothing deleted. Scored from a
    # copy, so that the fixture's outputs stay as the run left them.
    copy = shutil.copytree(first, tmp_path / first.name)
    (copy / "saved_model.pb.rejected").rename(copy / "saved_model.pb")
    assert_scores_raw_rows(copy, rows, taxi_spec)
    html, _ = status_report(tfjob_run["run"])
    assert "BLESSED" in html


def deploy_failure(execution: dict) -> str:
    deploy = execution["steps"][kubeflow_steps.DEPLOY]
    assert deploy["status"] == "FAILURE"
    return "\n".join(deploy["log_tail"])


def test_a_failing_canary_revision_is_rolled_back_and_fails_the_run(tfjob_run):
    failure = deploy_failure(tfjob_run["run"])
    # Knative's own message, from PredictorConfigurationReady.
    assert (
        "failed: PredictorConfigurationReady=False (RevisionFailed): Revision "
        '"taxi-big-tipper-predictor-00002" failed with message: Back-off pulling image.' in failure
    )
    assert "rolled back" in failure
    assert tfjob_run["serving_after_first"] == tfjob_run["seeded"]  # what served, serves
    _, states = status_report(tfjob_run["run"])
    assert states[kubeflow_steps.DEPLOY] == "failed" and states[dag.PUSHER] == "succeeded"
    assert states[kubeflow_steps.RUN_REPORT] == "not run"


def test_a_revision_that_answers_wrongly_is_rolled_back_and_fails_the_run(tfjob_run):
    steps = tfjob_run["wrong"]["steps"]
    assert steps[dag.TRAINER]["status"] == "CACHED"  # no second TFJob
    # The rejected version is no longer the served one, so the same model is pushed again.
    pushed = output_metadata(steps[dag.PUSHER], "pushed_model")
    first = output_metadata(tfjob_run["run"]["steps"][dag.PUSHER], "pushed_model")
    assert pushed["pushed"] == 1 and pushed["pushed_destination"] != first["pushed_destination"]
    failure = deploy_failure(tfjob_run["wrong"])
    assert "answered the smoke request (8 eval rows) differently from the pushed model" in failure
    assert tfjob_run["serving_after_wrong"] == tfjob_run["seeded"]


def test_the_compiled_trainer_is_the_tfjob_trainer(tfjob_run):
    spec = tfjob_run["spec"]
    executor = spec["deploymentSpec"]["executors"]["Trainer_executor"]["container"]
    assert "kubeflow.tfjob.executor.Executor" in executor["args"]
    assert os.path.basename(executor["command"][-1]) == "kubeflow.step_entrypoint"
