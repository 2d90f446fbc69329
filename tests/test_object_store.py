"""Object-store paths: scheme checks, the step entrypoint's URI scan, and a local run on s3:// data.

Anything that touches s3:// through TensorFlow runs in a subprocess: a process
that used tensorflow-io's S3 filesystem must leave through
`object_store.exit_process` (tensorflow/io#2039), and pytest's own exit would not.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kubeflow.step_entrypoint import step_uris
from pipeline.object_store import ObjectStoreError, check_uri
from tests.conftest import REPO_ROOT, read_taxi_rows, write_csv
from tests.s3_standin import s3_standin


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
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "local_runner.py"), "--data-root",
         "s3://pipelines/local", "--output-dir", str(output_dir), "--train-steps", "30",
         "--eval-steps", "5", "--no-report"],
        cwd=tmp_path, env=store.shell_environment(tmp_path), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "on s3://pipelines/local (Beam in_memory" in proc.stdout
    assert "Blessing: BLESSED" in proc.stdout
    assert len(list((output_dir / "serving_model").iterdir())) == 1


@pytest.mark.parametrize(
    ("case", "files", "message"),
    [
        ("empty", {}, "data root s3://pipelines/bad/empty holds no *.csv files"),
        ("other", {"data.csv": "fare,tips\n1,2\n", "notes.txt": "x"}, "not CSV: notes.txt"),
        (
            "headers",
            {"a.csv": "fare,tips\n1,2\n", "b.csv": "fare\n1\n"},
            "every CSV a run reads must share one header",
        ),
    ],
)
def test_s3_data_roots_are_checked_like_local_ones(store, tmp_path, case, files, message):
    prefix = f"s3://pipelines/bad/{case}"
    # A hidden marker makes the prefix a directory even with no files in it.
    store.client().put_object(Bucket="pipelines", Key=f"bad/{case}/.keep", Body=b"")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        store.upload(tmp_path / name, f"{prefix}/{name}")
    proc = subprocess.run(
        [sys.executable, "-c",
         "import sys; from pipeline.inputs import check_csv_data_root\n"
         "from pipeline.object_store import exit_process\n"
         "try: check_csv_data_root(sys.argv[1])\n"
         "except ValueError as e: print(e)\n"
         "exit_process(0)", prefix],
        cwd=REPO_ROOT, env=store.shell_environment(tmp_path), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert message in proc.stdout, proc.stdout
