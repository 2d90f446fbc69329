"""Object stores for the pipeline's paths: s3:// (AWS S3, MinIO, any S3-compatible store) and gs://.

Three libraries touch artifact and data URIs, each with its own S3 client:

* TensorFlow (`tf.io.gfile`, SavedModel, TFRecords; TFX's `fileio` too) knows
  only local paths and gs:// until `tensorflow-io`'s filesystem plugins are
  loaded (`register_filesystems`). Its S3 client reads `S3_ENDPOINT`,
  `S3_CA_FILE`, `AWS_REGION` and the `AWS_*` credentials.
* Beam's `FileSystems` (ExampleGen's CSV reads, every Beam step's writes) uses
  boto3, which reads `AWS_ENDPOINT_URL_S3`, `AWS_CA_BUNDLE`,
  `AWS_DEFAULT_REGION` and the same credentials.
* The reachability check and the folder-marker sweep below, also boto3; the
  sweep reaches gs:// through google-cloud-storage.

`minio://` is what KFP's own launcher calls a MinIO bucket; no TensorFlow or
Beam filesystem knows that scheme, so it is refused with the spelling that
works (`s3://` plus the store's endpoint).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from collections.abc import Iterable
from typing import IO, NoReturn

from components import store_files
from components.store_files import register_tensorflow_filesystems, s3_client

REMOTE_SCHEMES = ("s3", "gs")

# Beam workers import this module first (`--beam_plugins`): TensorFlow reads s3:// there too.
BEAM_PLUGIN_MODULE = "pipeline.s3_plugin"
# Both S3 clients (tensorflow-io's and boto3) read the access key pair from these.
CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")

_LOG = logging.getLogger(__name__)


class ObjectStoreError(ValueError):
    """A path names a store this pipeline cannot use, or the store refused or did not answer."""


def uri_scheme(uri: str | os.PathLike) -> str | None:
    """`s3` for `s3://bucket/key`, None for a local path."""
    head, sep, _ = os.fspath(uri).partition("://")
    return head.lower() if sep else None


def is_remote(uri: str | os.PathLike) -> bool:
    return uri_scheme(uri) in REMOTE_SCHEMES


def check_uri(value: str, where: str) -> str:
    """`value` if it is s3://BUCKET/..., gs://BUCKET/... or a local path.

    Otherwise ObjectStoreError, naming `where` and the spelling that works.
    """
    scheme = uri_scheme(value)
    if scheme is None:
        return value
    if scheme == "minio":
        rest = value.split("://", 1)[1]
        raise ObjectStoreError(
            f"{where}: {value!r}: no TensorFlow or Beam filesystem reads minio://. MinIO speaks "
            f"S3: write s3://{rest} and set the store's endpoint (object_store.endpoint, e.g. "
            "http://minio-service.kubeflow:9000)"
        )
    if scheme not in REMOTE_SCHEMES:
        raise ObjectStoreError(
            f"{where}: {value!r}: scheme {scheme}:// is not supported; use s3:// (AWS S3, MinIO "
            "or another S3-compatible store), gs:// or a local path"
        )
    bucket = bucket_of(value)
    if not bucket:
        raise ObjectStoreError(f"{where}: {value!r} names no bucket ({scheme}://BUCKET/PATH)")
    return value


def bucket_of(uri: str) -> str:
    return uri.split("://", 1)[1].split("/", 1)[0]


def client_environment(
    *, region: str, endpoint: str | None = None, ca_file: str | None = None
) -> dict[str, str]:
    """The environment that points TensorFlow's and Beam's S3 clients at one store.

    Credentials are not here: they come from a secret (CREDENTIAL_VARIABLES)
    or from the pod's identity.
    """
    env = {
        # tensorflow-io reads AWS_REGION; boto3 reads AWS_DEFAULT_REGION.
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
    }
    if endpoint:
        # tensorflow-io takes the scheme from the endpoint (http:// for a
        # plain-HTTP MinIO) and addresses buckets path-style, as MinIO needs.
        env["S3_ENDPOINT"] = endpoint
        # boto3 (Beam's S3 filesystem) reads the service-specific endpoint.
        env["AWS_ENDPOINT_URL_S3"] = endpoint
    if ca_file:
        env["S3_CA_FILE"] = ca_file
        env["AWS_CA_BUNDLE"] = ca_file
    return env


def beam_s3_options(
    *, region: str, endpoint: str | None = None, ca_file: str | None = None
) -> dict[str, str]:
    """Beam's S3Options for one store: what a worker elsewhere gets with the pipeline.

    SDK workers beside a Flink, Spark or Dataflow job build their boto3 client
    from these; credentials stay out (they would be written into the spec) and
    come from the workers' own environment or identity.
    """
    options = {"s3_region_name": region}
    if endpoint:
        options["s3_endpoint_url"] = endpoint
    if ca_file:
        # boto3's `verify` takes a CA bundle path.
        options["s3_verify"] = ca_file
    return options


def register_filesystems() -> None:
    """Makes s3:// (and tensorflow-io's other schemes) readable by TensorFlow in this process.

    Importing tensorflow_io registers its filesystem plugins with TensorFlow;
    a second call does nothing. Call it before the first file access.
    """
    register_tensorflow_filesystems()


def s3_used() -> bool:
    """Whether tensorflow-io's filesystems were loaded into this process."""
    return "tensorflow_io" in sys.modules


def exit_process(code: int) -> NoReturn:
    """Ends the process with `code` once its output is flushed.

    After tensorflow-io's S3 filesystem has been used, TF 2.16.2 with
    tensorflow-io 0.37.1 aborts during interpreter teardown ("pure virtual
    method called", exit 134; tensorflow/io#2039, reproduced here with a
    single gfile write). Every output is written and closed by the time a
    step or run returns, so such a process leaves through `os._exit`, which
    runs no C++ static destructors, after Python's exit handlers: TensorFlow's
    autograph deletes its generated sources from the temporary directory in
    them. TFMA imports tensorflow-io, so every local run leaves this way.
    Other processes exit normally.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    if s3_used():
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _store_name(bucket: str) -> str:
    """The store and bucket this process reaches, as its environment configures them."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3")
    region = os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION")
    where = endpoint or f"AWS S3 (region {region or 'unset'})"
    return f"object store {where}, bucket {bucket!r}"


def check_reachable(uris: Iterable[str]) -> None:
    """Lists one key of every S3 bucket in `uris`, under the first of its URIs' keys;
    ObjectStoreError naming the store if that fails.

    TensorFlow's S3 client waits on an endpoint that accepts connections and
    never answers (still waiting after 240 s here), and answers a refused
    credential with "does not exist" (`gfile.exists` is False: a step that
    looks for the served model would find none). This check fails in seconds
    with the endpoint, the bucket and the reason.
    """
    # One key prefix of each bucket to list under: a store may let these credentials list
    # only under some prefixes. SeaweedFS 4.00, which the Kubeflow platform runs, checks a
    # list against the `prefix` it asks for (weed/s3api/auth_credentials.go L484-495, the
    # prefix read with a leading "/": s3_constants/header.go L145-153), so a profile
    # namespace's key, allowed under `mlpipeline/private-artifacts/<namespace>/` only
    # (canDo, auth_credentials.go L523-567), is refused a list of the whole bucket.
    prefixes: dict[str, str] = {}
    for uri in sorted(u for u in uris if uri_scheme(u) == "s3"):
        prefixes.setdefault(bucket_of(uri), uri.split("://", 1)[1].partition("/")[2])
    if not prefixes:
        return
    from botocore.exceptions import BotoCoreError, ClientError

    client = s3_client()
    for bucket, prefix in prefixes.items():
        store = _store_name(bucket)
        try:
            client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
        except ClientError as err:
            error = err.response.get("Error", {})
            code = error.get("Code", "?")
            hint = _CLIENT_ERROR_HINTS.get(code, "")
            message = str(error.get("Message", err)).rstrip(".")
            raise ObjectStoreError(f"{store}: refused with {code}: {message}{hint}") from None
        except BotoCoreError as err:
            raise ObjectStoreError(
                f"{store}: no answer ({type(err).__name__}: {err}) after "
                f"{store_files.MAX_ATTEMPTS} attempts ({store_files.CONNECT_TIMEOUT_S} s to "
                f"connect, {store_files.READ_TIMEOUT_S} s to read). Check the "
                "endpoint (object_store.endpoint; AWS_ENDPOINT_URL_S3 and S3_ENDPOINT in a step) "
                "and that the store is reachable from here"
            ) from None
        _LOG.info("%s: reachable", store)


def remove_folder_markers(uris: Iterable[str]) -> list[str]:
    """Deletes the folder markers under each s3:// and gs:// prefix in `uris`; returns the URIs
    removed.

    A folder marker is a zero-byte object whose name ends in "/". KFP's
    launcher cannot download an input that holds one (kubeflow/pipelines#13476;
    docs/object-stores.md, "Inputs the launcher downloads"), so a downstream
    step would fail before it starts. tensorflow-io 0.37.1 can leave one on S3
    wherever `tf.io.gfile` creates a directory that already exists: its
    CreateDir writes the marker exactly when the path exists (s3_filesystem.cc
    L1036-1050 at v0.37.1), through a file whose `sync_needed` flag is never
    initialized (L375, constructor L377-396), so whether Close uploads the
    empty object (Sync, L439) depends on what memory held. Not reproducible
    on demand; seen once in this project's executed S3 tests. TensorFlow's
    own GCS filesystem writes one for every directory it creates
    (tsl/platform/cloud/gcs_file_system.cc, GcsFileSystem::CreateDir: "Create
    a zero-length directory marker object"). Other objects, empty files
    included, are kept. Local paths are skipped.
    """
    prefixes = sorted({u.rstrip("/") + "/" for u in uris if is_remote(u)})
    s3 = [p for p in prefixes if uri_scheme(p) == "s3"]
    gs = [p for p in prefixes if uri_scheme(p) == "gs"]
    return _remove_s3_folder_markers(s3) + _remove_gcs_folder_markers(gs)


def _remove_s3_folder_markers(prefixes: list[str]) -> list[str]:
    if not prefixes:
        return []
    from botocore.exceptions import BotoCoreError, ClientError

    client = s3_client()
    removed = []
    for prefix in prefixes:
        bucket, _, key_prefix = prefix[len("s3://") :].partition("/")
        try:
            removed += _remove_markers(client, bucket, key_prefix)
        except (BotoCoreError, ClientError) as err:
            raise ObjectStoreError(f"{_store_name(bucket)}: {prefix}: {err}") from None
    return removed


def _remove_gcs_folder_markers(prefixes: list[str]) -> list[str]:
    """The same sweep on GCS, through google-cloud-storage (apache-beam[gcp] brings it),
    with the credentials the process has (a pod's workload identity, say)."""
    if not prefixes:
        return []
    from google.api_core.exceptions import GoogleAPICallError
    from google.auth.exceptions import GoogleAuthError
    from google.cloud import storage

    try:
        client = storage.Client()
    except GoogleAuthError as err:
        raise ObjectStoreError(f"Google Cloud Storage: no credentials: {err}") from None
    removed = []
    for prefix in prefixes:
        bucket_name, _, name_prefix = prefix[len("gs://") :].partition("/")
        try:
            markers = [
                blob
                for blob in client.list_blobs(bucket_name, prefix=name_prefix, timeout=_GCS_TIMEOUT)
                if blob.name.endswith("/") and blob.size == 0
            ]
            # A marker already gone (another attempt's sweep) is what was wanted.
            client.bucket(bucket_name).delete_blobs(
                markers, on_error=lambda _blob: None, timeout=_GCS_TIMEOUT
            )
        except (GoogleAPICallError, GoogleAuthError) as err:
            raise ObjectStoreError(
                f"Google Cloud Storage, bucket {bucket_name!r}: {prefix}: {err}"
            ) from None
        removed += [f"gs://{bucket_name}/{blob.name}" for blob in markers]
    return removed


# google-cloud-storage's (connect, read) timeouts, as bounded as the S3 client's.
_GCS_TIMEOUT = (store_files.CONNECT_TIMEOUT_S, store_files.READ_TIMEOUT_S)


def _remove_markers(client, bucket: str, key_prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key_prefix)
    markers = [
        item["Key"]
        for page in pages
        for item in page.get("Contents", [])
        if item["Key"].endswith("/") and item["Size"] == 0
    ]
    # delete_objects takes at most 1000 keys a request.
    for start in range(0, len(markers), 1000):
        batch = [{"Key": key} for key in markers[start : start + 1000]]
        answer = client.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        if answer.get("Errors"):
            failed = ", ".join(f"{e['Key']} ({e.get('Code', '?')})" for e in answer["Errors"])
            raise ObjectStoreError(f"{_store_name(bucket)}: could not delete {failed}")
    return [f"s3://{bucket}/{key}" for key in markers]


_CREDENTIALS_HINT = (
    ". Check the credentials this process gets: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
    "(on Kubeflow, the secret in object_store.credentials), or the pod's own identity"
)
_CLIENT_ERROR_HINTS = {
    "InvalidAccessKeyId": _CREDENTIALS_HINT,
    "SignatureDoesNotMatch": _CREDENTIALS_HINT,
    "AccessDenied": _CREDENTIALS_HINT + ", and that it may list and write this bucket",
    "NoSuchBucket": ". Create the bucket, or fix the path",
}


# Reads that work on local paths and object-store URIs alike. Local paths go
# through the OS directly, so a local run does not wait on TensorFlow's import
# to check its data; remote ones through tf.io.gfile.


def _gfile():
    register_filesystems()
    import tensorflow as tf

    return tf.io.gfile


def isdir(path: str | os.PathLike) -> bool:
    return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def listdir(path: str | os.PathLike) -> list[str]:
    """Entry names under `path` (directories without a trailing slash)."""
    if is_remote(path):
        return sorted(name.rstrip("/") for name in _gfile().listdir(path))
    return sorted(os.listdir(path))


def glob(pattern: str) -> list[str]:
    """Paths matching a glob pattern (`*` within one directory), sorted."""
    if is_remote(pattern):
        return sorted(_gfile().glob(pattern))
    import glob as local_glob

    return sorted(local_glob.glob(pattern))


def isfile(path: str | os.PathLike) -> bool:
    if is_remote(path):
        gfile = _gfile()
        return gfile.exists(path) and not gfile.isdir(path)
    return os.path.isfile(path)


def file_size(path: str | os.PathLike) -> int:
    path = os.fspath(path)
    return _gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def open_text(path: str | os.PathLike) -> IO[str]:
    if is_remote(path):
        return _gfile().GFile(path, "r")
    return open(path, newline="", encoding="utf-8")  # The caller closes it.


def open_binary(path: str | os.PathLike) -> IO[bytes]:
    if is_remote(path):
        return _gfile().GFile(path, "rb")
    return open(path, "rb")  # The caller closes it.


def join(base: str, name: str) -> str:
    return f"{base.rstrip('/')}/{name}" if is_remote(base) else os.path.join(base, name)
