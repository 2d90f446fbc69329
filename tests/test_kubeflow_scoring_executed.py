"""The batch scoring package, executed step by step as KFP's backend would, on the S3 stand-in.

`kubeflow/standin_harness/run_compiled.py` runs the package compiled by
`python -m kubeflow.compile --scoring` (docs/batch-scoring.md), each step with
only the environment its pod would get and the store's secret, as
tests/test_kubeflow_cluster_services.py runs the training package. The served
model (the session's small one, not trained here), the new data and the
scores are in the bucket; the pipeline root stays on this machine, where the
executor's fault sees a step's first output file (kubeflow/standin_harness/faults.py
watches local paths).

One execution, shared by the tests: the scorer's first attempt is preempted once
it has written its output artifact, after it committed the partition, and KFP
retries it on the same output URIs. A killed attempt of an earlier run lies
under `_temporary/` before the execution starts; the commit removes it. The
ScoringReport exit handler writes the run's report.

The settings have `serving:`. Versions 1 and 2 are two models (conftest's small
one and the same trained from another seed: other weights, other scores), and
the record of what is rolled out is the Deploy step's own: its rollout
(kubeflow/steps/deploy/executor.py, the function the step's pod runs) runs
against KServe's stand-in (tests/kserve_standin.py), creates the
InferenceService on version 1, then rolls version 2 out as a canary left for a
person (`promotion: manual`): version 2 is newer, complete and takes 10% of
the traffic, version 1 is still what KServe rolled out. The stand-in reads a
storageUri as a local path (it reads no s3://), so the rollout serves from a
local storage root, and its record is uploaded unchanged to the bucket's
storage root, where the scorer reads it. Version 1 scores, and the scores are
its `serving_default`'s on ExampleGen's examples, batch for batch.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from components.artifact_names import STATUS_PROPERTY
from components.scoring.output import MANIFEST_FILE, SUCCESS_FILE, TEMPORARY_DIR
from components.serving.rollout_record import rolled_out_record
from components.serving.serving_dir import SERVED_EVALUATION_FILE, model_digest
from kubeflow.step_ids import SCORING_REPORT
from pipeline.steps import BATCH_SCORER, EXAMPLE_GEN, SCORING_STEPS
from tests.conftest import REPO_ROOT, read_taxi_rows, write_csv
from tests.harness import (
    DATA_ROOT,
    SECRET,
    SERVING_DIR,
    compile_package,
    execute_isolated,
    local_settings,
    output_metadata,
    parse,
    schema_dir_in_project,
    svg_texts,
    with_attr,
)
from tests.kubernetes_standin import KubernetesStandin
from tests.s3_standin import s3_standin

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

KEY = "trip_id"
# The sample's first rows have no drop-off at all, which the schema refuses.
FIRST_ROW, ROWS = 200, 30
SPAN = 1
# The package's default `scores_root`: `scores/` beside the serving directory.
SCORES_ROOT = SERVING_DIR.rsplit("/", 1)[0] + "/scores"
PARTITION = f"{SCORES_ROOT}/span={SPAN}/version=1"
# The Deploy step's storage root (serving.storage_root's default) and its record there.
STORAGE_ROOT = SERVING_DIR + "-kserve"
# What a killed attempt of an earlier run of this partition left (components/scoring/output.py).
LEFTOVER = f"{SCORES_ROOT}/{TEMPORARY_DIR}/span={SPAN}/version=1/0a1b2c/part-00000-of-00001.parquet"
# The Deploy step's InferenceService, and the token its pod's service account sends.
NAMESPACE, INFERENCE_SERVICE, TOKEN = "models", "taxi", "deploy-token"


def evaluation_record(sums: dict) -> dict:
    """An evaluation record holding `sums` for the overall slice, as the batched
    evaluator writes it (components/evaluator/batched_metrics.py, `recorded_sums`)."""
    import numpy as np
    from tensorflow_model_analysis.metrics import metric_types

    from components.evaluator.batched_metrics import recorded_sums

    overall = {
        metric_types.MetricKey(name=name): np.asarray(value, np.float64)
        for name, value in sums.items()
    }
    return {"candidate_sums": recorded_sums([((), overall)], None)}


def upload_tree(store, local: Path, uri: str) -> None:
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        store.upload(path, f"{uri}/{path.relative_to(local).as_posix()}")


@pytest.fixture(scope="module")
def store():
    with s3_standin() as standin:
        yield standin


@pytest.fixture(scope="module")
def kserve(tmp_path_factory):
    """The Deploy step's cluster: KServe's controller in the Kubernetes stand-in, and the
    kubeconfig that reaches it (the step's `ServingCluster.from_environment` reads it)."""
    tmp = tmp_path_factory.mktemp("kserve")
    standin = KubernetesStandin(sys.executable, users={TOKEN: "system:serviceaccount:x:deployer"})
    with standin:
        standin.kubeconfig(tmp / "kubeconfig", namespace=NAMESPACE, token=TOKEN)
        yield standin.kserve, tmp / "kubeconfig"


def deploy(kubeconfig: Path, examples_uri: Path, serving_dir: Path, version: str, **serving):
    """The Deploy step's own work (kubeflow/steps/deploy/executor.py `deploy`, as its pod runs
    it through kubeflow/light_step.py) for a pushed `serving_dir/version`; its outcome."""
    import os
    from unittest import mock

    from components.artifact_names import PUSHED_DESTINATION_PROPERTY, PUSHED_PROPERTY
    from kubeflow.light_step import StepArtifact
    from kubeflow.settings.serving import parse_serving
    from kubeflow.steps.deploy import executor as deployment

    config = parse_serving(
        {"inference_service": INFERENCE_SERVICE, "ready_timeout": "30s", **serving},
        str(serving_dir),
    ).to_json()
    pushed = StepArtifact(uri=str(serving_dir.parent / "pushed"))
    pushed.set_int_custom_property(PUSHED_PROPERTY, 1)
    pushed.set_string_custom_property(PUSHED_DESTINATION_PROPERTY, str(serving_dir / version))
    outcome = StepArtifact(uri=str(serving_dir.parent / "deployment" / version))
    with mock.patch.dict(os.environ, {"KUBECONFIG": str(kubeconfig)}):
        deployment.deploy(
            pushed_model=pushed,
            examples=StepArtifact(uri=str(examples_uri)),
            deployment=outcome,
            serving=json.dumps(config),
            poll_seconds=0.05,
        )
    return deployment.read_outcome(outcome.uri)


def rolled_out_by_the_deploy_step(kserve, tmp: Path, versions: dict, eval_files: str) -> dict:
    """Version 1 created and serving, then version 2 left as a canary (promotion: manual):
    the outcomes, the storageUri the stand-in routes most traffic to, and the record."""
    controller, kubeconfig = kserve
    examples_uri = tmp / "examples"  # the run's eval split, for the smoke request
    (examples_uri / "Split-eval").mkdir(parents=True)
    shutil.copy(eval_files, examples_uri / "Split-eval")
    serving_dir, storage_root = tmp / "serving", str(tmp / "serving-kserve")
    for version, base in versions.items():  # as the Pusher writes them
        shutil.copytree(base / "1", serving_dir / version)
    created = deploy(kubeconfig, examples_uri, serving_dir, "1", storage_root=storage_root)
    canary = deploy(
        kubeconfig, examples_uri, serving_dir, "2", storage_root=storage_root, promotion="manual"
    )
    return {
        "outcomes": (created["outcome"], canary["outcome"]),
        "canary_traffic": sorted(t["percent"] for t in canary["traffic"]),
        "most_traffic": controller.serving_storage_uri(NAMESPACE, INFERENCE_SERVICE),
        "storage_root": storage_root,
        "record": rolled_out_record(storage_root),
    }


@pytest.fixture(scope="module")
def execution(
    store, kserve, tmp_path_factory, small_model_base, other_small_model_base, taxi_trainer_inputs
):
    tmp = tmp_path_factory.mktemp("kubeflow_scoring")
    versions = {"1": small_model_base, "2": other_small_model_base}
    schema_dir = schema_dir_in_project(tmp)
    try:
        with (REPO_ROOT / schema_dir / "dataset.yaml").open("a") as f:
            f.write(f"keys: [{KEY}]\n")
        header, rows = read_taxi_rows(limit=FIRST_ROW + ROWS)
        rows = rows[FIRST_ROW:]
        for i, row in enumerate(rows):
            row[KEY] = str(1000 + i)
        columns = [c for c in header if c != "tips"] + [KEY]  # no label at scoring time
        data = write_csv(tmp / "new" / "data.csv", columns, rows)
        store.upload(data, f"{DATA_ROOT}/span-{SPAN}/data.csv")
        upload_tree(store, versions["1"] / "1", f"{SERVING_DIR}/1")
        # What the Pusher copies into a version: its Evaluator's sums ([tp, tn, fp, fn]).
        evaluation = tmp / "evaluation.json"
        evaluation.write_text(json.dumps(evaluation_record({"binary_accuracy": [3, 4, 1, 2]})))
        store.upload(evaluation, f"{SERVING_DIR}/1/{SERVED_EVALUATION_FILE}")
        # Newer, pushed, a canary, not rolled out: the newest-version rule would score it.
        upload_tree(store, versions["2"] / "1", f"{SERVING_DIR}/2")
        deployed = rolled_out_by_the_deploy_step(
            kserve, tmp / "deploy", versions, taxi_trainer_inputs["raw_eval_files"]
        )
        store.upload(Path(deployed["record"]), rolled_out_record(STORAGE_ROOT))
        store.upload(data, LEFTOVER)
        settings = local_settings(
            tmp,
            DATA_ROOT,
            schema_dir=schema_dir,
            serving_model_dir=SERVING_DIR,
            object_store={
                "endpoint": store.endpoint,
                "region": "us-east-1",
                "credentials": {
                    "secret": SECRET,
                    "access_key_id_key": "accesskey",
                    "secret_access_key_key": "secretkey",
                },
            },
            serving={"inference_service": "taxi", "service_account": "kserve-models"},
        )
        package = compile_package(settings, tmp / "scoring.yaml", "--scoring")
        summary = execute_isolated(
            package, tmp, "scoring", store.secret_data(), options=("--preempt", BATCH_SCORER)
        )
    finally:
        shutil.rmtree(REPO_ROOT / schema_dir)
    return {
        "tmp": tmp,
        "summary": summary,
        "spec": next(yaml.safe_load_all(package.read_text())),
        "keys": [r[KEY] for r in rows],  # read as written: a CSV's keys are text
        "versions": versions,
        "deployed": deployed,
    }


def key_text(serialized: bytes) -> str:
    """The example's key, as the scores write a CSV's key: text."""
    import tensorflow as tf

    feature = tf.train.Example.FromString(serialized).features.feature[KEY]
    (value,) = getattr(feature, feature.WhichOneof("kind")).value
    return value.decode() if isinstance(value, bytes) else str(value)


@pytest.fixture(scope="module")
def served_scores(execution) -> dict:
    """Each version's `serving_default` on ExampleGen's examples, in the scorer's batches
    (each file in its order, `batch_size` rows at a time: components/scoring/executor.py
    `read_batches`): key -> the positive class's probability, per version."""
    import tensorflow as tf

    from components.scoring.executor import ScoringSettings, read_batches
    from trainer.export import SERVING_SIGNATURE
    from trainer.model_support import PROBABILITIES_OUTPUT

    steps = execution["summary"]["steps"]
    (examples_uri,) = steps[EXAMPLE_GEN]["outputs"]["examples"]
    files = sorted(str(p) for p in Path(examples_uri).glob("Split-*/*"))
    assert files, examples_uri
    settings = ScoringSettings.from_json(steps[BATCH_SCORER]["parameters"]["settings"])
    scores: dict = {}
    for version, base in execution["versions"].items():
        signature = tf.saved_model.load(str(base / "1")).signatures[SERVING_SIGNATURE]
        scores[version] = {}
        for path in files:
            for batch in read_batches(path, settings.batch_size):
                outputs = signature(examples=tf.constant(batch, tf.string))[PROBABILITIES_OUTPUT]
                keys = [key_text(example) for example in batch]
                scores[version].update(zip(keys, outputs.numpy()[:, 0], strict=True))
    return scores


def read_partition(store, uri: str):
    import pandas as pd

    bucket_keys = store.keys(uri + "/")
    parts = [k for k in bucket_keys if k.rsplit("/", 1)[-1].startswith("part-")]
    client = store.client()
    frames = [
        pd.read_parquet(io.BytesIO(client.get_object(Bucket=store.bucket, Key=k)["Body"].read()))
        for k in parts
    ]
    return pd.concat(frames) if frames else pd.DataFrame()


def read_object(store, uri: str) -> str:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return store.client().get_object(Bucket=bucket, Key=key)["Body"].read().decode()


def test_every_scoring_step_ran_on_the_stores_data(execution):
    steps = execution["summary"]["steps"]
    assert set(steps) == {*SCORING_STEPS.ids, SCORING_REPORT}
    assert all(step["status"] == "SUCCESS" for step in steps.values()), steps
    assert steps[EXAMPLE_GEN]["parameters"]["input_base"] == DATA_ROOT
    assert steps[BATCH_SCORER]["parameters"]["output_dir"] == SCORES_ROOT
    assert steps[BATCH_SCORER]["parameters"]["rolled_out_record"] == rolled_out_record(STORAGE_ROOT)


def test_the_deploy_step_rolled_out_version_1_and_left_version_2_a_canary(execution, store):
    deployed = execution["deployed"]
    assert deployed["outcomes"] == ("created", "canary")
    assert deployed["canary_traffic"] == [10, 90]
    assert deployed["most_traffic"] == f"{deployed['storage_root']}/1"
    record = json.loads(read_object(store, rolled_out_record(STORAGE_ROOT)))
    assert record["version"] == "1" and record["inference_service"] == "models/taxi"
    assert record == json.loads(Path(deployed["record"]).read_text())  # uploaded unchanged


def test_the_scores_are_the_rolled_out_versions_not_the_newer_canarys(
    execution, store, served_scores
):
    import numpy as np

    scores = read_partition(store, PARTITION)
    assert len(scores) == ROWS, f"{PARTITION} holds {len(scores)} rows, not the rolled-out {ROWS}"
    keys = list(scores[KEY])
    assert sorted(keys) == sorted(execution["keys"])
    rolled_out = np.array([served_scores["1"][k] for k in keys], np.float32)
    canary = np.array([served_scores["2"][k] for k in keys], np.float32)
    assert not np.array_equal(rolled_out, canary)  # two models: the test tells them apart
    np.testing.assert_array_equal(scores["probability_big_tip"].to_numpy(), rolled_out)
    manifest = json.loads(read_object(store, f"{PARTITION}/{SUCCESS_FILE}"))
    versions = execution["versions"]
    assert manifest["model_digest"] == model_digest(str(versions["1"] / "1"))
    assert manifest["model_digest"] != model_digest(str(versions["2"] / "1"))


def test_the_partition_and_its_manifest_are_in_the_bucket_each_key_once(execution, store):
    scores = read_partition(store, PARTITION)
    assert sorted(scores[KEY]) == sorted(execution["keys"])
    assert set(scores["model_version"]) == {"1"}
    # The dataset spec's classes, in its order; the two probabilities sum to one.
    total = scores["probability_ordinary_tip"] + scores["probability_big_tip"]
    assert ((total - 1).abs() < 1e-6).all()
    assert set(scores["class"]) <= {"ordinary_tip", "big_tip"}
    manifest = json.loads(read_object(store, f"{PARTITION}/{SUCCESS_FILE}"))
    assert (manifest["rows"], manifest["errors"], manifest["span"]) == (ROWS, 0, SPAN)
    assert manifest["model_version"] == "1" and len(manifest["model_digest"]) == 64
    assert manifest["input_fingerprint"].startswith("split:single_split,num_files:1")
    assert manifest["keys"] == [KEY] and manifest["format"] == "parquet"


def test_a_retried_scorer_leaves_one_committed_partition_and_no_duplicates(execution, store):
    scorer = execution["summary"]["steps"][BATCH_SCORER]
    assert scorer["attempts"] == 2
    assert "[preempted: killed while writing its outputs]" in scorer["earlier_log_tails"][0]
    # The first attempt committed before it was killed; the retry found the partition whole.
    assert output_metadata(scorer, "scores")[STATUS_PROPERTY] == "unchanged"
    (scores_uri,) = scorer["outputs"]["scores"]
    assert json.loads((Path(scores_uri) / MANIFEST_FILE).read_text())["rows"] == ROWS
    everything = store.keys(SCORES_ROOT + "/")
    assert [k for k in everything if k.endswith("/" + SUCCESS_FILE)] == [
        PARTITION.removeprefix(f"s3://{store.bucket}/") + "/" + SUCCESS_FILE
    ]
    assert len(read_partition(store, PARTITION)) == ROWS


def test_a_killed_attempts_leftovers_are_removed_at_commit(execution, store):
    assert not store.keys(f"{SCORES_ROOT}/{TEMPORARY_DIR}/")


def test_the_scoring_report_shows_what_the_scorer_committed(execution, store):
    """The exit handler's page: the partition's rows and errors, the rolled-out version
    (not the newer push) and its digest, and the score distribution beside the served
    model's eval class mix."""
    (uri,) = execution["summary"]["steps"][SCORING_REPORT]["outputs"]["report"]
    html = Path(uri).read_text()
    elements = parse(html)
    manifest = json.loads(read_object(store, f"{PARTITION}/{SUCCESS_FILE}"))

    def value(element_id: str, attribute: str = "data-value") -> str:
        (found,) = with_attr(elements, "id", id=element_id)
        return found[attribute]

    # The retry's status: it found the first attempt's partition complete.
    assert with_attr(elements, "data-status", data_status="unchanged")
    assert value("partition", "data-path") == PARTITION
    assert (value("rows"), value("errors")) == (str(ROWS), "0")
    assert 'id="model-version">1<' in html
    assert manifest["model_digest"] in html and f'id="span">{SPAN}<' in html
    charts = [a["src"] for t, a in elements if t == "img"]
    assert len(charts) == 2  # the positive class's histogram, and the class mix
    class_mix = base64.b64decode(charts[1].removeprefix("data:image/svg+xml;base64,")).decode()
    # Beside this run's: the served version's predictions on its eval split (4 and 6 rows).
    assert {"scored", "eval"} <= set(svg_texts(class_mix))
    assert "Every row was scored" in html
