"""Object-store paths: scheme checks, the step entrypoint's URI scan, and a local run on s3:// data.

Anything that touches s3:// through TensorFlow runs in a subprocess: a process
that used tensorflow-io's S3 filesystem must leave through
`object_store.exit_process` (tensorflow/io#2039), and pytest's own exit would not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from kubeflow.step_attempt import written_locations
from kubeflow.step_entrypoint import step_uris
from pipeline.object_store import ObjectStoreError, check_uri, remove_folder_markers
from tests.conftest import REPO_ROOT, read_taxi_rows, write_csv
from tests.s3_standin import s3_standin, store_canonical_path


@pytest.mark.parametrize(
    "uri", ["/data/taxi", "relative/dir", "s3://bucket/data", "gs://bucket/a/b", "S3://bucket/x"]
)
def test_local_s3_and_gs_paths_are_accepted(uri):
    assert check_uri(uri, "data root") == uri


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("minio://mlpipeline/v2", r"^data root: .*minio://.*write s3://mlpipeline/v2 and set"),
        ("http://host/data", r"^data root: .*scheme http:// is not supported; use s3://"),
        ("file:///data", r"scheme file:// is not supported"),
        ("s3://", r"names no bucket"),
    ],
)
def test_other_schemes_are_refused_with_what_works(uri, message):
    with pytest.raises(ObjectStoreError, match=message):
        check_uri(uri, "data root")


def test_step_entrypoint_checks_every_bucket_a_step_touches():
    executor_input = {
        "inputs": {
            "artifacts": {"model": {"artifacts": [{"uri": "s3://models/run/1"}]}},
            "parameterValues": {
                "input_base": "s3://data/taxi",
                "push_destination": json.dumps(
                    {"filesystem": {"baseDirectory": "s3://serving/taxi"}}
                ),
                "train_args": '{"num_steps": 5}',
                "module_path": "trainer.run",
            },
        },
        "outputs": {
            "artifacts": {"pushed": {"artifacts": [{"uri": "gs://other/run/2"}]}},
            "outputFile": "/tmp/kfp/executor_output.json",
        },
    }
    assert step_uris(executor_input) == [
        "gs://other/run/2",
        "s3://data/taxi",
        "s3://models/run/1",
        "s3://serving/taxi",
    ]


@pytest.fixture(scope="module")
def store():
    with s3_standin() as standin:
        yield standin


@pytest.mark.slow
@pytest.mark.e2e
def test_local_run_reads_its_data_from_s3(store, tmp_path):
    """`local_runner.py --data-root s3://...`, as a user runs it, ends blessed with exit 0."""
    header, rows = read_taxi_rows(limit=2000)
    store.upload(write_csv(tmp_path / "data.csv", header, rows), "s3://pipelines/local/data.csv")
    output_dir = tmp_path / "out"
    # The run's temporary directory, of its own; a file planted there shows the check
    # below sees what is left in it.
    run_tmp = tmp_path / "tmp"
    planted = run_tmp / "__autograph_generated_fileplanted.py"
    planted.parent.mkdir()
    planted.write_text("")
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "local_runner.py"), "--data-root",
         "s3://pipelines/local", "--output-dir", str(output_dir), "--train-steps", "30",
         "--eval-steps", "5", "--no-report"],
        cwd=tmp_path, env={**store.shell_environment(tmp_path), "TMPDIR": str(run_tmp)},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Left through os._exit after tensorflow-io's S3, its exit handlers run first:
    # autograph's generated sources are gone, and nothing else is left but the bytecode
    # Python cached for them, which TensorFlow's exit handler leaves in any process
    # (tensorflow/python/autograph/pyct/loader.py, `load_source`, deletes only the .py).
    left = [p for p in run_tmp.rglob("*") if p.is_file()]
    bytecode = run_tmp / "__pycache__"
    assert [p for p in left if p.parent != bytecode] == [planted]
    assert all(p.name.startswith("__autograph_generated_file") for p in bytecode.glob("*"))
    assert "on s3://pipelines/local (Beam in_memory" in proc.stdout
    assert "Blessing: BLESSED" in proc.stdout
    assert len(list((output_dir / "serving_model").iterdir())) == 1


# Data roots on the store, each with the files it holds (no file: a hidden marker makes
# the prefix a directory with no CSV in it; beside CSV files it would be refused as not CSV).
BAD_ROOTS = {
    "empty": {},
    "other": {"data.csv": "fare,tips\n1,2\n", "notes.txt": "x"},
    "headers": {"a.csv": "fare,tips\n1,2\n", "b.csv": "fare\n1\n"},
}
PARQUET_ROOT = "s3://pipelines/parquet"


@pytest.fixture(scope="module")
def checked_roots(store, tmp_path_factory) -> dict[tuple[str, tuple[str, ...]], str]:
    """What the data-root check prints for each of BAD_ROOTS and for a Parquet root (a
    struct column, then that column ignored), run in one process with the store's
    environment: (root, ignored columns) -> its error, or what it found."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp_path = tmp_path_factory.mktemp("roots")
    for case, files in BAD_ROOTS.items():
        if not files:
            store.client().put_object(Bucket="pipelines", Key=f"bad/{case}/.keep", Body=b"")
        for name, text in files.items():
            (tmp_path / name).write_text(text)
            store.upload(tmp_path / name, f"s3://pipelines/bad/{case}/{name}")
    pq.write_table(pa.table({"fare": [1.5], "trip": [{"km": 2.0}]}), tmp_path / "part.parquet")
    (tmp_path / "_SUCCESS").write_bytes(b"")
    for name in ("part.parquet", "_SUCCESS"):
        store.upload(tmp_path / name, f"{PARQUET_ROOT}/{name}")
    checks = [(f"s3://pipelines/bad/{case}", ()) for case in BAD_ROOTS]
    checks += [(PARQUET_ROOT, ()), (PARQUET_ROOT, ("trip",))]
    return check_in_a_process(store, tmp_path, checks)


CHECK_DATA_ROOTS = """
import json, sys
from pipeline.inputs import check_data_root
from pipeline.object_store import exit_process
for root, ignore in json.loads(sys.argv[1]):
    try:
        checked = check_data_root(root, ignore=tuple(ignore))
        print(checked.format, checked.header, checked.files)
    except ValueError as e:
        print(e)
    print(sys.argv[2], flush=True)
exit_process(0)
"""


def check_in_a_process(
    store, tmp_path, checks: list[tuple[str, tuple[str, ...]]]
) -> dict[tuple[str, tuple[str, ...]], str]:
    """What `check_data_root(root, ignore=...)` prints for each of `checks`, one after
    another in a process with the store's environment: its error, or what it found."""
    end = "-- end of a check --"
    proc = subprocess.run(
        [sys.executable, "-c", CHECK_DATA_ROOTS, json.dumps(checks), end],
        cwd=REPO_ROOT, env=store.shell_environment(tmp_path), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    *printed, rest = proc.stdout.split(f"{end}\n")
    assert len(printed) == len(checks) and rest == "", proc.stdout
    return dict(zip([(root, tuple(ignore)) for root, ignore in checks], printed, strict=True))


@pytest.mark.slow  # the module's process checking every root
@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("empty", "data root s3://pipelines/bad/empty holds no data files"),
        ("other", "neither CSV nor Parquet: s3://pipelines/bad/other/notes.txt"),
        ("headers", "every CSV a run reads must share one header"),
    ],
)
def test_s3_data_roots_are_checked_like_local_ones(checked_roots, case, message):
    assert message in checked_roots[f"s3://pipelines/bad/{case}", ()]


def test_folder_markers_are_removed_and_every_other_key_kept(store, monkeypatch, tmp_path):
    for name, value in store.shell_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    client = store.client()
    kept = ["sweep/run/Trainer/model/saved_model.pb", "sweep/run/Trainer/model/empty_file",
            "sweep/elsewhere/"]  # fmt: skip
    markers = ["sweep/run/Trainer/", "sweep/run/Trainer/model/", "sweep/run/Trainer/model/a/b/"]
    for key in kept + markers:
        client.put_object(Bucket="pipelines", Key=key, Body=b"x" if key.endswith(".pb") else b"")
    # A non-empty key ending in "/" is data, not a marker.
    client.put_object(Bucket="pipelines", Key="sweep/run/Trainer/odd/", Body=b"data")
    kept.append("sweep/run/Trainer/odd/")

    removed = remove_folder_markers(["s3://pipelines/sweep/run/Trainer", "/local/path"])

    assert sorted(removed) == sorted(f"s3://pipelines/{key}" for key in markers)
    assert sorted(store.keys("s3://pipelines/sweep/")) == sorted(kept)
    assert remove_folder_markers(["s3://pipelines/sweep/run/Trainer"]) == []
    assert remove_folder_markers(["/local/path"]) == []


def test_a_delete_the_store_refuses_is_an_error_naming_the_store(store, monkeypatch, tmp_path):
    for name, value in store.shell_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    with pytest.raises(
        ObjectStoreError,
        match=r"object store http://127\.0\.0\.1:\d+, bucket "
        r"'pipelines': s3://pipelines/sweep/: .*SignatureDoesNotMatch",
    ):
        remove_folder_markers(["s3://pipelines/sweep"])


# A partition's key, as the batch scorer writes them (components/scoring/output.py).
HIVE_KEY = "scores/span=1/version=1/_SUCCESS"
READ_WITH_TENSORFLOW = """
import sys
from pipeline.object_store import exit_process, register_filesystems
register_filesystems()
import tensorflow as tf
print(tf.io.gfile.GFile(sys.argv[1], "rb").read().decode(), flush=True)
exit_process(0)
"""


def test_the_store_signs_a_path_decoded_then_encoded_as_minio_does():
    assert store_canonical_path("/pipelines/span=1/a b") == "/pipelines/span%3D1/a%20b"
    assert store_canonical_path("/pipelines/span%3D1/a%20b") == "/pipelines/span%3D1/a%20b"
    assert store_canonical_path("/pipelines/plain-key_1.~/x") == "/pipelines/plain-key_1.~/x"


@pytest.mark.slow
def test_tensorflow_reads_a_key_holding_an_equals_sign_and_a_bad_signature_is_still_refused(
    store, tmp_path
):
    """tensorflow-io's AWS C++ SDK sends `=` as it is and signs `%3D` (aws/aws-sdk-cpp#1224);
    the store verifies the path decoded then encoded (tests/s3_standin.py)."""
    from botocore.exceptions import ClientError

    store.client().put_object(Bucket="pipelines", Key=HIVE_KEY, Body=b"{}")
    proc = subprocess.run(
        [sys.executable, "-c", READ_WITH_TENSORFLOW, f"s3://pipelines/{HIVE_KEY}"],
        cwd=REPO_ROOT, env=store.shell_environment(tmp_path),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "{}", proc.stderr[-2000:]
    wrong = store.client(secret_access_key="wrong")
    with pytest.raises(ClientError, match="403"):
        wrong.head_object(Bucket="pipelines", Key=HIVE_KEY)


@pytest.fixture(scope="module")
def gcs():
    """A GCS JSON API on loopback (gcp-storage-emulator, in memory) with a bucket `pipelines`;
    google-cloud-storage reaches it, without credentials, through STORAGE_EMULATOR_HOST."""
    from gcp_storage_emulator.server import create_server

    server = create_server("127.0.0.1", 0, in_memory=True, default_bucket="pipelines")
    server.start()
    try:
        # Port 0: the OS picked a free port as the server bound it.
        yield f"http://127.0.0.1:{server._api._httpd.server_port}"
    finally:
        server.stop()


def test_gcs_folder_markers_are_removed_and_every_other_object_kept(gcs, monkeypatch):
    """The step-end sweep on gs://, as TensorFlow's GCS filesystem leaves markers there."""
    from google.cloud import storage

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs)
    bucket = storage.Client().bucket("pipelines")
    kept = ["sweep/run/Trainer/model/saved_model.pb", "sweep/run/Trainer/model/empty_file",
            "sweep/elsewhere/"]  # fmt: skip
    markers = ["sweep/run/Trainer/", "sweep/run/Trainer/model/", "sweep/run/Trainer/model/a/b/"]
    for name in kept + markers:
        bucket.blob(name).upload_from_string(b"x" if name.endswith(".pb") else b"")
    # A non-empty object whose name ends in "/" is data, not a marker.
    bucket.blob("sweep/run/Trainer/odd/").upload_from_string(b"data")
    kept.append("sweep/run/Trainer/odd/")

    removed = remove_folder_markers(["gs://pipelines/sweep/run/Trainer", "/local/path"])

    assert sorted(removed) == sorted(f"gs://pipelines/{name}" for name in markers)
    listed = storage.Client().list_blobs("pipelines", prefix="sweep/")
    assert sorted(blob.name for blob in listed) == sorted(kept)
    assert remove_folder_markers(["gs://pipelines/sweep/run/Trainer"]) == []


def test_a_gcs_bucket_the_sweep_cannot_reach_is_an_error_naming_it(gcs, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs)
    with pytest.raises(
        ObjectStoreError,
        match=r"^Google Cloud Storage, bucket 'no-such-bucket': gs://no-such-bucket/run/: 404 ",
    ):
        remove_folder_markers(["gs://no-such-bucket/run"])


def test_a_step_writes_in_its_task_directory_and_where_its_outputs_metadata_points():
    from kubeflow.steps.step_records import OutputArtifact

    pushed = OutputArtifact(
        uri="s3://b/run/Pusher/pushed_model",
        metadata={"pushed_destination": "s3://serving/taxi/17", "pushed": 1, "x": "local"},
    )
    uris = ["s3://b/run/Pusher/pushed_model", "s3://b/run/Pusher/executor-logs"]
    assert written_locations(uris, {"pushed_model": (pushed,)}) == [
        "s3://b/run/Pusher",
        "s3://serving/taxi/17",
    ]
    pushed = OutputArtifact(uri="gs://b/run/Pusher/pushed_model",
                            metadata={"pushed_destination": "gs://serving/taxi/17"})  # fmt: skip
    assert written_locations(["gs://b/run/Pusher/pushed_model"], {"pushed_model": (pushed,)}) == [
        "gs://b/run/Pusher",
        "gs://serving/taxi/17",
    ]


@pytest.mark.slow
def test_an_attempt_removes_the_folder_markers_left_in_its_outputs(store, tmp_path):
    """As tensorflow-io may leave them (pipeline.object_store.remove_folder_markers):
    the attempt ends with none under its task directory, its files and record kept."""
    task = "s3://pipelines/attempt/run/Transform"
    executor_input = {"outputs": {
        "artifacts": {"transform_graph": {"artifacts": [{"uri": f"{task}/transform_graph"}]}},
        "outputFile": str(tmp_path / "executor_output.json"),
    }}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c",
         "import json, sys, boto3\n"
         "from tfx.dsl.io import fileio\n"
         "from pipeline.object_store import exit_process, register_filesystems\n"
         "from kubeflow.step_attempt import recorded_attempt\n"
         "register_filesystems()\n"
         "with recorded_attempt(json.loads(sys.argv[1])):\n"
         "    with fileio.open(sys.argv[2] + '/transform_graph/graph.pb', 'w') as f: f.write('g')\n"
         "    for key in ('attempt/run/Transform/', 'attempt/run/Transform/transform_graph/'):\n"
         "        boto3.client('s3').put_object(Bucket='pipelines', Key=key, Body=b'')\n"
         "exit_process(0)", json.dumps(executor_input), task],
        cwd=REPO_ROOT, env=store.shell_environment(tmp_path), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert store.folder_markers("s3://pipelines/attempt/") == []
    assert sorted(store.keys("s3://pipelines/attempt/")) == [
        "attempt/run/Transform/step_record.json",
        "attempt/run/Transform/transform_graph/graph.pb",
    ]


@pytest.mark.slow  # the module's process checking every root
def test_a_parquet_data_root_on_s3_is_checked_as_a_local_one(checked_roots):
    """The footers are read through the object store's client, as ExampleGen reads them."""
    prefix = PARQUET_ROOT
    printed = checked_roots[prefix, ()]
    assert f"column 'trip' in {prefix}/part.parquet is struct<km: double>" in printed
    printed = checked_roots[prefix, ("trip",)]
    assert f"parquet ('fare',) ('{prefix}/part.parquet',)" in printed, printed


@pytest.mark.slow  # a process importing TensorFlow, and two ExampleGen Beam pipelines
def test_parquet_on_s3_is_read_into_the_examples_of_the_same_files_read_locally(store, tmp_path):
    """ExampleGen's Parquet reader on s3://: the footers are planned and the row groups
    read through Beam's S3 filesystem, Spark's marker and checksums skipped there too."""
    from tfx.utils import proto_utils

    from components.example_gen.executor import SpanResolvingExecutor
    from components.example_gen.input_settings import input_config
    from tests.conftest import taxi_as_parquet
    from tests.harness import run_example_gen, split_records

    header, rows = read_taxi_rows(limit=300)
    local = taxi_as_parquet(
        write_csv(tmp_path / "data.csv", header, rows), tmp_path / "parquet", row_group_size=100
    )
    prefix = "s3://pipelines/parquet-examples"
    for path in local.iterdir():
        store.upload(path, f"{prefix}/{path.name}")
    properties = {"input_config": proto_utils.proto_to_json(input_config(None))}
    from_s3 = tmp_path / "from_s3"
    proc = subprocess.run(
        [sys.executable, "-c",
         "import json, sys\n"
         "from pathlib import Path\n"
         "from absl import logging\n"
         "from pipeline.object_store import exit_process, register_filesystems\n"
         "logging.set_verbosity(logging.INFO)\n"
         "register_filesystems()\n"
         "from components.example_gen.executor import SpanResolvingExecutor\n"
         "from tests.harness import run_example_gen\n"
         "run_example_gen(SpanResolvingExecutor, sys.argv[1], Path(sys.argv[2]),"
         " json.loads(sys.argv[3]))\n"
         "exit_process(0)", prefix, str(from_s3), json.dumps(properties)],
        cwd=REPO_ROOT, env=store.shell_environment(tmp_path), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Reading 2 parquet file(s) under s3://pipelines/parquet-examples" in proc.stderr
    from_local = run_example_gen(SpanResolvingExecutor, local, tmp_path / "local", properties)
    examples = split_records(from_local)
    assert split_records(SimpleNamespace(uri=str(from_s3))) == examples
    assert sum(len(records) for records in examples.values()) == 300
