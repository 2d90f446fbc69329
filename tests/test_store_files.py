"""components/store_files.py: the same answers on a local directory and on S3 (moto's stand-in).

A light step reads and writes through these functions without TensorFlow, so
each answer on s3:// must be what a local path gives for the same tree: names,
directories, globs, walks, contents, and a SavedModel's digest
(components/serving_dir.model_digest), which the Pusher compares.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from components import store_files
from components.serving.serving_dir import model_digest
from tests.s3_standin import s3_standin

# Relative path -> bytes: nested directories, a partition-style name, an empty file.
TREE = {
    "model/saved_model.pb": b"graph",
    "model/variables/variables.index": b"index",
    "model/assets.extra/push.json": b"{}",
    "model/assets/vocab.txt": b"a\nb\n",
    "span=1/part-0.csv": b"x,y\n1,2\n",
    "span=1/empty.csv": b"",
    "span=1/.part-0.csv.crc": b"crc",  # Spark's checksum: hidden, listed as TensorFlow lists
    "top.txt": b"top",
}


@pytest.fixture(scope="module")
def store():
    with s3_standin() as standin:
        yield standin


@pytest.fixture
def roots(store, tmp_path, monkeypatch) -> tuple[str, str]:
    """The same tree at a local path and under s3://pipelines/<test>/."""
    for name, value in store.shell_environment(tmp_path).items():
        if name not in ("PATH", "HOME"):
            monkeypatch.setenv(name, value)
    local = tmp_path / "tree"
    remote = f"s3://{store.bucket}/{tmp_path.name}/tree"
    client = store.client()
    for relative, data in TREE.items():
        (local / relative).parent.mkdir(parents=True, exist_ok=True)
        (local / relative).write_bytes(data)
        client.put_object(Bucket=store.bucket, Key=f"{tmp_path.name}/tree/{relative}", Body=data)
    # An empty directory: on S3, the folder marker TensorFlow can leave (object_store.py).
    (local / "model" / "empty").mkdir()
    client.put_object(Bucket=store.bucket, Key=f"{tmp_path.name}/tree/model/empty/", Body=b"")
    return str(local), remote


def _relative(paths, root: str) -> list[str]:
    return sorted(p[len(root) :] for p in paths)


@pytest.mark.slow  # an S3 server (moto) in this process
def test_reads_agree_on_a_local_tree_and_on_s3(roots):
    local, remote = roots
    for root in roots:
        assert store_files.isdir(root) and store_files.exists(root)
        assert store_files.isdir(f"{root}/model/variables")
        assert not store_files.isdir(f"{root}/top.txt")
        assert store_files.exists(f"{root}/span=1/empty.csv")
        assert not store_files.exists(f"{root}/model/missing")
        assert not store_files.isdir(f"{root}/mod")  # a prefix of a name is no directory
    for path in ("", "/model", "/span=1"):
        assert store_files.listdir(local + path) == store_files.listdir(remote + path)
    assert ".part-0.csv.crc" in store_files.listdir(f"{local}/span=1")
    assert f"{local}/span=1/.part-0.csv.crc" in store_files.glob(f"{local}/span=1/*")
    for relative, data in TREE.items():
        assert store_files.stat(f"{local}/{relative}").length == len(data)
        assert store_files.stat(f"{remote}/{relative}").length == len(data)
    for pattern in ("/*/*.csv", "/model/*", "/*/variables", "/span=[0-9]/part-*", "/top.txt",
                    "/span=1/*", "/*/.*"):  # fmt: skip
        found = _relative(store_files.glob(local + pattern), local)
        assert found == _relative(store_files.glob(remote + pattern), remote), pattern
        assert found, pattern
    walked = [
        [(r[len(root) :], sorted(d), sorted(f)) for r, d, f in sorted(store_files.walk(root))]
        for root in roots
    ]
    assert walked[0] == walked[1]
    for relative, data in TREE.items():
        with store_files.open(f"{remote}/{relative}", "rb") as f:
            assert f.read() == data
    assert model_digest(f"{local}/model") == model_digest(f"{remote}/model")


@pytest.mark.slow  # an S3 server (moto) in this process
def test_writes_and_removals_on_s3(roots, store):
    _, remote = roots
    store_files.write_text(f"{remote}/new/record.json", '{"a": 1}')
    assert store_files.read_text(f"{remote}/new/record.json") == '{"a": 1}'
    store_files.remove(f"{remote}/top.txt")
    assert not store_files.exists(f"{remote}/top.txt")
    store_files.rmtree(f"{remote}/model")
    assert not store_files.exists(f"{remote}/model")
    assert store_files.listdir(remote) == ["new", "span=1"]


@pytest.mark.slow  # an S3 server (moto) in this process
def test_a_missing_object_is_a_missing_file(roots):
    with pytest.raises(FileNotFoundError, match="no-such"):
        store_files.open(f"{roots[1]}/no-such.json")


def test_a_local_write_makes_its_directory(tmp_path: Path):
    store_files.write_text(str(tmp_path / "a" / "b" / "c.txt"), "text")
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "text"


def test_a_key_the_store_did_not_delete_fails_the_removal_naming_it(monkeypatch):
    """S3's multi-object delete answers 200 and lists the keys it kept under Errors: a
    removal that left objects behind must not pass for done (an attempt's outputs would
    not start empty)."""

    class Store:
        def get_paginator(self, _operation):
            return self

        def paginate(self, **_options):
            return [{"Contents": [{"Key": "root/out/a"}, {"Key": "root/out/b"}]}]

        def delete_objects(self, Bucket, Delete):
            kept = {"Key": "root/out/b", "Code": "AccessDenied", "Message": "Access Denied"}
            return {"Errors": [kept]}

    monkeypatch.setattr(store_files, "s3_client", Store)
    with pytest.raises(OSError) as refused:
        store_files.rmtree("s3://bucket/root/out")
    assert str(refused.value) == (
        "could not delete s3://bucket/root/out/b: AccessDenied: Access Denied "
        "(1 of 2 keys in this request not deleted)"
    )


def test_one_client_per_store_configuration(monkeypatch):
    made = []
    monkeypatch.setattr(store_files, "_new_s3_client", lambda: made.append(object()) or made[-1])
    monkeypatch.setattr(store_files, "_clients", {})
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000")
    first = store_files.s3_client()
    assert store_files.s3_client() is first and len(made) == 1
    # Another store, or another key, is another client.
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9001")
    assert store_files.s3_client() is not first
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "rotated")
    store_files.s3_client()
    assert len(made) == 3


def _files(root: str) -> dict[str, bytes]:
    """Relative path -> bytes of every file under `root`, local or on S3."""
    found = {}
    for directory, _dirs, files in store_files.walk(root):
        for name in files:
            with store_files.open(f"{directory}/{name}", "rb") as f:
                found[f"{directory}/{name}"[len(root) + 1 :]] = f.read()
    return found


def _local_dirs(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())


@pytest.mark.slow  # an S3 server (moto); TFX's io_utils (TensorFlow) for the reference
def test_a_directory_is_copied_as_tfx_copies_it_locally_and_on_s3(roots, tmp_path):
    """tfx 1.16's `io_utils.copy_dir`, run here on the local tree, and `store_files.copy_dir`
    local to local, S3 to S3, local to S3 and S3 to local: the same files with the same
    bytes, a stale file in the destination gone, and locally the same directories (the
    empty one, from S3's folder marker too)."""
    from tfx.utils import io_utils

    local, remote = roots
    by_tfx = tmp_path / "by_tfx"
    (by_tfx / "stale").mkdir(parents=True)
    (by_tfx / "stale" / "old.txt").write_text("old")
    io_utils.copy_dir(f"{local}/model", str(by_tfx))
    expected = _files(str(by_tfx))
    assert expected == {k[len("model/") :]: v for k, v in TREE.items() if k.startswith("model/")}
    for source, target in (
        (local, str(tmp_path / "local_copy")),
        (remote, f"{remote}/s3_copy"),
        (local, f"{remote}/uploaded"),
        (remote, str(tmp_path / "downloaded")),
    ):
        store_files.write_text(f"{target}/stale/old.txt", "old")
        store_files.copy_dir(f"{source}/model", target)
        assert _files(target) == expected, (source, target)
        if not target.startswith("s3://"):
            assert _local_dirs(Path(target)) == _local_dirs(by_tfx), (source, target)


@pytest.mark.slow  # an S3 server (moto); TFX's io_utils (TensorFlow) for the reference
def test_a_directory_is_copied_without_denied_files_as_tfx_copies_it(roots, tmp_path):
    """The Pusher's copy into a new version (`saved_model\\.pb` denied, the model's other
    files and directories first): tfx 1.16's `io_utils.copy_dir` with the same pattern on
    the local tree, and `store_files.copy_dir` local to local, S3 to S3, local to S3 and S3
    to local; then `copy_file` adds the file, and refuses to overwrite it as TFX's does."""
    from tfx.utils import io_utils

    local, remote = roots
    denied = [r"saved_model\.pb"]
    by_tfx = tmp_path / "by_tfx"
    io_utils.copy_dir(f"{local}/model", str(by_tfx), deny_regex_patterns=denied)
    expected = _files(str(by_tfx))
    assert "saved_model.pb" not in expected and "variables/variables.index" in expected
    for source, target in (
        (local, str(tmp_path / "local_copy")),
        (remote, f"{remote}/s3_copy"),
        (local, f"{remote}/uploaded"),
        (remote, str(tmp_path / "downloaded")),
    ):
        store_files.copy_dir(f"{source}/model", target, deny_regex_patterns=denied)
        assert _files(target) == expected, (source, target)
        if not target.startswith("s3://"):
            assert _local_dirs(Path(target)) == _local_dirs(by_tfx), (source, target)
        store_files.copy_file(f"{source}/model/saved_model.pb", f"{target}/saved_model.pb")
        assert _files(target) == {**expected, "saved_model.pb": b"graph"}
        with pytest.raises(FileExistsError, match=r"saved_model\.pb exists: not overwritten"):
            store_files.copy_file(f"{source}/top.txt", f"{target}/saved_model.pb")
