"""The Kubeflow tuning package (docs/tuning.md): compiled and checked; its Tune step
executed against the Kubernetes stand-in, worker pods as keras-tuner processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.kubernetes_standin import KubernetesStandin

NAMESPACE = "kubeflow-user-example-com"
TOKEN = "tune-step-token"


def _settings(tmp_path, **tuning):
    from kubeflow import package_settings
    from tests.conftest import TEMPLATE_SETTINGS_FILE

    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    raw.setdefault("tuning", {}).update(tuning)
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(raw))
    return package_settings.load_tuning_settings(path)


@pytest.mark.slow  # two TFX compiles of the DAG
def test_the_tuning_package_is_the_training_dag_up_to_transform_then_tune(tmp_path):
    from kubeflow import compile as kfp_compile
    from kubeflow import spec_completion, tfx_spec
    from kubeflow.tuning.spec import TuningSpec
    from pipeline.steps import EXAMPLE_GEN, SCHEMA_IMPORTER, TRANSFORM

    settings = _settings(tmp_path, workers=3, max_trials=7)
    spec, platform = kfp_compile.compile_tuning_pipeline(settings)
    training, _ = kfp_compile.compile_pipeline(settings)
    labels = tfx_spec.executor_labels(spec)
    assert set(labels) == {"InputSnapshot", EXAMPLE_GEN, SCHEMA_IMPORTER, TRANSFORM, "Tune"}
    tasks, training_tasks = tfx_spec.all_tasks(spec), tfx_spec.all_tasks(training)
    training_labels = tfx_spec.executor_labels(training)
    executors = spec["deploymentSpec"]["executors"]
    for step in ("InputSnapshot", EXAMPLE_GEN, TRANSFORM):
        # The same task and container as training's: KFP's cache serves one for the other.
        assert tasks[step]["inputs"] == training_tasks[step]["inputs"], step
        assert (
            executors[labels[step]]
            == training["deploymentSpec"]["executors"][training_labels[step]]
        ), step
    for label in labels.values():
        assert executors[label]["container"]["command"] == spec_completion.STEP_COMMAND
    tune_parameters = tasks["Tune"]["inputs"]["parameters"]
    tuning = TuningSpec.from_json(tune_parameters["tuning"]["runtimeValue"]["constant"])
    assert (tuning.workers, tuning.max_trials) == (3, 7)
    assert tuning.search_root == f"{settings.pipeline_root}/tuning"
    trainer_config = json.loads(tune_parameters["trainer_config"]["runtimeValue"]["constant"])
    trainer_constant = training_tasks["Trainer"]["inputs"]["parameters"]["custom_config"]
    assert trainer_config == json.loads(trainer_constant["runtimeValue"]["constant"])
    outputs = spec["components"][tasks["Tune"]["componentRef"]["name"]]["outputDefinitions"]
    assert "HyperParameters" in json.dumps(outputs["artifacts"]["hyperparameters"])
    assert set(spec["root"]["inputDefinitions"]["parameters"]) == {"data_root"}
    assert platform["platforms"]["kubernetes"]
    # The training package still has no tuning step.
    assert "Tune" not in tfx_spec.executor_labels(training)


@pytest.mark.parametrize(
    ("tuning", "named"),
    [
        ({"workers": 0}, r"tuning\.workers: must be an integer >= 1"),
        ({"max_trials": "ten"}, r"tuning\.max_trials: must be an integer >= 1"),
        ({"steps_per_trial": True}, r"tuning\.steps_per_trial: must be an integer >= 1"),
        ({"deadline": "6 hours"}, r"tuning\.deadline: '6 hours' is not a duration"),
        ({"accept_partial": "yes"}, r"tuning\.accept_partial: must be true or false"),
        ({"namespace": "Bad_NS"}, r"tuning\.namespace: 'Bad_NS' is not a namespace"),
        ({"replicas": 2}, r"tuning: unknown field\(s\) \['replicas'\]"),
        ({"resources": {"gpu": -1}}, r"tuning\.resources\.gpu"),
    ],
)
def test_tuning_settings_are_refused_by_field(tmp_path, tuning, named):
    from kubeflow.settings.fields import SettingsError

    with pytest.raises(SettingsError, match=named):
        _settings(tmp_path, **tuning)


def test_a_worker_pod_is_a_keras_tuner_worker_of_the_steps_chief(tmp_path):
    from kubeflow import package_dags
    from kubeflow.tuning.component import search_directory
    from kubeflow.tuning.pods import WORKER_COMMAND, search_name, worker_pod
    from trainer.tuning_workers import ORACLE_IP, ORACLE_PORT, TUNER_ID

    settings = _settings(
        tmp_path, resources={"cpu_request": "2", "memory_limit": "4Gi"},
        node_selector={"pool": "cpu"}, service_account="default-editor",
    )  # fmt: skip
    spec = package_dags.tuning_spec(settings)
    directory = search_directory(spec.search_root, "split:abc", "space1")
    # Keyed by the data and the space: the same for a retry, another for new data.
    assert directory == search_directory(spec.search_root, "split:abc", "space1")
    assert directory != search_directory(spec.search_root, "split:abd", "space1")
    assert directory != search_directory(spec.search_root, "split:abc", "space2")
    assert directory.startswith(f"{settings.pipeline_root}/tuning/")
    name = search_name("gs://b/root/run-1/Tune/hyperparameters")
    pods = [
        worker_pod(
            spec,
            name=name,
            namespace="kubeflow-user",
            index=i,
            job_file=f"{directory}/worker_job.json",
            oracle_ip="10.0.0.7",
            oracle_port=4321,
        )
        for i in range(2)
    ]
    for i, pod in enumerate(pods):
        container = pod["spec"]["containers"][0]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env[ORACLE_IP] == "10.0.0.7" and env[ORACLE_PORT] == "4321"
        assert env[TUNER_ID] == f"tuner{i}"
        assert container["command"] == list(WORKER_COMMAND)
        assert container["args"] == [f"{directory}/worker_job.json"]
        assert container["image"] == settings.image
        assert container["resources"] == {"requests": {"cpu": "2"}, "limits": {"memory": "4Gi"}}
        assert pod["spec"]["nodeSelector"] == {"pool": "cpu"}
        assert pod["spec"]["serviceAccountName"] == "default-editor"
        assert pod["spec"]["restartPolicy"] == "Never"
    assert len({p["metadata"]["name"] for p in pods}) == 2


@pytest.fixture
def standin(tmp_path, monkeypatch):
    """The Kubernetes stand-in, found as the step finds it outside a pod: KUBECONFIG."""
    with KubernetesStandin(
        sys.executable,
        users={TOKEN: f"system:serviceaccount:{NAMESPACE}:default-editor"},
        base_env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONUNBUFFERED": "1"},
    ) as api:
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig", namespace=NAMESPACE, token=TOKEN)
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        yield api


def _script_pod(name: str, script: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "tuner", "image": "img", "command": ["python", "-c", script]}],
        },
    }


def _wait_for(cluster, name: str, done) -> dict:
    import time

    for _ in range(300):
        pod = cluster.get_pod(NAMESPACE, name)
        if done(pod):
            return pod
        time.sleep(0.05)
    raise AssertionError(f"pod {name}: still {pod['status']['phase']}")


def test_a_pod_goes_pending_running_then_succeeded_or_failed_and_is_gone_once_deleted(standin):
    """The stand-in's pods, through the client the Tune step uses (kubeflow/tuning/pods.py)."""
    from kubeflow.kubernetes_api import ClusterError
    from kubeflow.tuning.pods import PodCluster, exit_code

    cluster = PodCluster.from_environment()
    # Each ends when the test has seen it run: a file it waits for.
    gate = standin._home + "/gate"
    wait = f"import os, sys, time\nwhile not os.path.exists({gate!r}): time.sleep(0.02)\n"
    cluster.create_pod(_script_pod("ok", wait + "print('done')"))
    cluster.create_pod(_script_pod("bad", wait + "sys.exit(3)"))
    with pytest.raises(ClusterError, match=r'HTTP 409 .*pods "ok" already exists'):
        cluster.create_pod(_script_pod("ok", "pass"))
    for name in ("ok", "bad"):
        running = _wait_for(cluster, name, lambda p: p["status"]["phase"] != "Pending")
        assert running["status"]["phase"] == "Running" and exit_code(running) is None
        assert running["status"]["podIP"] == "127.0.0.1"
    Path(gate).touch()
    ok = _wait_for(cluster, "ok", lambda p: p["status"]["phase"] not in ("Pending", "Running"))
    bad = _wait_for(cluster, "bad", lambda p: p["status"]["phase"] not in ("Pending", "Running"))
    assert (ok["status"]["phase"], exit_code(ok)) == ("Succeeded", 0)
    assert (bad["status"]["phase"], exit_code(bad)) == ("Failed", 3)
    assert standin.replica_log("ok") == "done\n"
    # Pending first, with no IP: the API server's object before the kubelet ran it.
    assert [p.phases for p in standin.pods.values()] == [
        ["Pending", "Running", "Succeeded"], ["Pending", "Running", "Failed"]
    ]  # fmt: skip
    assert cluster.delete_pod(NAMESPACE, "ok") is True
    assert cluster.get_pod(NAMESPACE, "ok") is None
    assert cluster.delete_pod(NAMESPACE, "ok") is False
    standin.forbid("create", "pods")
    with pytest.raises(ClusterError, match=r"needs create, get, delete on pods"):
        cluster.create_pod(_script_pod("refused", "pass"))


def _artifact(kind, uri: str):
    artifact = kind()
    artifact.uri = uri
    return artifact


def _run_tune_step(inputs: dict, spec, tmp: Path, output_uri: str) -> Path:
    """The Tune step's executor, as the step's container runs it: the compiled
    parameters, and the artifacts its inputs resolved to."""
    import shutil

    from tfx.types import standard_artifacts

    from kubeflow.tuning.component import Tune
    from kubeflow.tuning.spec import TuningSpec
    from trainer.config import RuntimeConfig, TrainerConfig

    transformed = tmp / "transformed"
    for split, key in (("train", "train_files"), ("eval", "eval_files")):
        (transformed / f"Split-{split}").mkdir(parents=True, exist_ok=True)
        shutil.copy(inputs[key], transformed / f"Split-{split}" / "data.gz")
    examples = _artifact(standard_artifacts.Examples, str(tmp / "examples"))
    examples.set_string_custom_property("input_fingerprint", "split:taxi-2000")
    examples.mlmd_artifact.create_time_since_epoch = 1_790_000_000_000
    hyperparameters = _artifact(standard_artifacts.HyperParameters, output_uri)
    tuning = TuningSpec(
        image="pipeline-image",
        working_dir=str(REPO_ROOT),
        workers=2,
        max_trials=2,
        steps_per_trial=5,
        eval_steps=2,
        deadline_seconds=600,
        search_root=str(tmp / "root" / "tuning"),
        namespace=NAMESPACE,
    )
    config = TrainerConfig(
        runtime=RuntimeConfig(
            accelerator="cpu", precision="float32", per_replica_batch_size=64,
            shuffle_buffer_size=200,
        )
    )  # fmt: skip
    Tune.EXECUTOR_SPEC.executor_class().Do(
        {
            "examples": [examples],
            "transformed_examples": [_artifact(standard_artifacts.Examples, str(transformed))],
            "transform_graph": [
                _artifact(standard_artifacts.TransformGraph, inputs["transform_output"])
            ],
        },
        {"hyperparameters": [hyperparameters]},
        {
            "tuning": tuning.to_json(),
            "trainer_config": json.dumps(config.to_custom_config() | spec.to_custom_config()),
        },
    )
    return Path(output_uri) / "hyperparameters.yaml"


def test_the_tune_step_runs_its_trials_in_worker_pods_and_a_retry_resumes(
    tmp_path, standin, taxi_trainer_inputs, taxi_spec
):
    """Issue 55: the chief in the step's process, two worker pods as keras-tuner
    processes asking it for trials over gRPC on 127.0.0.1; a retry runs no trial again."""
    from trainer.hyperparameters import load_frozen

    output = str(tmp_path / "Tune" / "hyperparameters")
    frozen_file = _run_tune_step(taxi_trainer_inputs, taxi_spec, tmp_path, output)
    frozen = load_frozen(frozen_file)
    assert frozen.provenance["trials"] == 2 and frozen.provenance["partial"] is False
    pods = [p for p in standin.created if p["kind"] == "Pod"]
    assert [p["metadata"]["name"].rsplit("-", 2)[1:] for p in pods] == [
        ["worker", "0"], ["worker", "1"]
    ]  # fmt: skip
    # Both pods ran trials against the chief and ended; the step deleted them.
    assert standin.pods == {} and standin.running_pods() == []
    assert [p.phases[-1] for p in standin.deleted_pods] == ["Succeeded", "Succeeded"]
    # A retry of the step (same output, same data): the oracle's state says the
    # budget is spent, so no pod is created and the same winner is written.
    frozen_file.unlink()
    _run_tune_step(taxi_trainer_inputs, taxi_spec, tmp_path, output)
    assert [p for p in standin.created if p["kind"] == "Pod"] == pods
    again = load_frozen(frozen_file)
    assert again.model == frozen.model
    assert {**again.provenance, "tuned_at": None} == {**frozen.provenance, "tuned_at": None}


@pytest.mark.slow  # a fresh process that imports TensorFlow
def test_a_worker_pod_imports_neither_tfx_components_nor_tfma():
    # A worker pod runs `python -m kubeflow.tuning.worker`, whose main() imports trainer.tuning,
    # and through it trainer/run.py. TFX's component package (tfx/components/__init__.py
    # imports every component's spec, and TFMA with the Evaluator's) would add seconds and
    # hundreds of MB to each trial pod's start; trainer/run.py reads TFX's FnArgs only for
    # its annotation (TYPE_CHECKING), and import-linter cannot see that difference.
    from kubeflow.tuning.pods import WORKER_COMMAND

    # The module the pod runs, then what its main() imports before it works.
    probe = (
        "import json, sys\n"
        f"import {WORKER_COMMAND[-1]}, trainer.tuning\n"
        "print(json.dumps(sorted(m for m in sys.modules\n"
        "    if m.startswith(('tfx.components', 'tensorflow_model_analysis')))))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(loaded.stdout.splitlines()[-1]) == []
