"""The KFP launcher's download of a step's input artifacts, before its command runs.

    python kubeflow/standin_harness/launcher_download.py POD_DIR < executor_input.json

Prints the bytes downloaded. Run by run_compiled.py with the project's
interpreter (boto3) and the step's environment (its store's endpoint and
credentials), as the launcher is a process of its own in the step's pod.

Ported from kubeflow/pipelines 2.17.0 (2.14.0 to master do the same but for
the prefix check below; the "TODO: Selectively copy" at launcher_v2.go:977
is still open on master):

* every input artifact is downloaded, whatever the step reads of it
  (backend/src/v2/component/launcher_v2.go:927-1003), to its local path:
  s3://B/K to /s3/B/K (launcher_v2.go:1239, `LocalPathForURI`; here under
  POD_DIR); the executor input keeps the remote URI;
* `DownloadBlob` lists every key under the artifact's key as a prefix,
  without a delimiter, and writes each to the local path of its key
  relative to that prefix (backend/src/v2/objectstore/object_store.go:176-205,
  `sanitizeDownloadPath` at :146 cleans the relative path as Go's
  `filepath.Rel` does, so a key "dir/" maps to the path "dir");
* `downloadFile` makes the file's parent directories, then the file
  (object_store.go:235-255). A zero-byte "folder marker" key ending in "/"
  thus becomes an empty *file*, and the next key under it fails: `mkdir
  ...: not a directory` (kubeflow/pipelines#13476; fixes #13479 and #13537
  still open). The error text is the launcher's, wrapped as it is
  (launcher_v2.go:974-976 and :181): "failed to execute component: failed to
  download input artifact ...: downloadFile(): ...: mkdir ...: not a
  directory".
* skipped as the launcher skips them: an artifact flagged `_kfp_workspace`
  (launcher_v2.go:950-954), a key not under the prefix ("model2" beside
  "model", object_store.go:171-174); a key with a ".." part fails
  (object_store.go:147-149). An artifact's `customPath` replaces its local
  path (launcher_v2.go:1255).

Not played: gs:// and minio:// inputs (mapped by LocalPathForURI, but there
is no stand-in for them here), oci:// (a Modelcar), and the launcher's
separate session for an artifact in another bucket (launcher_v2.go:1006;
here one client with the step's environment serves every bucket). 2.14 to
2.16 also download a sibling key whose name starts with the artifact's
("model2/x" for "model", to ../model2/x; object_store.go:127 at 2.16.0):
2.17.0 added the prefix check.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


class DownloadError(RuntimeError):
    """The launcher's download failed, as it fails the step before its command."""


def local_path_for_uri(uri: str) -> str | None:
    """Where the launcher puts `uri` inside a pod, without the leading "/"; None: nowhere.

    component/launcher_v2.go:1239 at 2.17.0, `LocalPathForURI` (oci:// left out).
    """
    for scheme, prefix in (("gs://", "gcs/"), ("minio://", "minio/"), ("s3://", "s3/")):
        if uri.startswith(scheme):
            return prefix + uri.removeprefix(scheme)
    return None


def split_s3(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _relative(blob_dir: str, key: str) -> str:
    # Go's filepath.Rel cleans both paths: "a/b/" is "a/b", and Rel("a", "a") is ".".
    return os.path.normpath(os.path.relpath(os.path.normpath(key), os.path.normpath(blob_dir)))


def _is_under_prefix(key: str, blob_dir: str) -> bool:
    """`isBlobKeyUnderPrefix` (object_store.go:171-174): "model2" is not under "model"."""
    blob_dir = blob_dir.rstrip("/")
    return key == blob_dir or key.startswith(blob_dir + "/")


def _mkdir_all(path: Path) -> None:
    """Go's `os.MkdirAll`: its error names the nearest existing ancestor that is not a directory."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            if not candidate.is_dir():
                raise DownloadError(f"mkdir {candidate}: not a directory")
            break
    path.mkdir(parents=True, exist_ok=True)


def download_file(client, bucket: str, key: str, local_path: Path) -> None:
    """`downloadFile` (object_store.go:235-266): the parent directories, then the file."""

    def error(reason: str) -> DownloadError:  # errorF, object_store.go:236-238
        return DownloadError(
            f'downloadFile(): unable to complete copying "{key}" to local storage '
            f'"{local_path}": {reason}'
        )

    parent = local_path.parent
    try:
        _mkdir_all(parent)
    except DownloadError as err:  # object_store.go:246-249
        raise error(f'failed to create local directory "{parent}": {err}') from None
    if local_path.is_dir():  # os.Create on a directory, object_store.go:251-254
        raise error(
            f'unable to open local file "{local_path}" for writing: open {local_path}: '
            "is a directory"
        )
    client.download_file(bucket, key, str(local_path))


def download_blob(client, bucket: str, local_dir: Path, blob_dir: str) -> int:
    """`DownloadBlob` (object_store.go:176-205): every key under `blob_dir`; the bytes written."""
    written = 0
    paginator = client.get_paginator("list_objects_v2")
    # No delimiter (object_store.go:177): every key under the prefix, in key order,
    # so a "dir/" marker comes before the keys under it.
    for page in paginator.paginate(Bucket=bucket, Prefix=blob_dir):
        for item in page.get("Contents", []):
            key = item["Key"]
            if not _is_under_prefix(key, blob_dir):
                continue  # object_store.go:200-202, logged at V(4)
            if ".." in key.split("/"):  # sanitizeDownloadPath, object_store.go:147-149
                raise DownloadError(
                    f"path traversal detected: blob key \"{key}\" contains '..' component"
                )
            relative = _relative(blob_dir, key)
            local_path = local_dir if relative == "." else local_dir / relative
            download_file(client, bucket, key, local_path)
            written += item["Size"]
    return written


def download_inputs(executor_input: dict, pod: Path, client=None) -> int:
    """Downloads every s3:// input artifact of `executor_input` under `pod`; the bytes.

    `downloadArtifacts` (launcher_v2.go:927-1003). DownloadError carries the
    launcher's text for the step's log (launcher_v2.go:974-976, wrapped at
    :181 and logged by `glog.Exit`, cmd/launcher-v2/main.go:59).
    """
    if client is None:
        import boto3

        client = boto3.client("s3")
    total = 0
    for name, artifact_list in executor_input.get("inputs", {}).get("artifacts", {}).items():
        for artifact in artifact_list.get("artifacts", []):
            if (artifact.get("metadata") or {}).get("_kfp_workspace") is True:
                continue  # already in the run's workspace, launcher_v2.go:950-954
            uri = artifact.get("uri", "")
            if not uri.startswith("s3://"):
                continue  # gs:// and minio:// map alike; only s3 is played here
            bucket, key = split_s3(uri)
            # retrieveArtifactPath (launcher_v2.go:1255): a custom path, else LocalPathForURI.
            local = Path(artifact["customPath"]) if artifact.get("customPath") else None
            local = local or pod / str(local_path_for_uri(uri))
            try:
                total += download_blob(client, bucket, local, key.lstrip("/"))
            except DownloadError as err:
                raise DownloadError(
                    "failed to execute component: failed to download input artifact "
                    f'"{name}" from remote storage URI "{uri}": {err}'
                ) from None
    return total


def main() -> int:
    pod = Path(sys.argv[1])
    try:
        print(download_inputs(json.load(sys.stdin), pod))
    except DownloadError as err:
        print(err, file=sys.stderr)  # as glog.Exit logs it, then exit status 1
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
