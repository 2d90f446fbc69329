"""The KFP launcher's input download, as run_compiled.py plays it, against the S3 stand-in.

kubeflow/standin_harness/launcher_download.py ports `DownloadBlob` and
`downloadFile` (kubeflow/pipelines 2.17.0); the executed package on s3://
(tests/test_kubeflow_cluster_services.py) runs every step behind it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kubeflow.standin_harness import launcher_download, output_probe
from tests.s3_standin import s3_standin

SCRIPT = launcher_download.__file__


@pytest.fixture(scope="module")
def store():
    with s3_standin() as standin:
        yield standin


def executor_input(*uris: str) -> dict:
    return {
        "inputs": {
            "artifacts": {
                f"input{i}": {"artifacts": [{"name": str(i), "uri": uri}]}
                for i, uri in enumerate(uris)
            }
        }
    }


def launcher(store, tmp_path, *uris: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "pod")],
        input=json.dumps(executor_input(*uris)),
        env=store.shell_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_input_lands_at_its_local_path_with_nothing_beside_it(store, tmp_path):
    client = store.client()
    client.put_object(Bucket=store.bucket, Key="run/Transform/graph/saved_model.pb", Body=b"12345")
    client.put_object(Bucket=store.bucket, Key="run/Transform/graph/variables/v", Body=b"xy")
    # A sibling whose name starts with the artifact's: not under its prefix.
    client.put_object(Bucket=store.bucket, Key="run/Transform/graph2/other", Body=b"no")
    done = launcher(store, tmp_path, f"s3://{store.bucket}/run/Transform/graph")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "7"
    local = tmp_path / "pod" / "s3" / store.bucket / "run" / "Transform" / "graph"
    assert (local / "saved_model.pb").read_bytes() == b"12345"
    assert (local / "variables" / "v").read_bytes() == b"xy"
    assert not (local.parent / "graph2").exists()


def test_a_folder_marker_fails_the_download_as_the_launcher_does(store, tmp_path):
    """kubeflow/pipelines#13476: a zero-byte "dir/" key becomes a file, and its child fails."""
    client = store.client()
    client.put_object(Bucket=store.bucket, Key="marked/Trainer/model/Format-Serving/", Body=b"")
    client.put_object(
        Bucket=store.bucket, Key="marked/Trainer/model/Format-Serving/saved_model.pb", Body=b"1"
    )
    done = launcher(store, tmp_path, f"s3://{store.bucket}/marked/Trainer/model")
    assert done.returncode == 1
    uri = f"s3://{store.bucket}/marked/Trainer/model"
    local = tmp_path / "pod" / "s3" / store.bucket / "marked" / "Trainer" / "model"
    # launcher_v2.go:181 and :975, object_store.go:237 and :248, Go's os.MkdirAll.
    assert done.stderr.strip() == (
        f'failed to execute component: failed to download input artifact "input0" from remote '
        f'storage URI "{uri}": downloadFile(): unable to complete copying '
        f'"marked/Trainer/model/Format-Serving/saved_model.pb" to local storage '
        f'"{local}/Format-Serving/saved_model.pb": failed to create local directory '
        f'"{local}/Format-Serving": mkdir {local}/Format-Serving: not a directory'
    )
    # The marker itself was written as an empty file, as the launcher writes it.
    assert (local / "Format-Serving").is_file()


def test_a_marker_at_the_artifact_root_fails_at_its_first_file(store, tmp_path):
    client = store.client()
    client.put_object(Bucket=store.bucket, Key="rooted/Transform/graph/", Body=b"")
    client.put_object(Bucket=store.bucket, Key="rooted/Transform/graph/saved_model.pb", Body=b"1")
    done = launcher(store, tmp_path, f"s3://{store.bucket}/rooted/Transform/graph")
    local = tmp_path / "pod" / "s3" / store.bucket / "rooted" / "Transform" / "graph"
    assert done.returncode == 1
    assert done.stderr.strip().endswith(f"mkdir {local}: not a directory")


@pytest.mark.parametrize(
    ("run", "written"), [("dir", "hyperparameters/hyperparameters.yaml"), ("file", "metrics")]
)
def test_the_faults_output_probe_sees_a_write_into_the_artifact_itself(store, run, written):
    """kubeflow/standin_harness/output_probe.py, which `--preempt` watches an s3:// output through:
    a sibling whose name starts with the artifact's is no write into it; a file under
    a directory artifact, or the file artifact itself, is."""
    artifact = written.split("/")[0]
    uri = f"s3://{store.bucket}/{run}/Tune/{artifact}"
    client = store.client()
    assert not output_probe.has_written(client, uri)
    client.put_object(Bucket=store.bucket, Key=f"{run}/Tune/{artifact}2", Body=b"x")
    assert not output_probe.has_written(client, uri)
    client.put_object(Bucket=store.bucket, Key=f"{run}/Tune/{written}", Body=b"x")
    assert output_probe.has_written(client, uri)
