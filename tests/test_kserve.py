"""Serving on KServe: the `serving:` settings, the InferenceService, and each rollout path.

The rollouts run kubeflow/kserve/rollout.py against tests/kubernetes_standin.py,
which plays KServe's controller (tests/kserve_standin.py): revisions, readiness,
traffic, and each revision's predictor answering REST requests from the
SavedModel under its storageUri, read as TF Serving reads a base path. The
model is conftest's small one (`small_model_base`).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml

from kubeflow.kserve import layout, manifest, smoke
from kubeflow.kserve.cluster import ServingCluster
from kubeflow.kserve.rollout import DeployError, Rollout
from kubeflow.settings import parse_settings
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.serving import parse_serving
from tests.conftest import TEMPLATE_SETTINGS_FILE
from tests.kubernetes_standin import KubernetesStandin
from tests.test_kubeflow_reference import run_in_reference_env
from tests.test_serving_signature import examples, instances, rows_with_gaps
from trainer.json_signature import JSON_SIGNATURE

NAMESPACE = "models"
TOKEN = "deploy-token"
SERVING = {"inference_service": "taxi", "service_account": "kserve-models", "ready_timeout": "30s"}


def serving_config(**changes) -> dict:
    serving = parse_serving({**SERVING, **changes}, "/serving/taxi")
    assert serving is not None
    return serving.to_json()


# --- settings ----------------------------------------------------------------------------


def test_no_serving_section_means_no_deploy_step():
    assert parse_serving(None, "gs://b/serving") is None


def test_defaults_give_a_canary_and_promotion_after_the_smoke_request():
    config = serving_config()
    assert config["canary_traffic_percent"] == 10 and config["promotion"] == "after_smoke"
    assert config["storage_root"] == "/serving/taxi-kserve"
    assert config["ready_timeout_seconds"] == 30


@pytest.mark.parametrize(
    ("changes", "model_dir", "message"),
    [
        (
            {"service_account": None},
            "s3://models/serving/taxi",
            "serving.service_account: required when the model is on s3://",
        ),
        (
            {"canary_traffic_percent": 100},
            "gs://b/serving",
            "serving.canary_traffic_percent: must be between 0 and 99, got 100",
        ),
        (
            {"inference_service": "Taxi_Model"},
            "gs://b/serving",
            "serving.inference_service: 'Taxi_Model' must be lowercase",
        ),
        ({"ready_timeout": "soon"}, "gs://b/serving", "serving.ready_timeout: 'soon' is not"),
        ({"promotion": "always"}, "gs://b/serving", "serving.promotion: must be one of"),
        (
            {"storage_root": "s3://elsewhere/models"},
            "gs://b/serving",
            "serving.storage_root: 's3://elsewhere/models' must be in the same store",
        ),
        ({"smoke": {"rows": 0}}, "gs://b/serving", "serving.smoke.rows: must be between 1"),
        (
            {"predictor": {"resources": {"gpu": -1}}},
            "gs://b/serving",
            "serving.predictor.resources.gpu: must be >= 0",
        ),
        ({"replicas": 2}, "gs://b/serving", "serving: unknown field(s) ['replicas']"),
    ],
    ids=[
        "s3_without_service_account",
        "canary_100",
        "bad_name",
        "bad_timeout",
        "bad_promotion",
        "other_store",
        "no_rows",
        "negative_gpu",
        "unknown_field",
    ],
)
def test_a_serving_section_that_cannot_work_is_refused_naming_the_field(
    changes, model_dir, message
):
    values = {**SERVING, **changes}
    values = {k: v for k, v in values.items() if v is not None}
    with pytest.raises(SettingsError, match=None) as raised:
        parse_serving(values, model_dir)
    assert message in str(raised.value)


def test_the_settings_file_reads_a_serving_section():
    from kubeflow.compile import pipeline_component_ids

    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    raw["serving"] = dict(SERVING)
    settings = parse_settings(raw, pipeline_component_ids())
    assert settings.serving is not None and settings.serving.inference_service == "taxi"


# --- the InferenceService, against KServe's own models ----------------------------------


def rendered_services() -> list[dict]:
    config = serving_config(
        predictor={
            "resources": {"cpu_request": "1", "memory_request": "2Gi", "gpu": 1},
            "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        }
    )
    created = manifest.inference_service(config, NAMESPACE, "gs://b/serving-kserve/17", "17")
    patched = json.loads(json.dumps(created))
    patched.update(manifest.rollout_patch(config, "gs://b/serving-kserve/18", "18", "gs://x/17"))
    patched["metadata"].update(name="taxi", namespace=NAMESPACE)
    return [created, patched]


@pytest.mark.slow
def test_the_inference_service_is_one_kserves_models_take_unchanged(tmp_path):
    files = []
    for i, service in enumerate(rendered_services()):
        path = tmp_path / f"isvc-{i}.json"
        path.write_text(json.dumps(service))
        files.append(str(path))
    proc = run_in_reference_env("check_inferenceservice.py", *files, timeout=300)
    results = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    assert [r["differences"] for r in results] == [[], []], proc.stderr[-2000:]
    assert proc.returncode == 0


@pytest.mark.slow
def test_a_field_kserve_does_not_have_is_caught(tmp_path):
    service = rendered_services()[0]
    service["spec"]["predictor"]["model"]["storageURI"] = "gs://typo"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(service))
    proc = run_in_reference_env("check_inferenceservice.py", str(path), timeout=300)
    assert proc.returncode == 1
    assert "spec.predictor.model.storageURI: not a field" in proc.stdout


def test_the_predictor_is_tensorflow_on_the_versions_own_base_path():
    created, patched = rendered_services()
    predictor = created["spec"]["predictor"]
    assert predictor["model"] == {
        "name": "kserve-container",
        "modelFormat": {"name": "tensorflow"},
        "storageUri": "gs://b/serving-kserve/17",
        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1", "memory": "2Gi"}},
    }
    assert predictor["serviceAccountName"] == "kserve-models"
    assert "canaryTrafficPercent" not in predictor  # nothing to split with yet
    assert patched["spec"]["predictor"]["canaryTrafficPercent"] == 10
    assert created["metadata"]["annotations"][manifest.TAG_ROUTING_ANNOTATION] == "true"
    assert patched["metadata"]["annotations"][manifest.ROLLBACK_ANNOTATION] == "gs://x/17"


# --- rollouts against the stand-in -------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kserve")
    standin = KubernetesStandin(sys.executable, users={TOKEN: "system:serviceaccount:x:deployer"})
    standin.kserve.add_object(
        NAMESPACE,
        "serviceaccounts",
        {"metadata": {"name": "kserve-models"}, "secrets": [{"name": "s3-creds"}]},
    )
    with standin:
        standin.kubeconfig(tmp / "kubeconfig", namespace=NAMESPACE, token=TOKEN)
        from kubernetes import config as kube_config

        client = kube_config.new_client_from_config(str(tmp / "kubeconfig"))
        yield standin, ServingCluster(client, NAMESPACE)


@pytest.fixture(scope="module")
def served(small_model_base):
    return {"base": small_model_base}


@pytest.fixture(scope="module")
def smoke_rows(served, taxi_trainer_inputs, taxi_spec):
    rows = rows_with_gaps(taxi_trainer_inputs, taxi_spec)[:8]
    serialized = examples(rows, taxi_spec)
    model_dir = str(served["base"] / "1")
    return instances(served, serialized), smoke.expected_scores(model_dir, serialized)


def pushed_version(served, root: Path, version: str) -> str:
    """A version as the Pusher writes it: serving_model_dir/<version>/."""
    target = root / "serving" / version
    if not target.exists():
        shutil.copytree(served["base"] / "1", target)
    return str(target)


def rollout(cluster, served, smoke_rows, root: Path, version: str, **changes) -> Rollout:
    _, api = cluster
    config = serving_config(storage_root=str(root / "kserve"), **changes)
    pushed = pushed_version(served, root, version)
    instances_, expected = smoke_rows
    return Rollout(
        cluster=api,
        config=config,
        namespace=NAMESPACE,
        version=version,
        storage_uri=layout.publish_version(pushed, config["storage_root"], version),
        instances=instances_,
        expected=expected,
        log=lambda _: None,
        poll_seconds=0.1,
    )


@pytest.fixture(scope="module")
def rollouts(cluster, served, smoke_rows, tmp_path_factory):
    """Version 100 is created; 200 is promoted through a canary; 300's revision fails;
    400 answers wrongly; each failure rolls back to 200."""
    standin, _ = cluster
    root = tmp_path_factory.mktemp("rollouts")
    kserve = standin.kserve
    results = {"root": root}
    results["created"] = rollout(cluster, served, smoke_rows, root, "100").run()
    results["promoted"] = rollout(cluster, served, smoke_rows, root, "200").run()
    results["after_promotion"] = kserve.service(NAMESPACE, "taxi")
    kserve.fail_next_revision(
        "RevisionFailed",
        'Revision "taxi-predictor-00003" failed with message: Back-off pulling image',
    )
    with pytest.raises(DeployError) as failed:
        rollout(cluster, served, smoke_rows, root, "300").run()
    results["failed"] = str(failed.value)
    results["after_failed"] = kserve.serving_storage_uri(NAMESPACE, "taxi")
    kserve.answer_wrongly()
    with pytest.raises(DeployError) as wrong:
        rollout(cluster, served, smoke_rows, root, "400").run()
    kserve.answer_wrongly(False)
    results["wrong"] = str(wrong.value)
    results["after_wrong"] = kserve.service(NAMESPACE, "taxi")
    results["applied"] = list(kserve.applied)
    results["requests"] = list(kserve.predict_requests)
    return results


def test_a_first_version_creates_the_service_and_takes_all_traffic(rollouts):
    created = rollouts["created"]
    assert created.outcome == "created" and created.version == "100"
    verb, body = rollouts["applied"][0]
    assert verb == "create" and body["spec"]["predictor"]["model"]["storageUri"] == str(
        rollouts["root"] / "kserve" / "100"
    )
    assert [t["percent"] for t in created.traffic] == [100]
    # TF Serving's layout: the base path holds the version as a numbered directory.
    assert (rollouts["root"] / "kserve" / "100" / "100" / "saved_model.pb").exists()


def test_the_smoke_request_is_eval_rows_through_the_json_signature(rollouts, smoke_rows):
    first = rollouts["requests"][0]
    assert first["revision"] == "taxi-predictor-00001"
    assert first["body"]["signature_name"] == JSON_SIGNATURE
    assert len(first["body"]["instances"]) == len(smoke_rows[0])


def test_a_later_version_goes_through_a_canary_to_all_traffic(rollouts):
    promoted = rollouts["promoted"]
    assert promoted.outcome == "promoted"
    verb, patch = rollouts["applied"][1]
    assert verb == "patch"
    assert patch["spec"]["predictor"]["canaryTrafficPercent"] == 10
    assert patch["spec"]["predictor"]["model"]["storageUri"].endswith("/kserve/200")
    assert patch["metadata"]["annotations"][manifest.ROLLBACK_ANNOTATION].endswith("/kserve/100")
    # The smoke request went to the canary's own revision, before promotion.
    assert rollouts["requests"][1]["revision"] == "taxi-predictor-00002"
    assert rollouts["applied"][2] == (
        "patch",
        {"spec": {"predictor": {"canaryTrafficPercent": None}}},
    )
    status = manifest.PredictorStatus.of(rollouts["after_promotion"])
    assert status.percent_of("taxi-predictor-00002") == 100


def test_a_failing_revision_is_rolled_back_naming_its_condition(rollouts):
    message = rollouts["failed"]
    assert "revision taxi-predictor-00003 failed: LatestDeploymentReady is False " in message
    assert '(RevisionFailed): Revision "taxi-predictor-00003" failed with message: Back-off' in (
        message
    )
    assert message.startswith("version 300 rolled back")
    assert message.endswith("/kserve/200 serves all traffic again")
    assert rollouts["after_failed"].endswith("/kserve/200")  # what served, serves


def test_a_revision_that_answers_wrongly_is_rolled_back_and_never_took_all_traffic(rollouts):
    message = rollouts["wrong"]
    assert "answered the smoke request (8 eval rows) differently from the pushed model" in message
    status = manifest.PredictorStatus.of(rollouts["after_wrong"])
    assert manifest.storage_uri(rollouts["after_wrong"]).endswith("/kserve/200")
    assert status.percent_of(status.latest_ready) == 100
    assert "canaryTrafficPercent" not in rollouts["after_wrong"]["spec"]["predictor"]
    # The rollback patch pinned traffic first: canary 0 with the previous storageUri.
    rollback = [
        b
        for v, b in rollouts["applied"]
        if v == "patch" and b.get("spec", {}).get("predictor", {}).get("canaryTrafficPercent") == 0
    ]
    assert rollback and all(
        b["spec"]["predictor"]["model"]["storageUri"].endswith("/kserve/200") for b in rollback
    )


def test_the_same_version_again_changes_nothing(cluster, served, smoke_rows, rollouts):
    again = rollout(cluster, served, smoke_rows, rollouts["root"], "200").run()
    assert again.outcome == "already_serving"


def test_serving_the_pushers_version_directory_itself_fails_as_tf_serving_does(
    cluster,
    served,
    smoke_rows,
    tmp_path,
):
    standin, _ = cluster
    broken = rollout(cluster, served, smoke_rows, tmp_path, "500", inference_service="direct")
    broken.storage_uri = pushed_version(served, tmp_path, "500")  # no numbered directory in it
    with pytest.raises(DeployError, match="No versions of servable found under base path"):
        broken.run()
    # Nothing served before: the service is deleted, not left failing.
    assert standin.kserve.service(NAMESPACE, "direct") is None


def test_a_first_version_that_answers_wrongly_leaves_no_service(
    cluster,
    served,
    smoke_rows,
    tmp_path,
):
    standin, _ = cluster
    standin.kserve.answer_wrongly()
    try:
        with pytest.raises(DeployError, match=r"differently from the pushed model.*deleted"):
            rollout(cluster, served, smoke_rows, tmp_path, "600", inference_service="fresh").run()
    finally:
        standin.kserve.answer_wrongly(False)
    assert standin.kserve.service(NAMESPACE, "fresh") is None


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        (
            {
                "metadata": {
                    "name": "s3-creds",
                    "annotations": {"serving.kserve.io/s3-endpoint": "http://minio:9000"},
                },
                "data": {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"},
            },
            "annotation serving.kserve.io/s3-endpoint is 'http://minio:9000'; KServe wants "
            "HOST:PORT",
        ),
        (
            {
                "metadata": {
                    "name": "s3-creds",
                    "annotations": {"serving.kserve.io/s3-endpoint": "minio:9000"},
                },
                "data": {"accesskey": "a", "secretkey": "b"},
            },
            "has no AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY",
        ),
        (
            {"metadata": {"name": "s3-creds"}, "data": {"AWS_ACCESS_KEY_ID": "a"}},
            "none of its secrets has the annotation serving.kserve.io/s3-endpoint",
        ),
    ],
    ids=["endpoint_with_scheme", "wrong_keys", "no_annotation"],
)
def test_s3_credentials_kserve_cannot_use_are_refused_before_anything_is_applied(
    cluster, secret, message
):
    standin, api = cluster
    standin.kserve.add_object(NAMESPACE, "secrets", secret)
    applied = len(standin.kserve.applied)
    check = Rollout(
        cluster=api,
        config=serving_config(),
        namespace=NAMESPACE,
        version="1",
        storage_uri="s3://models/kserve/1",
        instances=[],
        expected=np.zeros(0),
    )
    with pytest.raises(DeployError) as raised:
        check.check_credentials()
    assert f"serving.service_account {NAMESPACE}/kserve-models cannot read" in str(raised.value)
    assert message in str(raised.value)
    assert len(standin.kserve.applied) == applied


def test_a_missing_service_account_is_named(cluster):
    _, api = cluster
    check = Rollout(
        cluster=api,
        config=serving_config(service_account="nobody"),
        namespace=NAMESPACE,
        version="1",
        storage_uri="s3://m/1",
        instances=[],
        expected=np.zeros(0),
    )
    with pytest.raises(DeployError, match=f"service account {NAMESPACE}/nobody does not exist"):
        check.check_credentials()


def test_smoke_disagreement_names_the_row():
    expected = np.array([[0.2], [0.7]])
    assert smoke.disagreement(expected, expected + 1e-6, 1e-4) is None
    problem = smoke.disagreement(expected, np.array([[0.2], [0.3]]), 1e-4)
    assert problem.startswith("row 1: answered [0.3], the pushed model scores [0.7]")
    assert "tensorflow" not in problem and tf is not None


def test_the_compiled_deploy_step_runs_after_the_pusher_every_time_and_never_retries():
    from kubeflow import compile as kfp_compile
    from kubeflow import pipeline_steps as kubeflow_steps
    from kubeflow.compile import pipeline_beam_component_ids, pipeline_component_ids
    from kubeflow.tfx_spec import all_tasks
    from pipeline import pipeline as dag

    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    raw["serving"] = dict(SERVING)
    settings = parse_settings(
        raw, pipeline_component_ids(), pipeline_beam_component_ids(),
        kfp_compile.pipeline_retry_roles(),
    )  # fmt: skip
    spec, _ = kfp_compile.compile_pipeline(settings)
    tasks = all_tasks(spec)
    deploy = tasks[kubeflow_steps.DEPLOY]
    assert set(deploy["dependentTasks"]) == {dag.PUSHER, dag.EXAMPLE_GEN}
    assert kubeflow_steps.DEPLOY in tasks[kubeflow_steps.RUN_REPORT]["dependentTasks"]
    assert deploy["cachingOptions"] == {}  # it reads and changes the cluster
    assert "retryPolicy" not in deploy
    serving = json.loads(deploy["inputs"]["parameters"]["serving"]["runtimeValue"]["constant"])
    assert serving["inference_service"] == "taxi" and serving["canary_traffic_percent"] == 10
