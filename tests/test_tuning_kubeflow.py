"""The Kubeflow tuning package (docs/tuning.md): compiled and checked, not executed."""

from __future__ import annotations

import json

import pytest
import yaml


def _settings(tmp_path, **tuning):
    from kubeflow import compile as kfp_compile
    from tests.conftest import TEMPLATE_SETTINGS_FILE

    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    raw.setdefault("tuning", {}).update(tuning)
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(raw))
    return kfp_compile.load_tuning_settings(path)


@pytest.mark.slow  # two TFX compiles of the DAG
def test_the_tuning_package_is_the_training_dag_up_to_transform_then_tune(tmp_path):
    from kubeflow import compile as kfp_compile
    from kubeflow import tfx_spec
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
        assert executors[label]["container"]["command"] == kfp_compile.STEP_COMMAND
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
    from kubeflow import compile as kfp_compile
    from kubeflow.tuning.component import search_directory
    from kubeflow.tuning.pods import WORKER_COMMAND, search_name, worker_pod
    from trainer.tuning import ORACLE_IP, ORACLE_PORT, TUNER_ID

    settings = _settings(
        tmp_path, resources={"cpu_request": "2", "memory_limit": "4Gi"},
        node_selector={"pool": "cpu"}, service_account="default-editor",
    )  # fmt: skip
    spec = kfp_compile.tuning_spec(settings)
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
