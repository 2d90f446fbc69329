"""Training on a TFJob: the settings, the job the step renders, and the step against the API.

The step's side (kubeflow/tfjob/job.py) runs against
tests/kubernetes_standin.py through the real kubernetes client, with replicas
whose command is a few lines of Python: what the step does when a job
succeeds, fails, runs past its deadline, is refused, or is cancelled. The
whole pipeline on a TFJob is tests/test_kubeflow_tfjob_executed.py.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import yaml

from kubeflow import compile as kfp_compile
from kubeflow import package_dags, package_settings
from kubeflow.settings import parse_settings
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.training import REPLICA_COMMAND, TrainingSettingsError
from kubeflow.tfjob.cluster import Cluster, ClusterError
from kubeflow.tfjob.job import TFJobFailed, Timing, run_tfjob
from kubeflow.tfjob.manifest import (
    MAX_JOB_NAME,
    is_dns_1035_label,
    job_name,
    replica_pod_names,
    tfjob_manifest,
)
from kubeflow.tfjob.spec import TFJobSpec, TFJobSpecError
from pipeline import steps as dag
from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE
from tests.harness import MINIO, check_multi_node, multi_node_settings, run_in_standin_harness
from tests.kubernetes_standin import KubernetesStandin, webhook_errors

STEP_IDS = package_settings.pipeline_step_ids()
RAW_SETTINGS = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
NAMESPACE = "team-a"
TOKEN = "token"
STEP_USER = f"system:serviceaccount:{NAMESPACE}:pipeline-runner"
FAST = Timing(poll_seconds=0.2, wait_seconds=60)


def settings_with(**changes):
    """The checked-in settings, training on a TFJob of gpu_multi_node, changed by `changes`."""
    return multi_node_settings("tfjob", **changes)


checked = check_multi_node


# --- Settings -------------------------------------------------------------------


def test_checked_in_settings_train_in_the_pod_and_hold_a_valid_tfjob_section():
    settings = parse_settings(RAW_SETTINGS, STEP_IDS)
    assert settings.training.engine == "pod"
    assert package_dags.tfjob_spec(settings) is None
    tfjob = settings.training.tfjob
    assert tfjob.workers == 3 and tfjob.placement.resources.gpu == 4
    checked(settings)


def test_tfjob_settings_become_the_replicas_pod_in_kubernetes_form():
    settings = settings_with(**MINIO, **{"parameters.data_root": "s3://mlpipeline/data"})
    checked(settings)
    spec = package_dags.tfjob_spec(settings)
    assert spec.image == settings.image and spec.command == REPLICA_COMMAND
    assert spec.working_dir == "/pipeline" and spec.workers == 3
    assert spec.resources == {
        "limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"},
        "requests": {"cpu": "8", "memory": "32Gi"},
    }
    assert spec.node_selector == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert spec.tolerations == (
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    )
    assert (spec.active_deadline_seconds, spec.backoff_limit) == (6 * 3600, 0)
    assert (spec.clean_pod_policy, spec.ttl_seconds_after_finished) == ("Running", 86_400)
    assert spec.namespace is None and spec.service_account == "default-editor"
    # The replicas reach the store as the steps do; the credentials stay in the secret.
    env = {e["name"]: e for e in spec.env}
    assert env["S3_ENDPOINT"]["value"] == "http://minio-service.kubeflow:9000"
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": "mlpipeline-minio-artifact", "key": "secretkey"}
    }
    assert TFJobSpec.from_custom_config(spec.to_custom_config()) == spec


@pytest.mark.parametrize(
    "path,value,message",
    [
        (
            "training.engine",
            "mpijob",
            "training.engine: must be one of ('pod', 'tfjob', 'trainjob')",
        ),
        ("training.tfjob.workers", 0, "training.tfjob.workers: must be an integer >= 1"),
        ("training.tfjob.workers", True, "training.tfjob.workers: must be an integer >= 1"),
        ("training.tfjob.backoff_limit", -1, "training.tfjob.backoff_limit: must be an integer"),
        ("training.tfjob.clean_pod_policy", "Never", "training.tfjob.clean_pod_policy: must be"),
        ("training.tfjob.deadline", "6 hours", "training.tfjob.deadline: '6 hours' is not a"),
        ("training.tfjob.deadline", "0s", "training.tfjob.deadline: '0s' is not a duration"),
        ("training.tfjob.ttl_after_finished", 60, "training.tfjob.ttl_after_finished: 60"),
        ("training.tfjob.namespace", "Team_A", "training.tfjob.namespace: 'Team_A' is not a"),
        ("training.tfjob.service_account", "A B", "training.tfjob.service_account: 'A B'"),
        ("training.tfjob.resources.gpu", -1, "training.tfjob.resources.gpu: must be >= 0"),
        ("training.tfjob.tolerations", [{"operator": "Equal"}], "training.tfjob.tolerations[0]"),
        ("training.tfjob.replicas", 2, "training.tfjob: unknown field(s) ['replicas']"),
        ("training.mode", "tfjob", "training: unknown field(s) ['mode']"),
    ],
)
def test_training_errors_name_the_field(path, value, message):
    with pytest.raises(SettingsError) as err:
        settings_with(**{path: value})
    assert message in str(err.value)


@pytest.mark.parametrize(
    "changes,message",
    [
        (
            {"config_variant": "gpu_1x"},
            "training.engine: tfjob trains on 4 replicas under multi_worker_mirrored, but "
            "config_variant gpu_1x sets runtime.strategy 'one_device'",
        ),
        (
            {"config_variant": "gpu_8x_amp"},
            "config_variant gpu_8x_amp sets runtime.strategy 'mirrored'",
        ),
        (
            {"components.Trainer.resources": {"gpu": 1}},
            "components.Trainer.resources.gpu: with training.engine tfjob the step's own pod",
        ),
        (
            {"training.tfjob.resources": {"cpu_request": "8"}},
            "training.tfjob.resources.gpu: config_variant gpu_multi_node trains on GPUs",
        ),
    ],
)
def test_combinations_that_cannot_train_on_a_tfjob_are_refused(changes, message):
    with pytest.raises(TrainingSettingsError) as err:
        checked(settings_with(**changes))
    assert message in str(err.value)


def test_the_pod_engine_ignores_the_tfjob_sections_needs():
    checked(settings_with(**{"training.engine": "pod", "config_variant": "gpu_1x"}))
    # The same variant on a TFJob is refused: one device cannot use several replicas.
    with pytest.raises(TrainingSettingsError, match=r"sets runtime\.strategy 'one_device'"):
        checked(settings_with(**{"config_variant": "gpu_1x"}))


def test_compile_refuses_a_tfjob_with_a_single_replica_strategy(tmp_path, capsys):
    raw = copy.deepcopy(RAW_SETTINGS)
    raw["training"]["engine"] = "tfjob"
    raw["components"][dag.TRAINER] = {"resources": {"cpu_request": "1"}}
    (tmp_path / "settings.yaml").write_text(yaml.safe_dump(raw))
    # The command's main (tests/test_kubeflow.py runs the command itself as a process).
    code = kfp_compile.main(
        ["--config", str(tmp_path / "settings.yaml"), "--output", str(tmp_path / "out.yaml")]
    )
    assert code == 2
    assert "config_variant gpu_1x sets runtime.strategy 'one_device'" in capsys.readouterr().err
    assert not (tmp_path / "out.yaml").exists()


# --- The job the step renders -----------------------------------------------------


def spec_for(command: tuple[str, ...], **fields) -> TFJobSpec:
    return TFJobSpec(
        image="pipeline:1", command=command, workers=2, working_dir=str(REPO_ROOT), **fields
    )


def test_job_names_are_dns_labels_stable_per_task_and_unique_across_tasks():
    first = job_name("s3://b/root/taxi/run-1/Trainer/model")
    assert first == job_name("s3://b/root/taxi/run-1/Trainer/model")
    assert first != job_name("s3://b/root/taxi/run-2/Trainer/model")
    for name in (first, job_name("x", prefix="9" * 80), job_name("x", prefix="Über Trainer")):
        assert is_dns_1035_label(name) and len(name) <= MAX_JOB_NAME, name
        # The operator's pod names add `-worker-<i>` and must stay DNS labels too.
        assert is_dns_1035_label(f"{name}-worker-99")


def test_the_rendered_job_passes_the_operators_webhook():
    spec = package_dags.tfjob_spec(settings_with(**{"training.tfjob.backoff_limit": 2}))
    manifest = tfjob_manifest(
        spec, name=job_name("m"), namespace=NAMESPACE, args=["--inputs", "{}"]
    )
    assert webhook_errors(manifest) == []
    replicas = manifest["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in replicas.items()} == {"Chief": 1, "Worker": 3}
    # backoff_limit > 0: restarted only after a signal (preemption), not on its own errors.
    assert {v["restartPolicy"] for v in replicas.values()} == {"ExitCode"}
    assert {
        v["restartPolicy"]
        for v in tfjob_manifest(
            package_dags.tfjob_spec(settings_with()), name="t", namespace=NAMESPACE, args=[]
        )["spec"]["tfReplicaSpecs"].values()
    } == {"Never"}
    assert replica_pod_names(manifest)[0].endswith("-chief-0")
    broken = copy.deepcopy(manifest)
    broken["spec"]["tfReplicaSpecs"]["Master"] = broken["spec"]["tfReplicaSpecs"]["Chief"]
    broken["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "tf"
    errors = webhook_errors(broken)
    assert any("must not have more than 1 Chief or Master" in e for e in errors)
    assert any("must have at least one container with name tensorflow" in e for e in errors)


def test_a_bad_job_name_is_refused_before_any_call():
    with pytest.raises(ValueError, match="DNS-1035"):
        tfjob_manifest(spec_for(("true",)), name="Trainer_1", namespace=NAMESPACE, args=[])


def test_a_spec_with_one_replica_or_a_bad_policy_is_refused():
    with pytest.raises(TFJobSpecError, match="workers: must be >= 1"):
        TFJobSpec(image="i", command=("true",), workers=0, working_dir="/")
    with pytest.raises(TFJobSpecError, match="clean_pod_policy"):
        spec_for(("true",), clean_pod_policy="Sometimes")
    with pytest.raises(TFJobSpecError, match="custom_config has no 'tfjob'"):
        TFJobSpec.from_custom_config({"trainer_config": "{}"})


def test_the_rendered_job_is_valid_for_the_training_operators_own_models(tmp_path):
    """kubeflow-training 1.9's TFJob models (the operator's OpenAPI types) take it unchanged."""
    spec = package_dags.tfjob_spec(
        settings_with(**{"training.tfjob.namespace": "team-a", "training.tfjob.backoff_limit": 0})
    )
    good = tfjob_manifest(
        spec, name=job_name("m"), namespace=NAMESPACE, args=["--inputs", "{}"],
        labels={"pipeline/runid": "3f2a"}, annotations={"note": "x"},
    )  # fmt: skip
    misspelled = copy.deepcopy(good)
    misspelled["spec"]["runPolicy"]["activeDeadline"] = 60
    misspelled["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["ports"][0][
        "containerPort"
    ] = "2222"
    for name, manifest in (("good", good), ("misspelled", misspelled)):
        (tmp_path / f"{name}.json").write_text(json.dumps(manifest))
    proc = run_in_standin_harness(
        "check_tfjob.py",
        str(tmp_path / "good.json"),
        str(tmp_path / "misspelled.json"),
        timeout=300,
    )
    results = {
        Path(r["file"]).stem: r["differences"] for r in map(json.loads, proc.stdout.splitlines())
    }
    assert results["good"] == [], results["good"]
    assert proc.returncode == 1
    assert sorted(results["misspelled"]) == [
        "spec.runPolicy.activeDeadline: not a field of the TFJob models (dropped)",
        "spec.tfReplicaSpecs.Chief.template.spec.containers[0].ports[0].containerPort: "
        "'2222' came back as 2222",
    ]


# --- The step against the API -------------------------------------------------------

REPLICA = textwrap.dedent(
    """
    import json, os, sys, time
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    print("replica", task["type"], task["index"], "of", os.environ["JOB_SIZE"], flush=True)
    if task["type"] == "worker" and task["index"] == int(os.environ.get("FAIL_WORKER", "-1")):
        print("worker out of patience", flush=True)
        sys.exit(3)
    time.sleep(float(os.environ.get("SLEEP", "0.5")))
    print("finished", task["type"], flush=True)
    """
)


@pytest.fixture
def standin(tmp_path, monkeypatch):
    with KubernetesStandin(
        sys.executable,
        users={TOKEN: STEP_USER},
        base_env={"PATH": os.environ["PATH"]},
        secrets={"store": {"secretkey": "s3cr3t"}},
    ) as api:
        monkeypatch.setenv(
            "KUBECONFIG", str(api.kubeconfig(tmp_path / "kc", namespace=NAMESPACE, token=TOKEN))
        )
        yield api


def replica_job(name: str, **env: str) -> dict:
    spec = spec_for(
        ("python", "-c", REPLICA),
        env=tuple({"name": k, "value": v} for k, v in {"JOB_SIZE": "3", **env}.items()),
    )
    return tfjob_manifest(spec, name=name, namespace=NAMESPACE, args=[])


def test_a_job_that_succeeds_streams_the_chiefs_log_and_is_kept(standin):
    lines: list[str] = []
    cluster = Cluster.from_environment()
    assert cluster.default_namespace == NAMESPACE  # the kubeconfig context's, as a pod's own
    job = run_tfjob(cluster, replica_job("ok-1"), timing=FAST, write=lines.append)
    assert job["status"]["conditions"][-1]["type"] == "Succeeded"
    assert "[ok-1-chief-0] replica chief 0 of 3" in lines
    assert "[ok-1-chief-0] finished chief" in lines
    assert not any("worker" in line for line in lines if line.startswith("[ok-1-chief-0]"))
    assert standin.deleted == [] and list(standin.jobs) == [(NAMESPACE, "ok-1")]
    # Every replica got TF_CONFIG: a Chief and two workers.
    assert "replica worker 1 of 3" in standin.replica_log("ok-1-worker-1")


def test_a_worker_that_exits_non_zero_fails_the_step_with_its_log_and_deletes_the_job(standin):
    with pytest.raises(TFJobFailed) as err:
        run_tfjob(
            Cluster.from_environment(),
            # The Chief outlasts the failing worker: a Chief that finishes first
            # succeeds the job whatever its workers do (the operator's default
            # success policy), which a busy machine made this test race into.
            replica_job("bad-1", FAIL_WORKER="1", SLEEP="10"),
            timing=FAST,
            write=print,
        )
    text = str(err.value)
    assert text.startswith(
        f"TFJob {NAMESPACE}/bad-1 failed: TFJob {NAMESPACE}/bad-1 has failed because 1 Worker"
    )
    assert "replica bad-1-worker-1 (exit code 3, Error); its last log lines:" in text
    assert "worker out of patience" in text
    assert "bad-1-worker-0" not in text  # only the replica that failed
    assert standin.deleted == ["bad-1"]
    assert standin.running_replicas() == []


def test_a_job_past_its_deadline_is_deleted_and_the_step_says_so(standin):
    manifest = replica_job("slow-1", SLEEP="60")
    manifest["spec"]["runPolicy"]["activeDeadlineSeconds"] = 2
    started = time.monotonic()
    with pytest.raises(TFJobFailed) as err:
        run_tfjob(Cluster.from_environment(), manifest, timing=FAST, write=print)
    assert time.monotonic() - started < 20
    assert "was active longer than specified deadline" in str(err.value)
    # No replica failed: the Chief's last lines say where training was (the operator
    # deletes the running pods of a finished job).
    assert "replica slow-1-chief-0 (gone); its last log lines:" in str(err.value)
    assert "replica chief 0 of 3" in str(err.value)
    assert standin.deleted == ["slow-1"] and standin.running_replicas() == []


def test_the_step_gives_up_waiting_past_the_deadline_and_deletes_the_job(standin, monkeypatch):
    # An operator that never enforces the deadline: the step's own wait ends it.
    manifest = replica_job("stuck-1", SLEEP="60")
    del manifest["spec"]["runPolicy"]["activeDeadlineSeconds"]
    with pytest.raises(TFJobFailed, match="did not finish within 2 s"):
        run_tfjob(Cluster.from_environment(), manifest, timing=Timing(0.2, 2), write=print)
    assert standin.deleted == ["stuck-1"] and standin.running_replicas() == []


def test_a_refused_create_names_the_service_account_and_the_permission(standin):
    standin.forbid("create", "tfjobs")
    with pytest.raises(ClusterError) as err:
        run_tfjob(Cluster.from_environment(), replica_job("rbac-1"), timing=FAST, write=print)
    text = str(err.value)
    assert text.startswith(
        f"Kubernetes refused to create tfjobs.kubeflow.org in namespace {NAMESPACE} for "
        f"service account {NAMESPACE}/pipeline-runner: "
    )
    assert "needs create, get, delete on tfjobs.kubeflow.org; list on pods; get on pods/log" in text
    assert standin.created == []


def test_a_cluster_without_the_operator_says_to_install_it(standin):
    standin.crd_installed = False
    with pytest.raises(ClusterError) as err:
        run_tfjob(Cluster.from_environment(), replica_job("nocrd-1"), timing=FAST, write=print)
    assert str(err.value).startswith(
        f"create tfjobs.kubeflow.org in namespace {NAMESPACE}: the API has no tfjobs.kubeflow.org"
    )
    assert "Install the Kubeflow Training Operator (release-1.9" in str(err.value)


def test_a_job_the_webhook_refuses_is_reported_as_the_webhooks(standin):
    manifest = replica_job("hook-1")
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = ""
    refused = r"the Training Operator's webhook refused the job: .*image: Required value"
    with pytest.raises(ClusterError, match=refused):
        run_tfjob(Cluster.from_environment(), manifest, timing=FAST, write=print)


def test_a_short_api_outage_is_waited_out_while_the_job_trains(standin):
    lines: list[str] = []
    threading.Timer(0.5, standin.outage, args=(1.5,)).start()
    job = run_tfjob(
        Cluster.from_environment(), replica_job("outage-1", SLEEP="3"),
        timing=Timing(0.2, 60, api_patience_seconds=30), write=lines.append,
    )  # fmt: skip
    assert job["status"]["conditions"][-1]["type"] == "Succeeded"
    assert any("The Kubernetes API did not answer" in line and "HTTP 503" in line for line in lines)
    assert standin.deleted == []


def test_a_long_api_outage_fails_the_step_and_says_how_to_delete_the_job(standin):
    lines: list[str] = []
    threading.Timer(0.5, standin.outage, args=(30,)).start()
    with pytest.raises(ClusterError, match="HTTP 503"):
        run_tfjob(
            Cluster.from_environment(), replica_job("outage-2", SLEEP="60"),
            timing=Timing(0.2, 60, api_patience_seconds=1), write=lines.append,
        )  # fmt: skip
    assert f"kubectl delete tfjob -n {NAMESPACE} outage-2" in lines[-1]


def test_an_api_that_does_not_answer_at_all_is_a_transient_cluster_error(tmp_path, monkeypatch):
    """No connection (an API server restarting): every call, the 404-tolerant ones included."""
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    api = KubernetesStandin(sys.executable)
    api.url = f"http://127.0.0.1:{port}"  # nothing listens there
    monkeypatch.setenv(
        "KUBECONFIG", str(api.kubeconfig(tmp_path / "kc", namespace=NAMESPACE, token=TOKEN))
    )
    cluster = Cluster.from_environment()
    for call in (cluster.get_tfjob, cluster.delete_tfjob):
        with pytest.raises(ClusterError, match="did not answer") as err:
            call(NAMESPACE, "any-1")
        assert err.value.transient and err.value.status is None


def test_a_retried_step_deletes_the_job_its_killed_attempt_left(standin):
    cluster = Cluster.from_environment()
    cluster.create_tfjob(replica_job("again-1", SLEEP="60"))  # the earlier attempt's
    lines: list[str] = []
    run_tfjob(cluster, replica_job("again-1"), timing=FAST, write=lines.append)
    assert standin.deleted == ["again-1"] and len(standin.created) == 2
    assert (
        f"Deleting the TFJob {NAMESPACE}/again-1 that an earlier attempt of this step left" in lines
    )


def test_a_cancelled_step_deletes_its_job(standin, tmp_path):
    """KFP stops a cancelled run's pods with SIGTERM; the step then deletes its job."""
    (tmp_path / "manifest.json").write_text(json.dumps(replica_job("cancel-1", SLEEP="60")))
    step = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(
            """
            import json, sys
            from kubeflow.tfjob.cluster import Cluster
            from kubeflow.tfjob.job import Timing, run_tfjob
            manifest = json.load(open(sys.argv[1]))
            run_tfjob(Cluster.from_environment(), manifest, timing=Timing(0.2, 60))
            """
        ), str(tmp_path / "manifest.json")],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while "cancel-1-chief-0" not in standin.running_replicas() and time.monotonic() < deadline:
        time.sleep(0.2)
    step.send_signal(signal.SIGTERM)
    output, _ = step.communicate(timeout=30)
    assert step.returncode != 0
    assert "StepTerminated: SIGTERM" in output
    assert f"Deleted TFJob {NAMESPACE}/cancel-1" in output
    assert standin.deleted == ["cancel-1"] and standin.running_replicas() == []


def test_without_a_cluster_the_step_says_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(ClusterError, match=r"runs outside a pod .* has no usable kubeconfig"):
        Cluster.from_environment()


def test_a_replica_gets_its_secrets_by_reference(standin):
    manifest = replica_job("env-1")
    script = "import os; print('key', os.environ['AWS_SECRET_ACCESS_KEY'], flush=True)"
    for replica in manifest["spec"]["tfReplicaSpecs"].values():
        container = replica["template"]["spec"]["containers"][0]
        container["command"] = ["python", "-c", script]
        container["env"] = [
            {"name": "AWS_SECRET_ACCESS_KEY",
             "valueFrom": {"secretKeyRef": {"name": "store", "key": "secretkey"}}}
        ]  # fmt: skip
    lines: list[str] = []
    run_tfjob(Cluster.from_environment(), manifest, timing=FAST, write=lines.append)
    assert "[env-1-chief-0] key s3cr3t" in lines
