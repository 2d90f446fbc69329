"""The batch scoring package, executed step by step as KFP's backend would, on the S3 stand-in.

`kubeflow/reference/run_compiled.py` runs the package compiled by
`python -m kubeflow.compile --scoring` (docs/batch-scoring.md), each step with
only the environment its pod would get and the store's secret, as
tests/test_kubeflow_cluster_services.py runs the training package. The served
model (the session's small one, not trained here), the new data and the
scores are in the bucket; the pipeline root stays on this machine, where the
executor's fault sees a step's first output file (kubeflow/reference/faults.py
watches local paths).

One execution, shared by the tests: the scorer's first attempt is preempted once
it has written its output artifact, after it committed the partition, and KFP
retries it on the same output URIs. A killed attempt of an earlier run lies
under `_temporary/` before the execution starts; the commit removes it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from components.batch_scorer import MANIFEST_FILE, STATUS_PROPERTY
from components.scored_output import SUCCESS_FILE, TEMPORARY_DIR
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
    schema_dir_in_project,
)
from tests.s3_standin import s3_standin

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

KEY = "trip_id"
# The sample's first rows have no drop-off at all, which the schema refuses.
FIRST_ROW, ROWS = 200, 30
SPAN = 1
# The package's default `scores_root`: `scores/` beside the serving directory.
SCORES_ROOT = SERVING_DIR.rsplit("/", 1)[0] + "/scores"
PARTITION = f"{SCORES_ROOT}/span={SPAN}/version=1"
# What a killed attempt of an earlier run of this partition left (components/scored_output.py).
LEFTOVER = f"{SCORES_ROOT}/{TEMPORARY_DIR}/span={SPAN}/version=1/0a1b2c/part-00000-of-00001.parquet"


def upload_tree(store, local: Path, uri: str) -> None:
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        store.upload(path, f"{uri}/{path.relative_to(local).as_posix()}")


@pytest.fixture(scope="module")
def store():
    with s3_standin() as standin:
        yield standin


@pytest.fixture(scope="module")
def execution(store, tmp_path_factory, small_model_base):
    import shutil

    tmp = tmp_path_factory.mktemp("kubeflow_scoring")
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
        upload_tree(store, small_model_base / "1", f"{SERVING_DIR}/1")
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
        "keys": [int(r[KEY]) for r in rows],
    }


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
    assert set(steps) == set(SCORING_STEPS.ids)
    assert all(step["status"] == "SUCCESS" for step in steps.values()), steps
    assert steps[EXAMPLE_GEN]["parameters"]["input_base"] == DATA_ROOT
    assert steps[BATCH_SCORER]["parameters"]["output_dir"] == SCORES_ROOT


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
