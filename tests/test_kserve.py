"""Serving on KServe: the `serving:` settings, the InferenceService, and each rollout path.

The rollouts run kubeflow/kserve/rollout.py against tests/kubernetes_standin.py,
which plays KServe's controller (tests/kserve_standin.py): revisions, readiness,
traffic, and each revision's predictor answering REST requests from the
SavedModel under its storageUri, read as TF Serving reads a base path. The
model is conftest's small one (`small_model_base`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest
import tensorflow as tf
import yaml

from components.serving.push.executor import push_model
from components.serving.rollout_record import rolled_out_record, rolled_out_version
from components.serving.served_version import choose_version, served_version
from kubeflow.kserve import layout, manifest, smoke
from kubeflow.kserve import serving_runtime as runtime
from kubeflow.kserve.cluster import ServingCluster
from kubeflow.kserve.rollout import DeployError, Rollout
from kubeflow.light_step import StepArtifact
from kubeflow.settings import parse_settings
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.serving import parse_serving
from tests.conftest import TEMPLATE_SETTINGS_FILE
from tests.harness import examples, instances, rows_with_gaps, run_in_standin_harness
from tests.kubernetes_standin import KubernetesStandin
from trainer.json_signature import JSON_SIGNATURE

NAMESPACE = "models"
TOKEN = "deploy-token"
T = TypeVar("T")
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
    from kubeflow.package_settings import pipeline_step_ids

    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    raw["serving"] = dict(SERVING)
    settings = parse_settings(raw, pipeline_step_ids())
    assert settings.serving is not None and settings.serving.inference_service == "taxi"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"runtime_version": "2.6.2"},
            "serving.runtime_version: TF Serving 2.6.2 is older than TensorFlow 2.16",
        ),
        ({"runtime_version": "2.16.0"}, "tensorflow/serving has no release '2.16.0'"),
        ({"runtime_version": "2.17.0-gpu"}, "name the release alone"),
        ({"kserve_version": 0.17}, "serving.kserve_version: write it quoted"),
        ({"kserve_version": "0.14"}, "serving.kserve_version: '0.14': name the cluster's"),
        ({"runtime": "TF Serving"}, "serving.runtime: 'TF Serving' is not a ClusterServingRuntime"),
    ],
    ids=["older_than_tf", "no_such_release", "gpu_suffix", "unquoted", "too_old", "bad_runtime"],
)
def test_a_runtime_or_kserve_release_that_cannot_serve_the_model_is_refused(changes, message):
    with pytest.raises(SettingsError) as raised:
        parse_serving({**SERVING, **changes}, "gs://b/serving")
    assert message in str(raised.value)


def test_a_newer_tf_serving_and_kserve_are_taken():
    config = serving_config(runtime_version="2.20.0", kserve_version="0.17")
    assert (config["runtime_version"], config["kserve_version"]) == ("2.20.0", "0.17")
    assert config["runtime"] == "kserve-tensorflow-serving"
    assert serving_config()["runtime_version"] is None  # read from the SavedModel


# --- the TF Serving that loads the model ---------------------------------------------------


def test_the_runtime_version_is_the_exporting_tensorflows_line(small_model_base):
    exported = runtime.exported_by(str(small_model_base / "1"))
    assert exported == tf.__version__  # the TensorFlow that wrote it, from saved_model.pb
    assert runtime.runtime_version(None, "2.16.2", gpu=False) == "2.16.1"  # no 2.16.0 exists
    assert runtime.runtime_version(None, "2.17.1", gpu=True) == "2.17.1-gpu"
    assert runtime.runtime_version("2.19.1", "2.16.2", gpu=False) == "2.19.1"
    with pytest.raises(runtime.RuntimeVersionError, match=r"serving.runtime_version: TF Serving"):
        runtime.runtime_version("2.15.1", "2.16.2", gpu=False)
    with pytest.raises(runtime.RuntimeVersionError, match="no TF Serving release is known"):
        runtime.runtime_version(None, "2.31.0", gpu=False)


# --- the InferenceService, against KServe's own models ----------------------------------

SERVED = manifest.ServedModel("gs://b/serving-kserve/17", "17", "2.16.1-gpu")
ROLLED_OUT = manifest.ServedModel("gs://b/serving-kserve/16", "16", "2.16.1-gpu")


def rendered_services() -> list[dict]:
    config = serving_config(
        predictor={
            "resources": {"cpu_request": "2", "memory_request": "4Gi", "gpu": 1},
            "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        }
    )
    created = manifest.inference_service(config, NAMESPACE, SERVED)
    patched = json.loads(json.dumps(created))
    patch = manifest.model_patch(config, SERVED, ROLLED_OUT, canary_percent=0, mode="Knative")
    patched["metadata"]["annotations"].update(patch["metadata"]["annotations"])
    patched["spec"]["predictor"].update(patch["spec"]["predictor"])
    return [created, patched]


@pytest.mark.slow
def test_the_inference_service_is_one_kserves_models_take_unchanged(tmp_path):
    files = []
    for i, service in enumerate(rendered_services()):
        path = tmp_path / f"isvc-{i}.json"
        path.write_text(json.dumps(service))
        files.append(str(path))
    proc = run_in_standin_harness("check_inferenceservice.py", *files, timeout=300)
    results = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    assert [r["differences"] for r in results] == [[], []], proc.stderr[-2000:]
    assert proc.returncode == 0


@pytest.mark.slow
def test_a_field_kserve_does_not_have_is_caught(tmp_path):
    service = rendered_services()[0]
    service["spec"]["predictor"]["model"]["storageURI"] = "gs://typo"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(service))
    proc = run_in_standin_harness("check_inferenceservice.py", str(path), timeout=300)
    assert proc.returncode == 1
    assert "spec.predictor.model.storageURI: not a field" in proc.stdout


def test_the_predictor_pins_tf_serving_on_the_versions_own_base_path():
    created, patched = rendered_services()
    predictor = created["spec"]["predictor"]
    assert predictor["model"] == {
        "name": "kserve-container",
        "modelFormat": {"name": "tensorflow"},
        "runtime": "kserve-tensorflow-serving",
        "runtimeVersion": "2.16.1-gpu",
        "storageUri": "gs://b/serving-kserve/17",
        # A request alone would keep the runtime's limits (cpu 1, memory 2Gi) under it.
        "resources": {
            "limits": {"nvidia.com/gpu": "1", "cpu": "2", "memory": "4Gi"},
            "requests": {"cpu": "2", "memory": "4Gi"},
        },
    }
    assert predictor["serviceAccountName"] == "kserve-models"
    assert "canaryTrafficPercent" not in predictor  # nothing to split with yet
    annotations = created["metadata"]["annotations"]
    assert annotations[manifest.TAG_ROUTING_ANNOTATION] == "true"
    assert annotations[manifest.DEPLOYMENT_MODE_ANNOTATION] == "Serverless"  # 0.15's name
    assert annotations[manifest.MANAGED_ANNOTATION] == manifest.MANAGED_BY
    assert patched["spec"]["predictor"]["canaryTrafficPercent"] == 0
    assert manifest.recorded_rolled_out(patched) == ROLLED_OUT
    newer = manifest.inference_service(serving_config(kserve_version="0.16"), NAMESPACE, SERVED)
    assert newer["metadata"]["annotations"][manifest.DEPLOYMENT_MODE_ANNOTATION] == "Knative"


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
    standin.kserve.add_object(NAMESPACE, "secrets", s3_secret())
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


class Killed(BaseException):
    """The Deploy step's pod, killed (not an error the step could handle)."""


def kill_at(prefix: str):
    def log(message: str) -> None:
        if message.startswith(prefix):
            raise Killed(message)

    return log


def rollout(cluster, served, smoke_rows, root: Path, version: str, **changes) -> Rollout:
    _, api = cluster
    log = changes.pop("log", lambda _: None)
    runtime_version = changes.pop("runtime_version", "2.16.1")
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
        runtime_version=runtime_version,
        log=log,
        poll_seconds=0.05,
    )


def patches(applied: list, since: int) -> list[dict]:
    return [body for verb, body in applied[since:] if verb == "patch"]


def uri_of(body: dict) -> str | None:
    return body.get("spec", {}).get("predictor", {}).get("model", {}).get("storageUri")


@pytest.fixture(scope="module")
def rollouts(cluster, served, smoke_rows, tmp_path_factory):
    """On one InferenceService: 100 is created; 200 goes through 0%, the smoke request, the
    canary and promotion; 300's revision crashes; 400 answers wrongly; 500 is left as a
    manual canary and 600 then fails; a KServe upgrade re-renders everything and 700 is
    promoted. Each failure rolls back to 200, the version rolled out."""
    standin, _ = cluster
    root = tmp_path_factory.mktemp("rollouts")
    kserve = standin.kserve
    go = functools.partial(rollout, cluster, served, smoke_rows, root)
    record = rolled_out_record(str(root / "kserve"))
    # What a batch scoring run on Kubeflow would score after each step, and the newest push.
    scored: dict = {}

    def score(after: str) -> None:
        scored[after] = (
            choose_version(str(root / "serving"), None, record).version,
            choose_version(str(root / "serving")).version,
        )

    results: dict = {"root": root, "scored": scored}
    results["created"] = go("100").run()
    score("created")
    results["promoted"] = go("200").run()
    score("promoted")
    results["after_promotion"] = kserve.service(NAMESPACE, "taxi")
    kserve.fail_next_revision("RevisionFailed", "Back-off pulling image")
    for version, key in (("300", "failed"), ("400", "wrong")):
        kserve.answer_wrongly(key == "wrong")
        with pytest.raises(DeployError) as raised:
            go(version).run()
        results[key] = raised.value
        results[f"after_{key}"] = kserve.service(NAMESPACE, "taxi")
        results[f"serving_after_{key}"] = kserve.serving_storage_uri(NAMESPACE, "taxi")
        score(key)
    kserve.answer_wrongly(False)
    results["manual"] = go("500", promotion="manual").run()
    results["serving_after_manual"] = kserve.service(NAMESPACE, "taxi")
    score("manual")
    kserve.answer_wrongly(True)
    with pytest.raises(DeployError) as raised:
        go("600").run()
    kserve.answer_wrongly(False)
    results["after_manual_failed"] = raised.value
    results["serving_after_manual_failed"] = kserve.serving_storage_uri(NAMESPACE, "taxi")
    score("manual_failed")
    kserve.rerender()
    results["rerendered"] = kserve.service(NAMESPACE, "taxi")
    results["after_rerender"] = go("700").run()
    score("rerendered")
    results["applied"] = list(kserve.applied)
    results["requests"] = list(kserve.predict_requests)
    return results


def test_a_first_version_creates_the_service_and_takes_all_traffic(rollouts):
    created = rollouts["created"]
    assert created.outcome == "created" and created.version == "100"
    verb, body = rollouts["applied"][0]
    assert verb == "create" and uri_of(body) == str(rollouts["root"] / "kserve" / "100")
    assert [t["percent"] for t in created.traffic] == [100]
    # TF Serving's layout: the base path holds the version as a numbered directory.
    assert (rollouts["root"] / "kserve" / "100" / "100" / "saved_model.pb").exists()


def test_the_smoke_request_goes_to_the_new_revisions_tag_url(rollouts, smoke_rows):
    first = rollouts["requests"][0]
    assert (first["revision"], first["tag"]) == ("taxi-predictor-00001", "latest")
    assert first["body"]["signature_name"] == JSON_SIGNATURE
    assert len(first["body"]["instances"]) == len(smoke_rows[0])
    assert all(r["tag"] == "latest" for r in rollouts["requests"])  # never the service's URL


def test_a_later_version_takes_no_traffic_before_its_smoke_request_passes(rollouts):
    assert rollouts["promoted"].outcome == "promoted"
    model, canary, promotion = patches(rollouts["applied"], 1)[:3]
    assert model["spec"]["predictor"]["canaryTrafficPercent"] == 0
    assert uri_of(model).endswith("/kserve/200")
    assert model["metadata"]["annotations"][manifest.ROLLED_OUT_URI_ANNOTATION].endswith(
        "/kserve/100"
    )
    assert canary == {"spec": {"predictor": {"canaryTrafficPercent": 10}}}
    assert promotion == {"spec": {"predictor": {"canaryTrafficPercent": None}}}
    # Its smoke request reached revision 2 itself, while it had none of the traffic.
    smoke_request = rollouts["requests"][1]
    assert (smoke_request["revision"], smoke_request["percent"]) == ("taxi-predictor-00002", 0)
    status = manifest.PredictorStatus.of(rollouts["after_promotion"])
    assert status.rolled_out == "taxi-predictor-00002"
    assert status.percent_of("taxi-predictor-00002") == 100


def test_a_failing_revision_is_rolled_back_with_knatives_message(rollouts):
    error = rollouts["failed"]
    message = str(error)
    assert message.startswith("version 300 rolled back: revision taxi-predictor-00004 failed: ")
    assert (
        'PredictorConfigurationReady=False (RevisionFailed): Revision "taxi-predictor-00004" '
        "failed with message: Back-off pulling image." in message
    )
    assert message.endswith("/kserve/200 (version 200) serves all traffic again")
    assert error.rejects
    assert rollouts["serving_after_failed"].endswith("/kserve/200")  # what served, serves


def test_a_revision_that_answers_wrongly_never_takes_traffic(rollouts):
    message = str(rollouts["wrong"])
    assert "answered the smoke request (8 eval rows) differently from the pushed model" in message
    wrong = [r for r in rollouts["requests"] if r["storage_uri"].endswith("/kserve/400")]
    assert [r["percent"] for r in wrong] == [0]
    after = rollouts["after_wrong"]
    assert manifest.storage_uri(after).endswith("/kserve/200")
    assert "canaryTrafficPercent" not in after["spec"]["predictor"]
    # The rollback restores the rolled-out version's own annotation on its pods.
    assert after["spec"]["predictor"]["annotations"][manifest.VERSION_ANNOTATION] == "200"
    assert rollouts["serving_after_wrong"].endswith("/kserve/200")


def test_another_versions_failure_never_promotes_an_unpromoted_canary(rollouts):
    assert rollouts["manual"].outcome == "canary"
    status = manifest.PredictorStatus.of(rollouts["serving_after_manual"])
    assert sorted(t.percent for t in status.traffic) == [10, 90]
    assert "version 600 rolled back" in str(rollouts["after_manual_failed"])
    # Back to what was rolled out (200), not to the canary the spec held (500).
    assert "/kserve/200 (version 200) serves all traffic again" in str(
        rollouts["after_manual_failed"]
    )
    assert rollouts["serving_after_manual_failed"].endswith("/kserve/200")


def test_the_scorer_on_kubeflow_scores_the_version_the_rollout_rolled_out(rollouts):
    """Not the newest push: a canary not promoted, and versions rolled back, never score."""
    assert rollouts["scored"] == {
        "created": ("100", "100"),
        "promoted": ("200", "200"),
        "failed": ("200", "300"),
        "wrong": ("200", "400"),
        "manual": ("200", "500"),  # the canary takes 10%; 200 is still what rolled out
        "manual_failed": ("200", "600"),
        "rerendered": ("700", "700"),
    }


def test_readiness_survives_a_kserve_upgrade_that_re_renders_the_knative_service(rollouts):
    rerendered = rollouts["rerendered"]
    # The two counters never meet again; the rollout reads conditions and revision names.
    assert rerendered["status"]["observedGeneration"] != rerendered["metadata"]["generation"]
    assert rollouts["after_rerender"].outcome == "promoted"


def test_the_same_version_again_changes_nothing(cluster, served, smoke_rows, rollouts):
    again = rollout(cluster, served, smoke_rows, rollouts["root"], "700").run()
    assert again.outcome == "already_serving"


def test_a_runtime_older_than_the_export_fails_to_load_and_is_never_served(
    cluster, served, smoke_rows, tmp_path
):
    """What a predictor without runtimeVersion gets: KServe's default tensorflow/serving:2.6.2."""
    standin, _ = cluster
    old = rollout(
        cluster, served, smoke_rows, tmp_path, "800", inference_service="old", runtime_version=None
    )
    with pytest.raises(DeployError) as raised:
        old.run()
    assert "Op type not registered 'DisableCopyOnRead'" in str(raised.value)
    assert "tensorflow/serving:2.6.2" in str(raised.value)
    assert standin.kserve.service(NAMESPACE, "old") is None  # nothing served before: deleted


def test_a_version_tf_serving_finds_no_version_of_is_a_timeout_that_says_what_it_saw(
    cluster, served, smoke_rows, tmp_path
):
    standin, _ = cluster
    broken = rollout(
        cluster, served, smoke_rows, tmp_path, "900", inference_service="direct", ready_timeout="2s"
    )
    broken.storage_uri = pushed_version(served, tmp_path, "900")  # no numbered directory in it
    with pytest.raises(DeployError) as raised:
        broken.run()
    message = str(raised.value)
    assert message.startswith(
        "timed out after 2s waiting for a new revision to be Ready and routed"
    )
    assert "latestCreatedRevision=direct-predictor-00001, latestReadyRevision=None" in message
    assert "PredictorConfigurationReady=Unknown" in message
    assert "only at its progress deadline" in message
    assert standin.kserve.service(NAMESPACE, "direct") is None


def test_at_knatives_progress_deadline_the_revision_fails_with_its_reason(
    cluster, served, smoke_rows, tmp_path, monkeypatch
):
    standin, _ = cluster
    monkeypatch.setattr(standin.kserve, "progress_deadline_s", 1.0)
    broken = rollout(cluster, served, smoke_rows, tmp_path, "901", inference_service="deadline")
    broken.storage_uri = pushed_version(served, tmp_path, "901")
    with pytest.raises(DeployError, match="Initial scale was never achieved"):
        broken.run()


def test_a_first_version_that_answers_wrongly_leaves_no_service(
    cluster, served, smoke_rows, tmp_path
):
    standin, _ = cluster
    standin.kserve.answer_wrongly()
    try:
        with pytest.raises(DeployError, match=r"differently from the pushed model.*deleted"):
            rollout(cluster, served, smoke_rows, tmp_path, "600", inference_service="fresh").run()
    finally:
        standin.kserve.answer_wrongly(False)
    assert standin.kserve.service(NAMESPACE, "fresh") is None
    # Nothing serves, so nothing is recorded as rolled out (a stale record is removed).
    assert rolled_out_version(rolled_out_record(str(tmp_path / "kserve"))) is None


# --- a Deploy step cut short, and run again -------------------------------------------------


@dataclass
class OwnService:
    """An InferenceService of the test's own, and a rollout of a version onto it."""

    name: str
    go: Callable[..., Rollout]


@pytest.fixture()
def serving_one(cluster, served, smoke_rows, tmp_path, request):
    name = "cut-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8]
    go = functools.partial(rollout, cluster, served, smoke_rows, tmp_path, inference_service=name)
    assert go("1").run().outcome == "created"
    return OwnService(name, go)


def test_a_step_killed_after_its_smoke_request_leaves_the_canary_and_a_rerun_promotes(
    cluster, serving_one
):
    standin, _ = cluster
    with pytest.raises(Killed):
        serving_one.go("2", log=kill_at("Promoting")).run()
    # Where it stopped: version 2 at its canary share, version 1 keeps the rest.
    status = manifest.PredictorStatus.of(standin.kserve.service(NAMESPACE, serving_one.name))
    assert sorted(t.percent for t in status.traffic) == [10, 90]
    again = serving_one.go("2").run()
    assert again.outcome == "promoted"
    assert standin.kserve.serving_storage_uri(NAMESPACE, serving_one.name).endswith("/kserve/2")


def test_a_step_killed_mid_rollout_then_a_failing_version_returns_to_the_rolled_out_one(
    cluster, serving_one
):
    standin, _ = cluster
    with pytest.raises(Killed):
        serving_one.go("2", log=kill_at("Giving revision")).run()  # smoke passed, still at 0%
    standin.kserve.fail_next_revision("RevisionFailed", "OOMKilled")
    with pytest.raises(DeployError) as raised:
        serving_one.go("3").run()
    assert "/kserve/1 (version 1) serves all traffic again" in str(raised.value)
    assert standin.kserve.serving_storage_uri(NAMESPACE, serving_one.name).endswith("/kserve/1")


def promoted_late(standin, serving_one: OwnService, version: str) -> DeployError:
    """Version `version`'s rollout, its routes held once it is given the traffic: the
    Deploy step's error. The timeout is long enough for the new revision to start first on
    a loaded machine (its TF Serving stand-in loads the model), so that the wait that runs
    out is the promotion's."""

    def hold(message: str) -> None:
        if message.startswith("Giving revision"):
            standin.kserve.hold_routes()

    try:
        with pytest.raises(DeployError) as raised:
            serving_one.go(version, log=hold, ready_timeout="10s").run()
    finally:
        standin.kserve.hold_routes(False)
    return raised.value


def test_a_promotion_that_runs_late_fails_the_step_but_does_not_reject_the_version(
    cluster, serving_one
):
    standin, _ = cluster
    error = promoted_late(standin, serving_one, "2")
    assert str(error).startswith(
        f"timed out after 10s waiting for revision {serving_one.name}-predictor"
    )
    assert not error.rejects


def test_a_version_whose_promotion_ran_late_is_handed_to_the_next_run_s_deploy(
    cluster, serving_one, served, tmp_path
):
    """The served model is what the rollout's record names (components/serving/served_version.py),
    end to end on the stand-in: a late promotion leaves version 2 pushed and not rejected,
    and the record still naming 1. The next run trains the same model: its Pusher hands
    version 2 to the Deploy step (the newest complete version would have made it "already
    served", and nothing would have deployed it), and the Deploy step promotes it."""
    standin, _ = cluster
    serving = tmp_path / "serving"
    # Version 2: another model than 1 (one more asset), so that "the same model" means 2.
    shutil.copytree(served["base"] / "1", serving / "2")
    (serving / "2" / "assets" / "retrained.txt").parent.mkdir(exist_ok=True)
    (serving / "2" / "assets" / "retrained.txt").write_text("version 2")
    assert not promoted_late(standin, serving_one, "2").rejects
    record = rolled_out_record(str(tmp_path / "kserve"))
    assert served_version(str(serving), record) == "1"
    assert served_version(str(serving)) == "2"  # TF Serving's rule would say 2
    candidate = tmp_path / "rerun" / "model"
    shutil.copytree(serving / "2", candidate / "Format-Serving")
    pushed = StepArtifact(uri=str(tmp_path / "rerun" / "pushed_model"))
    push_model(
        json.dumps({"filesystem": {"base_directory": str(serving)}}),
        model=StepArtifact(uri=str(candidate)),
        pushed_model=pushed,
        model_blessing=StepArtifact(uri="blessing", metadata={"blessed": 1}),
        rolled_out_record=record,
    )
    assert pushed.metadata["pushed"] == 1 and pushed.metadata["pushed_version"] == "2"
    assert sorted(p.name for p in serving.iterdir()) == ["1", "2"]  # no second copy
    assert serving_one.go("2").run().outcome == "promoted"
    assert served_version(str(serving), record) == "2"


# --- KServe's rollback of the rolled-out revision (previousRolledoutRevision) ---------------


@pytest.fixture()
def serving_two(cluster, served, smoke_rows, tmp_path, request):
    """Version 1 someone else created, replaced by version 2 with all the traffic at once:
    KServe's previousRolledoutRevision is version 1's revision."""
    standin, api = cluster
    name = "two-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8]
    go = functools.partial(rollout, cluster, served, smoke_rows, tmp_path, inference_service=name)
    standin.kserve.seed(NAMESPACE, name, go("1").storage_uri)
    two = go("2")
    api.patch_service(NAMESPACE, name, manifest.model_patch(two.config, two.candidate, None, None))
    wait_for(
        lambda: manifest.PredictorStatus.of(standin.kserve.service(NAMESPACE, name)),
        lambda s: (
            s.settled()
            and s.rolled_out == f"{name}-predictor-00002"
            and s.is_true(manifest.ROUTE_READY)
        ),
    )
    return OwnService(name, go)


def wait_for(read: Callable[[], T], done: Callable[[T], bool], seconds: float = 10.0) -> T:
    deadline = time.monotonic() + seconds
    while not done(found := read()):
        assert time.monotonic() < deadline, found
        time.sleep(0.05)
    return found


def test_a_canary_on_an_unchanged_template_rolls_back_to_the_previous_rolled_out_revision(
    cluster, serving_two
):
    """KServe's own rollback (PropagateStatus' second branch): canaryTrafficPercent alone."""
    standin, api = cluster
    name = serving_two.name
    api.patch_service(NAMESPACE, name, manifest.traffic_patch(0))
    wait_for(
        lambda: standin.kserve.serving_storage_uri(NAMESPACE, name),
        lambda uri: uri.endswith("/kserve/1"),
    )
    predictor = standin.kserve.service(NAMESPACE, name)["status"]["components"]["predictor"]
    first, second = f"{name}-predictor-00001", f"{name}-predictor-00002"
    assert predictor["previousRolledoutRevision"] == predictor["latestRolledoutRevision"] == first
    assert [(t["revisionName"], t["percent"], t["tag"]) for t in predictor["traffic"]] == [
        (second, 0, "latest"),
        (first, 100, "prev"),
    ]
    assert list(predictor)[:4] == [
        "latestReadyRevision", "latestCreatedRevision", "previousRolledoutRevision",
        "latestRolledoutRevision",
    ]  # fmt: skip


@pytest.mark.parametrize("route_first", [False, True], ids=["configuration_first", "route_first"])
def test_a_model_and_canary_patched_together_fall_back_only_when_the_route_reports_first(
    cluster, serving_two, route_first
):
    """What the rollout patched before it pinned the fallback: version 3 with 0% at once."""
    standin, api = cluster
    name = serving_two.name
    three = serving_two.go("3")
    two = manifest.spec_model(standin.kserve.service(NAMESPACE, name))
    standin.kserve.report_route_first(route_first)
    try:
        api.patch_service(
            NAMESPACE, name, manifest.model_patch(three.config, three.candidate, two, 0)
        )
        wait_for(
            lambda: standin.kserve.service(NAMESPACE, name),
            lambda s: manifest.PredictorStatus.of(s).routed(f"{name}-predictor-00003") is not None,
        )
    finally:
        standin.kserve.report_route_first(False)
    history = standin.kserve.ingress_history(NAMESPACE, name)
    served = [uri.rsplit("/", 1)[-1] for uri, _ in history[-1]]
    assert served == (["1"] if route_first else ["2"])


def test_a_rollout_never_sends_traffic_to_an_older_version_when_the_route_reports_first(
    cluster, serving_two
):
    standin, _ = cluster
    name = serving_two.name
    before = len(standin.kserve.ingress_history(NAMESPACE, name))
    applied = len(standin.kserve.applied)
    standin.kserve.report_route_first()
    try:
        outcome = serving_two.go("3").run()
    finally:
        standin.kserve.report_route_first(False)
    assert outcome.outcome == "promoted"
    # Every split the service's URL served, from before the rollout to its promotion.
    history = standin.kserve.ingress_history(NAMESPACE, name)[before:]
    versions = {uri.rsplit("/", 1)[-1] for split in history for uri, _ in split}
    assert versions == {"2", "3"}, history
    assert standin.kserve.serving_storage_uri(NAMESPACE, name).endswith("/kserve/3")
    # How: version 2 again with all the traffic first, so KServe's fallback serves version 2.
    pin, model = patches(standin.kserve.applied, applied)[:2]
    assert (uri_of(pin).rsplit("/", 1)[-1], uri_of(model).rsplit("/", 1)[-1]) == ("2", "3")
    assert pin["spec"]["predictor"]["canaryTrafficPercent"] is None
    assert model["spec"]["predictor"]["canaryTrafficPercent"] == 0


def test_a_fallback_pin_that_does_not_finish_fails_the_step_without_rejecting_the_version(
    cluster, serving_two
):
    standin, _ = cluster
    standin.kserve.hold_routes()
    try:
        with pytest.raises(DeployError) as raised:
            serving_two.go("3", ready_timeout="1s").run()
    finally:
        standin.kserve.hold_routes(False)
    assert str(raised.value).startswith(
        "version 3 was not tried: rolling version 2 out again before its canary did not finish"
    )
    assert not raised.value.rejects
    assert standin.kserve.serving_storage_uri(NAMESPACE, serving_two.name).endswith("/kserve/2")


# --- deployment modes ----------------------------------------------------------------------


def test_an_inference_service_in_standard_mode_is_refused_before_anything_is_applied(
    cluster, served, smoke_rows, tmp_path, monkeypatch
):
    standin, _ = cluster
    monkeypatch.setattr(standin.kserve, "default_mode", "RawDeployment")
    standin.kserve.seed(NAMESPACE, "raw", "/nowhere")
    applied = len(standin.kserve.applied)
    with pytest.raises(DeployError, match=r"runs in Standard .* mode: it has no revisions"):
        rollout(cluster, served, smoke_rows, tmp_path, "1", inference_service="raw").run()
    assert len(standin.kserve.applied) == applied
    # A new one is created Serverless whatever the cluster's default.
    created = rollout(cluster, served, smoke_rows, tmp_path, "1", inference_service="pinned")
    assert created.run().outcome == "created"


def test_kserve_0_16s_webhook_takes_every_patch_of_a_service_created_serverless(
    cluster, served, smoke_rows, tmp_path, monkeypatch
):
    standin, _ = cluster
    monkeypatch.setattr(standin.kserve, "kserve", (0, 16))
    go = functools.partial(rollout, cluster, served, smoke_rows, tmp_path, inference_service="k16")
    assert go("1").run().outcome == "created"  # annotated Serverless: kserve_version 0.15
    service = standin.kserve.service(NAMESPACE, "k16")
    assert service["status"]["deploymentMode"] == "Knative"
    assert go("2").run().outcome == "promoted"  # the patch writes the status' name back


# The mode annotation each release takes (tests/kserve_standin.py rule 7 cites the source):
# (release, annotation) -> the status' mode, and whether a later update that leaves the
# annotation as written is taken.
MODE_RULES = {
    ("0.15.0", "Serverless"): (None, True),  # no status.deploymentMode, no check yet
    ("0.15.2", "Serverless"): ("Serverless", True),
    ("0.15.2", "Knative"): ("Serverless", False),  # unknown: the default, then refused
    ("0.16.0", "Serverless"): ("Knative", False),  # compared as written
    ("0.16.0", "Knative"): ("Knative", True),
    ("0.18.0", "Serverless"): ("Knative", True),  # the defaulter rewrites it
    ("0.18.0", "Knative"): ("Knative", True),
}


def _isvc_calls(release: str):
    """Create and update calls straight to a KServe controller of `release`."""
    from tests.kserve_standin import KServeController

    controller = KServeController("http://kserve.invalid", kserve_version=release)
    path = f"/apis/serving.kserve.io/v1beta1/namespaces/{NAMESPACE}/inferenceservices"

    def call(method: str, body: dict, name: str = "") -> tuple[int, dict]:
        return controller.handle(method, f"{path}/{name}" if name else path, json.dumps(body))

    return call


@pytest.mark.parametrize(("release", "annotation"), sorted(MODE_RULES))
def test_each_kserve_release_takes_the_mode_annotations_its_source_takes(release, annotation):
    status_mode, updates = MODE_RULES[(release, annotation)]
    call = _isvc_calls(release)
    body = manifest.inference_service(serving_config(), NAMESPACE, SERVED)
    body["metadata"]["annotations"][manifest.DEPLOYMENT_MODE_ANNOTATION] = annotation
    code, created = call("POST", body)
    assert code == 201
    assert created["status"].get("deploymentMode") == status_mode
    code, answer = call("PATCH", manifest.traffic_patch(0), body["metadata"]["name"])
    if updates:
        assert code == 200, answer
    else:
        assert code == 400
        assert answer["message"].endswith(
            f"update rejected: deploymentMode cannot be changed from '{status_mode}' to "
            f"'{annotation}'"
        )


@pytest.mark.parametrize(
    ("release", "kserve_version"),
    [("0.15.2", "0.15"), ("0.16.0", "0.16"), ("0.18.0", "0.18"), ("0.18.0", "0.15")],
)
def test_the_manifest_writes_the_mode_its_kserve_release_takes_at_every_update(
    release, kserve_version
):
    """Kubeflow v1.11.0, 26.03 and 26.03.1 install KServe 0.15.2, 0.16.0 and 0.18.0."""
    call = _isvc_calls(release)
    config = serving_config(kserve_version=kserve_version)
    code, created = call("POST", manifest.inference_service(config, NAMESPACE, SERVED))
    assert code == 201
    mode = created["status"]["deploymentMode"]
    assert mode in manifest.SERVERLESS_MODES
    name = config["inference_service"]
    assert call("PATCH", manifest.traffic_patch(0), name)[0] == 200
    patch = manifest.model_patch(config, SERVED, SERVED, canary_percent=10, mode=mode)
    assert call("PATCH", patch, name)[0] == 200
    assert call("PATCH", manifest.traffic_patch(None), name)[0] == 200


def test_a_0_15_annotation_on_kserve_0_16_is_taken_once_the_model_patch_writes_the_status_back():
    call = _isvc_calls("0.16.0")
    config = serving_config(kserve_version="0.15")
    code, created = call("POST", manifest.inference_service(config, NAMESPACE, SERVED))
    assert (code, created["status"]["deploymentMode"]) == (201, "Knative")
    name = config["inference_service"]
    assert call("PATCH", manifest.traffic_patch(0), name)[0] == 400
    patch = manifest.model_patch(config, SERVED, SERVED, canary_percent=0, mode="Knative")
    assert call("PATCH", patch, name)[0] == 200
    assert call("PATCH", manifest.traffic_patch(0), name)[0] == 200


# --- credentials ------------------------------------------------------------------------------


def credential_check(api, storage_uri="s3://models/kserve/1", **changes) -> Rollout:
    return Rollout(
        cluster=api,
        config=serving_config(**changes),
        namespace=NAMESPACE,
        version="1",
        storage_uri=storage_uri,
        instances=[],
        expected=np.zeros(0),
    )


def s3_secret(name="s3-creds", annotations=None, **data) -> dict:
    keys = {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", **data}
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in keys.items() if v is not None}
    return {"metadata": {"name": name, "annotations": annotations or {}}, "data": encoded}


@pytest.mark.parametrize(
    ("secret", "kserve_version", "message"),
    [
        (
            s3_secret(annotations={"serving.kserve.io/s3-endpoint": "http://minio:9000"}),
            "0.16",
            "annotation serving.kserve.io/s3-endpoint is 'http://minio:9000'; KServe before 0.17",
        ),
        (
            s3_secret(AWS_ACCESS_KEY_ID=None),
            "0.15",
            "has AWS_SECRET_ACCESS_KEY but no AWS_ACCESS_KEY_ID",
        ),
        (
            {"metadata": {"name": "s3-creds"}, "data": {"accesskey": "YQ=="}},
            "0.15",
            "none of its secrets has AWS_SECRET_ACCESS_KEY and it has no eks.amazonaws.com",
        ),
        (
            s3_secret(S3_ENDPOINT="minio:9000"),
            "0.15",
            "data S3_ENDPOINT is read from KServe 0.16 on",
        ),
        (
            s3_secret(annotations={"serving.kserve.io/s3-usehttps": "false"}),
            "0.17",
            "KServe takes '0' as http and anything else as https",
        ),
    ],
    ids=["scheme_before_0_17", "no_access_key", "no_s3_secret", "data_before_0_16", "usehttps"],
)
def test_s3_credentials_kserve_cannot_use_are_refused_before_anything_is_applied(
    cluster, secret, kserve_version, message
):
    standin, api = cluster
    standin.kserve.add_object(NAMESPACE, "secrets", secret)
    applied = len(standin.kserve.applied)
    with pytest.raises(DeployError) as raised:
        credential_check(api, kserve_version=kserve_version).check_credentials()
    assert f"serving.service_account {NAMESPACE}/kserve-models cannot read" in str(raised.value)
    assert message in str(raised.value)
    assert len(standin.kserve.applied) == applied


@pytest.mark.parametrize(
    ("secret", "kserve_version", "older"),
    [
        (s3_secret(), "0.15", None),  # AWS's own endpoint, or inferenceservice-config's
        (
            s3_secret(annotations={"serving.kserve.io/s3-endpoint": "http://minio:9000"}),
            "0.17",
            "0.16",
        ),
        (s3_secret(S3_ENDPOINT="seaweedfs.kubeflow:8333", S3_USE_HTTPS="0"), "0.16", "0.15"),
    ],
    ids=["no_endpoint", "scheme_from_0_17", "endpoint_in_data_from_0_16"],
)
def test_s3_credentials_kserve_reads_are_taken(cluster, secret, kserve_version, older):
    standin, api = cluster
    standin.kserve.add_object(NAMESPACE, "secrets", secret)
    used = credential_check(api, kserve_version=kserve_version).check_credentials()
    assert used == f"service account {NAMESPACE}/kserve-models: secret {NAMESPACE}/s3-creds"
    if older:  # the release before cannot read it
        with pytest.raises(DeployError, match="cannot read"):
            credential_check(api, kserve_version=older).check_credentials()


def test_irsa_needs_no_secret_and_a_missing_listed_secret_is_named(cluster):
    standin, api = cluster
    standin.kserve.add_object(
        NAMESPACE,
        "serviceaccounts",
        {
            "metadata": {
                "name": "irsa",
                "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/models"},
            }
        },
    )
    used = credential_check(api, service_account="irsa").check_credentials()
    assert used == f"service account {NAMESPACE}/irsa: the IAM role of eks.amazonaws.com/role-arn"
    standin.kserve.add_object(
        NAMESPACE,
        "serviceaccounts",
        {"metadata": {"name": "listed"}, "secrets": [{"name": "gone"}]},
    )
    with pytest.raises(DeployError, match=f"secret {NAMESPACE}/gone is listed but does not exist"):
        credential_check(api, service_account="listed").check_credentials()


def test_a_missing_service_account_is_named(cluster):
    _, api = cluster
    with pytest.raises(DeployError, match=f"service account {NAMESPACE}/nobody does not exist"):
        credential_check(api, "s3://m/1", service_account="nobody").check_credentials()


def test_smoke_disagreement_names_the_row():
    expected = np.array([[0.2], [0.7]])
    assert smoke.disagreement(expected, expected + 1e-6, 1e-4) is None
    problem = smoke.disagreement(expected, np.array([[0.2], [0.3]]), 1e-4)
    assert problem.startswith("row 1: answered [0.3], the pushed model scores [0.7]")
    assert "tensorflow" not in problem and tf is not None


def test_the_compiled_deploy_step_runs_after_the_pusher_every_time_and_never_retries():
    from kubeflow import compile as kfp_compile
    from kubeflow import package_settings
    from kubeflow import pipeline_steps as kubeflow_steps
    from kubeflow.package_settings import pipeline_step_ids
    from kubeflow.tfx_spec import all_tasks
    from pipeline import steps as dag

    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    raw["serving"] = dict(SERVING)
    settings = parse_settings(
        raw, pipeline_step_ids(), set(dag.DAG_STEPS.beam_ids),
        package_settings.pipeline_retry_roles(),
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
    # With KServe, every step that reads the served model reads the rollout's record
    # (components/serving/served_version.py); without `serving:`, none is handed one.
    record = rolled_out_record(settings.serving.storage_root)
    for step in (dag.BASELINE, dag.DRIFT_GATE, dag.PUSHER):
        parameter = tasks[step]["inputs"]["parameters"]["rolled_out_record"]
        assert parameter["runtimeValue"]["constant"] == record, step
    plain_settings = parse_settings(
        yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text()), pipeline_step_ids(),
        set(dag.DAG_STEPS.beam_ids), package_settings.pipeline_retry_roles(),
    )  # fmt: skip
    plain, _ = kfp_compile.compile_pipeline(plain_settings)
    plain_tasks = all_tasks(plain)
    for step in (dag.BASELINE, dag.DRIFT_GATE):
        parameter = plain_tasks[step]["inputs"]["parameters"]["rolled_out_record"]
        assert parameter["runtimeValue"]["constant"] == "", step
    assert "rolled_out_record" not in plain_tasks[dag.PUSHER]["inputs"].get("parameters", {})
