"""The compiled package with `training.engine: trainjob`, executed against Trainer v2's stand-in.

As tests/test_kubeflow_tfjob_executed.py, with the Trainer step talking to
tests/trainjob_standin.py (Trainer v2 and JobSet inside the Kubernetes
stand-in), which runs the TrainJob's two nodes as processes of the project's
environment, each building its TF_CONFIG from its pod as on a cluster
(`python -m kubeflow.trainjob.node`; tests/trainjob_dns.py resolves the JobSet's
names to loopback ports).

One execution, with the fault a cluster brings: node 1 of the first TrainJob is
OOM-killed as it starts training. The TrainJob fails, the step names the node
and deletes it; KFP retries the step, which creates the TrainJob again; the two
nodes train one model, node 0 exports it, and the Evaluator and the Pusher run
unchanged.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from kubeflow.package_dags import node_job_spec
from kubeflow.package_settings import load_package_settings
from kubeflow.trainjob.manifest import runtime_manifest
from pipeline import steps as dag
from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE
from tests.harness import (
    TRAINING_STARTS,
    compile_package,
    execute,
    image_environment,
    local_settings,
    schema_dir_in_project,
    status_report,
    step_record,
)
from tests.kubernetes_standin import KubernetesStandin
from tests.span_data import span_rows, write_span
from tests.trainjob_standin import TrainerController

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

NAMESPACE = "kubeflow-user-example-com"
STEP_SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:default-editor"
TOKEN = "step-token"


def trainjob_settings(tmp: Path, data_root: Path, schema_dir: str) -> Path:
    components = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())["components"]
    components[dag.TRAINER] = {"resources": {"cpu_request": "500m", "memory_request": "1Gi"}}
    return local_settings(
        tmp,
        data_root,
        schema_dir=schema_dir,
        components=components,
        training={
            "engine": "trainjob",
            "trainjob": {
                "nodes": 2,
                "resources": {"cpu_request": "1", "memory_request": "4Gi"},
                "service_account": "default-editor",
                "deadline": "15m",
            },
        },
    )


@pytest.fixture(scope="module")
def trainjob_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kubeflow_trainjob")
    data_root = tmp / "data"
    write_span(data_root, 1, span_rows(1))
    schema_dir = schema_dir_in_project(tmp)
    standin = KubernetesStandin(
        sys.executable, users={TOKEN: STEP_SERVICE_ACCOUNT}, base_env=image_environment()
    )
    trainer = TrainerController(standin)
    try:
        settings_file = trainjob_settings(tmp, data_root, schema_dir)
        package = compile_package(settings_file, tmp / "pipeline.yaml")
        # What a cluster admin applied once: the runtime from the same settings.
        trainer.install_runtime(
            runtime_manifest(node_job_spec(load_package_settings(settings_file)))
        )
        with standin, pytest.MonkeyPatch.context() as env:
            kubeconfig = standin.kubeconfig(tmp / "kubeconfig", namespace=NAMESPACE, token=TOKEN)
            env.setenv("KUBECONFIG", str(kubeconfig))
            first = None
            run = None
            standin.oom_kill("node-0-1", after=TRAINING_STARTS, times=1)
            run = execute(package, tmp, "trainjob", "--log-dir", str(tmp / "logs"),
                          "--cache-root", str(tmp / "kfp-cache"), expect_success=False)  # fmt: skip
            first = trainer.created[0]["metadata"]["name"] if trainer.created else None
            left_running = standin.running_pods()
            logs = {p.hostname: "\n".join(t for _, t in p.lines)
                    for p in [*standin.deleted_pods, *standin.pods.values()]}  # fmt: skip
    finally:
        shutil.rmtree(REPO_ROOT / schema_dir)
    return {"run": run, "first": first, "trainer": trainer, "left_running": left_running,
            "logs": logs}  # fmt: skip


def test_a_killed_node_fails_the_attempt_naming_it_and_the_retry_trains(trainjob_run):
    trainer = trainjob_run["run"]["steps"][dag.TRAINER]
    assert trainer["status"] == "SUCCESS" and trainer["attempts"] == 2
    name = trainjob_run["first"]
    assert trainjob_run["trainer"].deleted == [name] and len(trainjob_run["trainer"].created) == 2
    assert trainjob_run["left_running"] == []
    failed, succeeded = step_record(trainer).attempts
    assert (failed.outcome, succeeded.outcome) == ("failed", "succeeded")
    assert f"TrainJob {NAMESPACE}/{name} failed: jobset failed" in failed.error
    assert f"node {name}-node-0-1 (pod {name}-node-0-1-" in failed.error
    assert "exit code 137, OOMKilled" in failed.error


def test_two_nodes_train_one_model_and_node_0_exports_it(trainjob_run):
    name = trainjob_run["first"]
    logs = trainjob_run["logs"]
    node0, node1 = logs[f"{name}-node-0-0"], logs[f"{name}-node-0-1"]
    for log in (node0, node1):
        assert "strategy = multi_worker_mirrored" in log and "replicas_in_sync = 2" in log
    trainer = trainjob_run["run"]["steps"][dag.TRAINER]
    (model_run,) = trainer["outputs"]["model_run"]
    resolved = json.loads((Path(model_run) / "trainer_config.json").read_text())
    assert resolved["resolved_runtime"]["replicas_in_sync"] == 2
    step_log = Path(trainer["log_files"][-1]).read_text()
    assert f"[{name}-node-0-0] " in step_log and "Training complete on TrainJob" in step_log


def test_the_evaluator_and_pusher_run_unchanged(trainjob_run):
    steps = trainjob_run["run"]["steps"]
    assert steps[dag.EVALUATOR]["status"] == "SUCCESS"
    assert steps[dag.PUSHER]["status"] == "SUCCESS"
    html, states = status_report(trainjob_run["run"])
    assert states[dag.TRAINER] == "succeeded" and "BLESSED" in html
