"""Training on a TrainJob of Kubeflow Trainer v2: the settings, the TrainJob and runtime the
template writes (against Trainer's CRDs), TF_CONFIG against JobSet's names, and the step
against tests/trainjob_standin.py through the real kubernetes client.

The step's nodes here run tests/trainjob_probe.py: TF_CONFIG built as a node
builds it, then a few lines of work, or (slow) a small model trained under
MultiWorkerMirroredStrategy over two processes on 127.0.0.1.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import yaml

from kubeflow import compile as kfp_compile
from kubeflow import package_dags
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.training import NODE_COMMAND, TrainingSettingsError
from kubeflow.training_job import Timing
from kubeflow.trainjob import naming
from kubeflow.trainjob.cluster import Cluster, ClusterError
from kubeflow.trainjob.job import RuntimeMissing, TrainJobFailed, run_trainjob
from kubeflow.trainjob.manifest import POD_LABELS, runtime_manifest, trainjob_manifest
from kubeflow.trainjob.spec import TrainJobSpec, TrainJobSpecError
from kubeflow.trainjob.tf_config import TFConfigError, tf_config
from pipeline import steps as dag
from tests import trainer_crds
from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE
from tests.harness import check_multi_node, multi_node_settings
from tests.kubernetes_standin import KubernetesStandin
from tests.trainjob_standin import EDIT_RULES, TrainerController

FAST = Timing(poll_seconds=0.2, wait_seconds=60)
DIGEST_IMAGE = trainer_crds.DIGEST_IMAGE
RAW_SETTINGS = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
NAMESPACE = "team-a"
TOKEN = "token"
STEP_USER = f"system:serviceaccount:{NAMESPACE}:pipeline-runner"
PROBE = ("python", "-m", "tests.trainjob_probe")


full_spec = trainer_crds.template_spec
checked = check_multi_node


def settings_with(**changes):
    return multi_node_settings("trainjob", **changes)


# --- Settings -------------------------------------------------------------------


def test_checked_in_settings_hold_a_valid_trainjob_section():
    settings = settings_with()
    checked(settings)
    spec = package_dags.trainjob_spec(settings)
    assert spec.command == NODE_COMMAND and spec.nodes == 4
    assert (spec.runtime, spec.runtime_kind, spec.port) == (
        "tfx-multi-worker", "ClusterTrainingRuntime", 2222,
    )  # fmt: skip
    assert spec.resources["limits"]["nvidia.com/gpu"] == "4"
    assert spec.service_account == "default-editor"
    assert spec.active_deadline_seconds == 6 * 3600
    assert TrainJobSpec.from_custom_config(spec.to_custom_config()) == spec
    assert package_dags.tfjob_spec(settings) is None


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("training.trainjob.nodes", 1, "training.trainjob.nodes: must be an integer from 2 to 99"),
        ("training.trainjob.nodes", "4", "training.trainjob.nodes: must be an integer"),
        ("training.trainjob.port", 0, "training.trainjob.port: must be an integer from 1 to 65535"),
        ("training.trainjob.runtime", "TFX_Runtime", "training.trainjob.runtime: 'TFX_Runtime'"),
        ("training.trainjob.runtime_kind", "Runtime", "training.trainjob.runtime_kind: must be"),
        ("training.trainjob.deadline", "soon", "training.trainjob.deadline: 'soon' is not"),
        ("training.trainjob.replicas", 3, "training.trainjob: unknown"),
    ],
)
def test_trainjob_settings_errors_name_the_field(path, value, message):
    with pytest.raises(SettingsError, match="^" + message.replace("(", r"\(")):
        settings_with(**{path: value})


def test_combinations_that_cannot_train_on_a_trainjob_are_refused():
    with pytest.raises(
        TrainingSettingsError, match=r"^training.engine: trainjob trains on 4 nodes"
    ):
        checked(settings_with(config_variant="gpu_1x"))
    gpu_step = {"resources": {"gpu": 1, "cpu_request": "1", "memory_request": "2Gi"}}
    with pytest.raises(TrainingSettingsError, match="only creates the TrainJob and waits"):
        checked(settings_with(**{f"components.{dag.TRAINER}": gpu_step}))
    with pytest.raises(TrainingSettingsError, match=r"^training.trainjob.resources.gpu: "):
        checked(settings_with(**{"training.trainjob.resources": {"cpu_request": "1"}}))


def test_a_spec_with_one_node_or_a_bad_runtime_kind_is_refused():
    with pytest.raises(TrainJobSpecError, match="nodes: must be >= 2"):
        dataclasses.replace(full_spec(), nodes=1)
    with pytest.raises(TrainJobSpecError, match="runtime_kind: must be one of"):
        dataclasses.replace(full_spec(), runtime_kind="Runtime")
    with pytest.raises(TrainJobSpecError, match=r"training\.engine trainjob"):
        TrainJobSpec.from_custom_config({})


# --- The manifests against Trainer v2's CRDs ----------------------------------------


@pytest.mark.parametrize("tag", trainer_crds.TAGS)
def test_the_trainjob_and_runtimes_are_valid_against_trainers_crds(tag):
    schemas = trainer_crds.load(tag)
    manifests = trainer_crds.template_manifests()
    for plural, documents in manifests.items():
        for document in documents:
            assert trainer_crds.errors(document, schemas[plural]["schema"]) == [], plural
    assert schemas["clustertrainingruntimes"]["scope"] == "Cluster"
    assert schemas["trainingruntimes"]["scope"] == "Namespaced"
    source = json.loads((trainer_crds.EXCERPTS / f"{tag}.json").read_text())["source"]
    assert source["tag"] == tag and source["repository"] == "github.com/kubeflow/trainer"


@pytest.mark.parametrize("tag", trainer_crds.TAGS)
def test_a_misspelt_or_mistyped_field_fails_the_crd_check(tag):
    schema = trainer_crds.load(tag)["trainjobs"]["schema"]
    job = trainer_crds.template_manifests()["trainjobs"][0]
    job["spec"]["trainer"]["numnodes"] = 2
    job["spec"]["trainer"]["numNodes"] = "2"
    del job["spec"]["runtimeRef"]["name"]
    found = trainer_crds.errors(job, schema)
    assert 'spec.trainer.numnodes: unknown field "numnodes"' in found
    assert "spec.trainer.numNodes: must be of type integer, got '2'" in found
    assert "spec.runtimeRef.name: Required value" in found
    # v2.1.0's podTemplateOverrides is gone from v2.2.0's TrainJob: a field of one release only.
    job = trainer_crds.template_manifests()["trainjobs"][0]
    job["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}]}]
    outcome = trainer_crds.errors(job, schema)
    if tag == "v2.2.0":
        assert outcome == ['spec.podTemplateOverrides: unknown field "podTemplateOverrides"']
    else:
        assert outcome and "has not walked" in outcome[0]


def test_the_runtime_is_plainml_over_one_replicated_job_of_n_nodes():
    spec = full_spec()
    manifest = runtime_manifest(spec)
    assert manifest["kind"] == "ClusterTrainingRuntime" and "mlPolicy" not in manifest["spec"]
    (rjob,) = manifest["spec"]["template"]["spec"]["replicatedJobs"]
    assert rjob["name"] == naming.NODE
    assert rjob["template"]["metadata"]["labels"] == {naming.ANCESTOR_LABEL: "trainer"}
    job = rjob["template"]["spec"]
    assert (job["parallelism"], job["completions"], job["backoffLimit"]) == (4, 4, 0)
    assert job["activeDeadlineSeconds"] == 6 * 3600
    pod = job["template"]
    assert pod["metadata"]["labels"] == POD_LABELS == {"sidecar.istio.io/inject": "false"}
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["serviceAccountName"] == "default-editor"
    assert pod["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    (container,) = pod["spec"]["containers"]
    assert container["name"] == "node" and container["image"] == DIGEST_IMAGE
    assert "resources" not in container  # the TrainJob's resourcesPerNode
    with pytest.raises(ValueError, match="namespaced"):
        runtime_manifest(dataclasses.replace(spec, runtime_kind="TrainingRuntime"))


def test_the_training_runtime_command_writes_a_digest_pinned_runtime(tmp_path, capsys):
    config = tmp_path / "settings.yaml"
    raw = copy.deepcopy(RAW_SETTINGS)
    config.write_text(yaml.safe_dump(raw))
    out = tmp_path / "runtime.yaml"
    assert (
        kfp_compile.main(["--training-runtime", "--output", str(out), "--config", str(config)]) == 2
    )
    error = capsys.readouterr().err
    assert error.startswith("error: image: ") and "is not pinned by digest" in error
    assert len(error.strip().splitlines()) == 1 and not out.exists()
    args = ["--output", str(out), "--config", str(config), "--image", DIGEST_IMAGE]
    assert kfp_compile.main(["--training-runtime", *args]) == 0
    written = yaml.safe_load(out.read_text())
    assert written["metadata"]["name"] == "tfx-multi-worker"
    assert "kubectl apply -f" in capsys.readouterr().out
    raw["training"]["trainjob"]["runtime_kind"] = "TrainingRuntime"
    config.write_text(yaml.safe_dump(raw))
    assert kfp_compile.main(["--training-runtime", *args]) == 2
    assert "give --namespace" in capsys.readouterr().err
    assert kfp_compile.main(["--training-runtime", *args, "--namespace", NAMESPACE]) == 0
    assert yaml.safe_load(out.read_text())["metadata"]["namespace"] == NAMESPACE


def test_a_trainjob_name_jobset_would_refuse_is_refused_before_any_call():
    spec = full_spec()
    assert naming.name_problem("trainer-" + "a" * 39, 99) is None  # the longest job_name gives
    with pytest.raises(ValueError, match="JobSet's pod name"):
        trainjob_manifest(spec, name="t" * 50, namespace=NAMESPACE, args=[])
    with pytest.raises(ValueError, match="TrainJob name 'Trainer-1'"):
        trainjob_manifest(spec, name="Trainer-1", namespace=NAMESPACE, args=[])


# --- TF_CONFIG --------------------------------------------------------------------


def node_env(index: int, **changes) -> dict[str, str]:
    env = {
        "TFX_JOBSET_NAME": "trainer-1", "TFX_REPLICATED_JOB_NAME": "node", "TFX_JOB_INDEX": "0",
        "TFX_NAMESPACE": NAMESPACE, "TFX_NUM_NODES": "3", "TFX_WORKER_PORT": "2222",
        "JOB_COMPLETION_INDEX": str(index),
    }  # fmt: skip
    return {k: v for k, v in {**env, **changes}.items() if v is not None}


def test_tf_config_names_every_node_by_jobsets_pod_names():
    config = tf_config(node_env(1))
    assert config == {
        "cluster": {"worker": [
            f"trainer-1-node-0-{i}.trainer-1.{NAMESPACE}.svc:2222" for i in range(3)
        ]},
        "task": {"type": "worker", "index": 1},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"JOB_COMPLETION_INDEX": None}, "JOB_COMPLETION_INDEX is not set"),
        ({"JOB_COMPLETION_INDEX": "3"}, "JOB_COMPLETION_INDEX 3 is not below TFX_NUM_NODES 3"),
        ({"TFX_REPLICATED_JOB_NAME": "launcher"}, "replicated job 'launcher'"),
        ({"TFX_WORKER_PORT": "http"}, "TFX_WORKER_PORT: must be an integer"),
    ],
)
def test_a_pod_without_what_tf_config_needs_is_refused_naming_the_variable(changes, message):
    with pytest.raises(TFConfigError, match=message):
        tf_config(node_env(0, **changes))


# --- The step against Trainer v2 and JobSet's stand-in --------------------------------


@pytest.fixture
def standin(tmp_path, monkeypatch):
    with KubernetesStandin(
        sys.executable,
        users={TOKEN: STEP_USER},
        base_env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO_ROOT)},
        secrets={"store": {"secretkey": "s3cr3t"}},
    ) as api:
        TrainerController(api)
        monkeypatch.setenv(
            "KUBECONFIG", str(api.kubeconfig(tmp_path / "kc", namespace=NAMESPACE, token=TOKEN))
        )
        yield api


def probe_spec(nodes: int = 2, **env: str) -> TrainJobSpec:
    return dataclasses.replace(
        full_spec(), command=PROBE, nodes=nodes, working_dir=str(REPO_ROOT), resources={},
        node_selector={}, tolerations=(), service_account=None,
        env=tuple({"name": k, "value": v} for k, v in env.items()),
    )  # fmt: skip


def install(api, spec: TrainJobSpec, **job) -> None:
    manifest = runtime_manifest(spec, NAMESPACE)
    manifest["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"].update(job)
    api.trainer.install_runtime(manifest)


def probe_job(name: str, spec: TrainJobSpec) -> dict:
    return trainjob_manifest(spec, name=name, namespace=NAMESPACE, args=[])


def test_a_trainjob_that_completes_streams_node_0s_log_and_is_kept(standin):
    spec = probe_spec(3)
    install(standin, spec)
    lines: list[str] = []
    job = run_trainjob(Cluster.from_environment(), probe_job("ok-1", spec), timing=FAST,
                       write=lines.append)  # fmt: skip
    (condition,) = job["status"]["conditions"]
    assert (condition["type"], condition["reason"]) == ("Complete", "AllJobsCompleted")
    assert "[ok-1-node-0-0] node 0 of 3" in lines and "[ok-1-node-0-0] finished 0" in lines
    assert not any("node 1 of" in line for line in lines)  # node 0's log only
    assert (
        lines[0] == "Created TrainJob team-a/ok-1: 3 nodes on ClusterTrainingRuntime "
        "tfx-multi-worker; following node 0's log"
    )
    assert standin.trainer.deleted == [] and (NAMESPACE, "ok-1") in standin.trainer.trainjobs
    assert job["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]


def test_tf_config_agrees_with_the_pods_and_service_the_jobset_made(standin):
    spec = probe_spec(3, SLEEP="2")
    install(standin, spec)
    run_trainjob(Cluster.from_environment(), probe_job("names-1", spec), timing=FAST, write=print)
    trainjob = standin.trainer.trainjobs[(NAMESPACE, "names-1")]
    assert trainjob.jobset["metadata"]["name"] == "names-1"
    assert trainjob.service["metadata"]["name"] == "names-1"
    assert trainjob.service["spec"]["clusterIP"] == "None"
    annotation = naming.COMPLETION_INDEX_ANNOTATION
    pods = sorted(
        standin.trainer.node_pods("names-1"),
        key=lambda p: int(p.manifest["metadata"]["annotations"][annotation]),
    )
    expected = [
        f"{p.hostname}.{p.manifest['spec']['subdomain']}.{NAMESPACE}.svc:2222" for p in pods
    ]
    for index, pod in enumerate(pods):
        assert pod.pod.startswith(f"names-1-node-0-{index}-") and len(pod.pod) == len(
            "names-1-node-0-0-abcde"
        )
        env = standin._container_env(pod.container, pod.manifest)
        assert env["JOB_COMPLETION_INDEX"] == str(index)
        assert tf_config(env) == {"cluster": {"worker": expected},
                                  "task": {"type": "worker", "index": index}}  # fmt: skip
        built = next(t for _, t in pod.lines if t.startswith("TF_CONFIG as built "))
        assert json.loads(built.removeprefix("TF_CONFIG as built ")) == tf_config(env)


def test_a_node_killed_mid_training_fails_the_step_naming_it_and_deletes_the_trainjob(standin):
    spec = probe_spec(2, SLEEP="30")
    install(standin, spec)
    standin.oom_kill("kill-1-node-0-1", after="node 1 of 2")
    started = time.monotonic()
    with pytest.raises(TrainJobFailed) as err:
        run_trainjob(Cluster.from_environment(), probe_job("kill-1", spec), timing=FAST,
                     write=print)  # fmt: skip
    assert time.monotonic() - started < 25
    text = str(err.value)
    assert text.startswith(
        f"TrainJob {NAMESPACE}/kill-1 failed: jobset failed due to one or more job failures "
        "(first failed job: kill-1-node-0)"
    )
    assert "node kill-1-node-0-1 (pod kill-1-node-0-1-" in text
    assert "(exit code 137, OOMKilled); its last log lines:\nTF_CONFIG" in text
    assert "node 1 of 2" in text
    assert standin.trainer.deleted == ["kill-1"] and standin.running_pods() == []
    assert (NAMESPACE, "kill-1") not in standin.trainer.trainjobs
    # Foreground deletion: the pods, then the Job and the JobSet, then the TrainJob.
    collected = standin.trainer.collected
    assert collected[-2:] == ["Job/kill-1-node-0", "JobSet/kill-1"]
    assert all(c.startswith("Pod/") for c in collected[:-2])


def test_a_missing_runtime_is_refused_in_one_line_before_any_trainjob(standin):
    spec = probe_spec(2)
    with pytest.raises(RuntimeMissing) as err:
        run_trainjob(Cluster.from_environment(), probe_job("nort-1", spec), timing=FAST)
    text = str(err.value)
    assert text == (
        "error: no ClusterTrainingRuntime 'tfx-multi-worker' in the cluster: the TrainJob's "
        "runtime is installed once per cluster (or profile); install it: python -m "
        "kubeflow.compile --training-runtime --output runtime.yaml && kubectl apply -f runtime.yaml"
    )
    assert standin.trainer.created == []


def test_trainers_webhook_refuses_a_trainjob_whose_runtime_is_gone(standin):
    spec = probe_spec(2)
    with pytest.raises(ClusterError, match=r"Trainer's webhook refused the job: .*specified "
                       "clusterTrainingRuntime must be created before the TrainJob"):  # fmt: skip
        Cluster.from_environment().create_trainjob(probe_job("hook-1", spec))


def test_the_stand_ins_admission_defaults_prunes_and_refuses_as_trainers_crd(standin):
    spec = probe_spec(2)
    install(standin, spec)
    cluster = Cluster.from_environment()
    manifest = probe_job("adm-1", spec)
    del manifest["spec"]["runtimeRef"]["apiGroup"], manifest["spec"]["runtimeRef"]["kind"]
    manifest["spec"]["trainer"]["numProcs"] = 2
    created = cluster.create_trainjob(manifest)
    assert created["spec"]["runtimeRef"] == {
        "name": "tfx-multi-worker",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert created["spec"]["suspend"] is False
    assert created["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    assert "numProcs" not in created["spec"]["trainer"]
    assert standin.trainer.warnings == ['spec.trainer.numProcs: unknown field "numProcs"']
    bad = probe_job("adm-2", spec)
    bad["spec"]["trainer"]["numNodes"] = "two"
    with pytest.raises(
        ClusterError, match=r"Trainer's CRD refused the job: .*numNodes: must be of type integer"
    ):
        cluster.create_trainjob(bad)


def test_the_step_uses_only_the_verbs_a_profiles_default_editor_has(standin):
    spec = probe_spec(2, FAIL_INDEX="1", SLEEP="5")
    install(standin, spec)
    with pytest.raises(TrainJobFailed, match=r"node rbac-1-node-0-1 \(pod .*exit code 3, Error"):
        run_trainjob(
            Cluster.from_environment(), probe_job("rbac-1", spec), timing=FAST, write=print
        )
    # As RBAC names each request (verb, group, resource, namespace).
    used = {(verb, resource, group) for verb, group, resource, _ in standin.requests}
    assert ("delete", "trainjobs", "trainer.kubeflow.org") in used
    for tag, rules in EDIT_RULES.items():
        for verb, resource, group in used:
            assert verb in rules[(resource, group)], (tag, verb, resource)


def test_a_refused_create_names_the_service_account_and_the_permissions(standin):
    spec = probe_spec(2)
    install(standin, spec)
    standin.forbid("create", "trainjobs")
    with pytest.raises(ClusterError) as err:
        run_trainjob(Cluster.from_environment(), probe_job("rbac-2", spec), timing=FAST)
    assert str(err.value).startswith(
        f"Kubernetes refused to create trainjobs.trainer.kubeflow.org in namespace {NAMESPACE} "
        f"for service account {NAMESPACE}/pipeline-runner: "
    )
    assert "create, get, delete on trainjobs.trainer.kubeflow.org" in str(err.value)


def test_a_cluster_without_trainer_says_to_install_it(standin):
    standin.trainer.crd_installed = False
    with pytest.raises(RuntimeMissing, match="no ClusterTrainingRuntime 'tfx-multi-worker'"):
        run_trainjob(Cluster.from_environment(), probe_job("nocrd-1", probe_spec(2)), timing=FAST)
    with pytest.raises(
        ClusterError,
        match=r"the API has no trainjobs\.trainer\.kubeflow\.org .*install Kubeflow Trainer v2",
    ):
        Cluster.from_environment().create_trainjob(probe_job("nocrd-1", probe_spec(2)))


def test_a_job_past_the_runtimes_deadline_fails_and_is_deleted(standin):
    spec = probe_spec(2, SLEEP="60")
    install(standin, spec, activeDeadlineSeconds=2)
    with pytest.raises(TrainJobFailed) as err:
        run_trainjob(
            Cluster.from_environment(), probe_job("slow-1", spec), timing=FAST, write=print
        )
    assert "first failed job: slow-1-node-0" in str(err.value)
    # Its running pods were deleted: node 0's streamed lines stand in for its log.
    assert "node slow-1-node-0-0 (gone); its last log lines:" in str(err.value)
    assert "node 0 of 2" in str(err.value)
    assert standin.running_pods() == [] and standin.trainer.deleted == ["slow-1"]


def test_the_step_gives_up_waiting_past_the_deadline_and_deletes_the_trainjob(standin):
    spec = probe_spec(2, SLEEP="60")
    install(standin, spec)
    with pytest.raises(
        TrainJobFailed,
        match=r"did not finish within 2 s \(its deadline, training.trainjob.deadline",
    ):
        run_trainjob(
            Cluster.from_environment(),
            probe_job("stuck-1", spec),
            timing=Timing(0.2, 2),
            write=print,
        )
    assert standin.trainer.deleted == ["stuck-1"] and standin.running_pods() == []


def test_a_cancelled_step_deletes_its_trainjob(standin, tmp_path):
    """KFP stops a cancelled run's pods with SIGTERM; the step then deletes its TrainJob."""
    spec = probe_spec(2, SLEEP="60")
    install(standin, spec)
    (tmp_path / "manifest.json").write_text(json.dumps(probe_job("cancel-1", spec)))
    step = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(
            """
            import json, sys
            from kubeflow.trainjob.cluster import Cluster
            from kubeflow.trainjob.job import run_trainjob
            from kubeflow.training_job import Timing
            manifest = json.load(open(sys.argv[1]))
            run_trainjob(Cluster.from_environment(), manifest, timing=Timing(0.2, 60))
            """
        ), str(tmp_path / "manifest.json")],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while len(standin.running_pods()) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    step.send_signal(signal.SIGTERM)
    output, _ = step.communicate(timeout=30)
    assert step.returncode != 0 and "StepTerminated: SIGTERM" in output
    assert f"Deleted TrainJob {NAMESPACE}/cancel-1" in output
    assert standin.trainer.deleted == ["cancel-1"]
    deadline = time.monotonic() + 5
    while standin.running_pods() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert standin.running_pods() == []


@pytest.mark.slow
def test_two_nodes_train_one_model_and_node_0_writes_it(standin, tmp_path):
    out = tmp_path / "out"
    spec = probe_spec(2, TRAIN_DIR=str(out), TF_CPP_MIN_LOG_LEVEL="2")
    install(standin, spec)
    lines: list[str] = []
    run_trainjob(Cluster.from_environment(), probe_job("mwms-1", spec),
                 timing=Timing(0.5, 300), write=lines.append)  # fmt: skip
    logs = {
        p.hostname: "\n".join(t for _, t in p.lines) for p in standin.trainer.node_pods("mwms-1")
    }
    for log in logs.values():
        assert "replicas_in_sync = 2" in log and "epoch 20 loss" in log
    assert "chief wrote" in logs["mwms-1-node-0-0"]
    assert "not the chief: wrote nothing" in logs["mwms-1-node-0-1"]
    assert [p.name for p in out.iterdir()] == ["model"]
    assert any(line.startswith("[mwms-1-node-0-0] epoch 20 loss") for line in lines)
