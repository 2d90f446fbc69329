"""File access on local paths and s3:// without TensorFlow, for the steps that start light.

TFX's `fileio` reaches every path through TensorFlow's `tf.io.gfile` (tfx
1.16, `dsl/io/fileio.py`, line 23, whose `plugins/tensorflow_gfile.py`,
line 23, imports TensorFlow), and s3:// only once tensorflow-io is loaded
(pipeline/object_store.py). A step that writes a status page or a record of
its attempt should not load either, so these functions take local paths
through the OS and s3:// through boto3, the client the reachability check
already uses. Any other scheme (gs://) goes through TFX's `fileio`, which
loads TensorFlow: the light steps are light on local paths and S3.

The names follow `fileio`'s (`exists`, `isdir`, `listdir`, `glob`, `stat`, `open`,
`remove`, `rmtree`), so a module moves from one to the other by its import.

Port register: docs/ports.md
"""

from __future__ import annotations

import builtins
import fnmatch
import io
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

# Bounded waits for every S3 request: a wrong endpoint fails in seconds, not minutes.
CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 15
MAX_ATTEMPTS = 3
_GLOB_CHARS = "*?["


# What configures boto3's client here: the store, its credentials and its certificates. A
# client is made once per set of their values; any change (a test's store, a rotated key in
# the environment) makes a new one.
_CLIENT_ENVIRONMENT = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_CA_BUNDLE",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)
_clients: dict[tuple[str | None, ...], Any] = {}


def s3_client():
    """A boto3 S3 client with the bounded waits above, configured by the environment as it is
    now. Making one takes about a tenth of a second, and a step reading a serving directory
    asks for one per request: one client per configuration, kept for the process."""
    configuration = tuple(os.environ.get(name) for name in _CLIENT_ENVIRONMENT)
    client = _clients.get(configuration)
    if client is None:
        client = _clients[configuration] = _new_s3_client()
    return client


def _new_s3_client():
    """A session of its own: boto3's default session keeps the first credentials it read."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3",
        config=Config(
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
        ),
    )


def _scheme(path: str) -> str | None:
    head, sep, _ = path.partition("://")
    return head.lower() if sep else None


def register_tensorflow_filesystems() -> None:
    """Makes s3:// readable by TensorFlow in this process (tensorflow-io's plugins), for a
    reader that hands a path to TensorFlow itself; a second call does nothing. Loads
    TensorFlow: a light step calls it only where it reads with TensorFlow."""
    import tensorflow_io  # noqa: F401  (imported for its registration)


def _fileio():
    """TFX's fileio, for a scheme this module does not reach itself (it loads TensorFlow)."""
    register_tensorflow_filesystems()
    from tfx.dsl.io import fileio

    return fileio


def _split(path: str) -> tuple[str, str]:
    bucket, _, key = path[len("s3://") :].partition("/")
    return bucket, key


def _s3_keys(bucket: str, prefix: str, delimiter: str = "") -> tuple[list[str], list[str]]:
    """(keys, common prefixes) under `prefix`."""
    paginator = s3_client().get_paginator("list_objects_v2")
    options = {
        "Bucket": bucket,
        "Prefix": prefix,
        **({"Delimiter": delimiter} if delimiter else {}),
    }
    keys, prefixes = [], []
    for page in paginator.paginate(**options):
        keys += [item["Key"] for item in page.get("Contents", [])]
        prefixes += [item["Prefix"] for item in page.get("CommonPrefixes", [])]
    return keys, prefixes


def _s3_isfile(bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    if not key or key.endswith("/"):
        return False
    try:
        s3_client().head_object(Bucket=bucket, Key=key)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


def _s3_isdir(bucket: str, key: str) -> bool:
    prefix = key.rstrip("/") + "/" if key.rstrip("/") else ""
    answer = s3_client().list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    return bool(answer.get("KeyCount") or answer.get("Contents"))


def _by_scheme(path: str, local: Callable, s3: Callable, other: Callable) -> Any:
    """`local(path)` for a local path, `s3(bucket, key)` for s3://, else `other(path)`."""
    path = os.fspath(path)
    scheme = _scheme(path)
    if scheme is None:
        return local(path)
    if scheme == "s3":
        return s3(*_split(path))
    return other(path)


def isdir(path: str) -> bool:
    return _by_scheme(path, os.path.isdir, _s3_isdir, lambda p: _fileio().isdir(p))


def exists(path: str) -> bool:
    return _by_scheme(
        path,
        os.path.exists,
        lambda bucket, key: _s3_isfile(bucket, key) or _s3_isdir(bucket, key),
        lambda p: _fileio().exists(p),
    )


def listdir(path: str) -> list[str]:
    """Entry names under `path` (directories without a trailing slash), sorted."""
    path = os.fspath(path)
    scheme = _scheme(path)
    if scheme is None:
        return sorted(os.listdir(path))
    if scheme == "s3":
        bucket, key = _split(path)
        prefix = key.rstrip("/") + "/" if key.rstrip("/") else ""
        keys, prefixes = _s3_keys(bucket, prefix, delimiter="/")
        names = {k[len(prefix) :] for k in keys} | {p[len(prefix) :].rstrip("/") for p in prefixes}
        return sorted(n for n in names if n)
    return sorted(name.rstrip("/") for name in _fileio().listdir(path))


def _local_glob(pattern: str) -> list[str]:
    """`pattern` matched segment by segment, as TensorFlow matches a local glob: its
    `FileSystem::Match` is `fnmatch(pattern, path, FNM_PATHNAME)` (tsl/platform/
    file_system.cc), without FNM_PERIOD, so `*` matches a name starting with a dot, which
    Python's `glob` skips; the S3 listing below hides no name either."""
    head, *segments = pattern.split("/")
    found = ["/" if head == "" else head]
    if any(c in head for c in _GLOB_CHARS):  # A relative pattern, a wildcard first.
        found, segments = ["."], [head, *segments]
    for segment in segments:
        if not segment:  # A trailing or doubled slash.
            continue
        matched = []
        for parent in found:
            if not any(c in segment for c in _GLOB_CHARS):
                matched.append(os.path.join(parent, segment))
            elif os.path.isdir(parent):
                names = os.listdir(parent)
                matched += [
                    os.path.join(parent, n) for n in names if fnmatch.fnmatchcase(n, segment)
                ]
        found = matched
    return sorted(
        os.path.normpath(p) if p.startswith("./") else p for p in found if os.path.lexists(p)
    )


def glob(pattern: str) -> list[str]:
    """Paths matching `pattern`, whose `*`, `?` and `[...]` match within one path segment,
    hidden names included (as TensorFlow's and TFX's `fileio.glob`)."""
    scheme = _scheme(pattern)
    if scheme is None:
        return _local_glob(os.fspath(pattern))
    if scheme != "s3":
        return sorted(_fileio().glob(pattern))
    bucket, key_pattern = _split(pattern)
    segments = key_pattern.split("/")
    fixed = []
    for segment in segments:
        if any(c in segment for c in _GLOB_CHARS):
            break
        fixed.append(segment)
    if len(fixed) == len(segments):  # No wildcard: the path itself, if it is there.
        return [pattern] if exists(pattern) else []
    keys, _ = _s3_keys(bucket, "/".join(fixed) + "/" if fixed else "")
    found = set()
    for key in keys:
        parts = key.split("/")
        if len(parts) < len(segments):
            continue
        # A match may be a "directory": the key's first segments.
        head = parts[: len(segments)]
        if all(fnmatch.fnmatchcase(p, s) for p, s in zip(head, segments, strict=True)):
            found.add(f"s3://{bucket}/{'/'.join(head)}")
    return sorted(found)


@dataclass(frozen=True)
class FileStat:
    """What TFX's `fileio.stat` gives (`StatResult`): the size and the modification time."""

    length: int
    mtime_nsec: int


def _local_stat(path: str) -> FileStat:
    # TensorFlow's PosixFileSystem::Stat (tsl/platform/default/posix_file_system.cc): the
    # length is st_size, the time `st_mtime * 1e9`, whole seconds.
    found = os.stat(path)
    return FileStat(length=found.st_size, mtime_nsec=found.st_mtime_ns // 10**9 * 10**9)


def _s3_stat(bucket: str, key: str) -> FileStat:
    # tensorflow-io's S3 file system, `Stat` (tensorflow_io/core/filesystems/s3/
    # s3_filesystem.cc): HeadObject's ContentLength, and LastModified in milliseconds * 1e6.
    answer = s3_client().head_object(Bucket=bucket, Key=key)
    millis = round(answer["LastModified"].timestamp() * 1000)
    return FileStat(length=int(answer["ContentLength"]), mtime_nsec=millis * 10**6)


def _other_stat(path: str) -> FileStat:
    found = _fileio().stat(path)
    return FileStat(length=int(found.length), mtime_nsec=int(found.mtime_nsec))


def stat(path: str) -> FileStat:
    """A file's size and modification time, as TFX's `fileio.stat` gives them."""
    return _by_scheme(path, _local_stat, _s3_stat, _other_stat)


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """(directory, its subdirectory names, its file names) for `top` and every directory
    under it, as `os.walk` gives them; on S3 the directories are the keys' prefixes."""
    top = os.fspath(top)
    scheme = _scheme(top)
    if scheme is None:
        yield from os.walk(top)
        return
    if scheme != "s3":
        yield from _fileio().walk(top)
        return
    bucket, key = _split(top)
    prefix = key.rstrip("/") + "/" if key.rstrip("/") else ""
    keys, _ = _s3_keys(bucket, prefix)
    tree: dict[str, tuple[set[str], list[str]]] = {"": (set(), [])}
    for found in keys:
        *parents, name = found[len(prefix) :].split("/")
        for depth in range(len(parents)):
            parent, child = "/".join(parents[:depth]), parents[depth]
            tree.setdefault(parent, (set(), []))[0].add(child)
            tree.setdefault("/".join(parents[: depth + 1]), (set(), []))
        if name:  # A folder marker ("dir/") names no file.
            tree["/".join(parents)][1].append(name)
    base = top.rstrip("/")
    for relative in sorted(tree):
        subdirs, files = tree[relative]
        yield (f"{base}/{relative}" if relative else top, sorted(subdirs), sorted(files))


def open(path: str, mode: str = "r") -> IO[Any]:
    """A file to read (`r`, `rb`) or write (`w`, `wb`; written when closed, on S3)."""
    path = os.fspath(path)
    scheme = _scheme(path)
    if scheme is None:
        if "w" in mode:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        if "b" in mode:
            return builtins.open(path, mode)
        return builtins.open(path, mode, encoding="utf-8")
    if scheme != "s3":
        return _fileio().open(path, mode)
    bucket, key = _split(path)
    if "w" in mode:
        return _S3Writer(bucket, key, binary="b" in mode)
    from botocore.exceptions import ClientError

    try:
        body = s3_client().get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            raise FileNotFoundError(path) from None
        raise
    return io.BytesIO(body) if "b" in mode else io.StringIO(body.decode("utf-8"))


class _S3Writer(io.BytesIO):
    """An S3 object written in one request when the file is closed."""

    def __init__(self, bucket: str, key: str, binary: bool) -> None:
        super().__init__()
        self._bucket, self._key, self._binary = bucket, key, binary

    def write(self, data) -> int:
        return super().write(data if self._binary else data.encode("utf-8"))

    def close(self) -> None:
        if not self.closed:
            s3_client().put_object(Bucket=self._bucket, Key=self._key, Body=self.getvalue())
        super().close()


def write_text(path: str, text: str) -> None:
    """Writes `text` at `path` (parents created), as TFX's `io_utils.write_string_file` does."""
    with open(path, "w") as f:
        f.write(text)


def read_text(path: str) -> str:
    with open(path, "r") as f:
        return f.read()


def read_bytes(path: str) -> bytes:
    """A file's bytes, FileNotFoundError naming it when it is missing (TFX's
    `io_utils.read_bytes_file`, tfx 1.16 utils/io_utils.py, lines 231-236)."""
    if not exists(path):
        raise FileNotFoundError(f"{path} does not exist")
    with open(path, "rb") as f:
        return f.read()


def only_file_in(directory: str) -> str:
    """The path of the one entry of `directory` (TFX's `io_utils.get_only_uri_in_dir`,
    utils/io_utils.py, lines 120-128: any other count is an error)."""
    names = listdir(directory)
    if len(names) != 1:
        raise RuntimeError(f"Only one file per dir is supported: {directory}.")
    return os.path.join(directory, os.path.dirname(os.path.join(names[0], "")))


def parse_pbtxt_file(path: str, message):
    """`message` parsed from the text-format proto at `path`, and returned (TFX's
    `io_utils.parse_pbtxt_file`, utils/io_utils.py, lines 177-181)."""
    from google.protobuf import text_format

    text_format.Parse(read_text(path), message)
    return message


def remove(path: str) -> None:
    _by_scheme(
        path,
        os.remove,
        lambda bucket, key: s3_client().delete_object(Bucket=bucket, Key=key),
        lambda p: _fileio().remove(p),
    )


def _s3_rmtree(bucket: str, key: str) -> None:
    keys, _ = _s3_keys(bucket, key.rstrip("/") + "/")
    client = s3_client()
    # delete_objects takes at most 1000 keys a request, and answers 200 even when some
    # were not deleted: those come back under Errors (quiet mode lists only them).
    for start in range(0, len(keys), 1000):
        batch = [{"Key": k} for k in keys[start : start + 1000]]
        answer = client.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        if answer.get("Errors"):
            first = answer["Errors"][0]
            raise OSError(
                f"could not delete s3://{bucket}/{first.get('Key')}: {first.get('Code')}: "
                f"{first.get('Message', '')} ({len(answer['Errors'])} of {len(batch)} keys "
                "in this request not deleted)"
            )


def rmtree(path: str) -> None:
    """Removes a directory and everything under it."""
    _by_scheme(path, shutil.rmtree, _s3_rmtree, lambda p: _fileio().rmtree(p))


def _copy_file(src: str, dst: str) -> None:
    """`fileio.copy(src, dst)` (tfx 1.16, dsl/io/fileio.py): S3 to S3 in the store itself,
    local to local through the OS, anything else read and written."""
    if _scheme(src) == _scheme(dst) == "s3":
        (src_bucket, src_key), (dst_bucket, dst_key) = _split(src), _split(dst)
        s3_client().copy_object(
            Bucket=dst_bucket, Key=dst_key, CopySource={"Bucket": src_bucket, "Key": src_key}
        )
    elif _scheme(src) is None and _scheme(dst) is None:
        shutil.copyfile(src, dst)
    else:
        with open(src, "rb") as source, open(dst, "wb") as target:
            shutil.copyfileobj(source, target)


def _makedirs(path: str) -> None:
    """`fileio.makedirs`: a local directory. Nothing on S3, whose directories are prefixes:
    tensorflow-io 0.37.1's CreateDir writes no object for a directory that is not there
    (s3_filesystem.cc L1036-1050 at v0.37.1; pipeline/object_store.py,
    `remove_folder_markers`, on the marker it can leave for one that is)."""
    _by_scheme(
        path,
        lambda p: os.makedirs(p, exist_ok=True),
        lambda _bucket, _key: None,
        lambda p: _fileio().makedirs(p),
    )


def copy_file(src: str, dst: str) -> None:
    """Copies the file `src` to `dst`, its directory made, as TFX's `io_utils.copy_file` does
    without `overwrite` (tfx 1.16, utils/io_utils.py, lines 49-56): an existing `dst` is an
    error (`fileio.copy` with `overwrite=False`)."""
    if exists(dst):
        raise FileExistsError(f"{dst} exists: not overwritten")
    _makedirs(os.path.dirname(os.fspath(dst)))
    _copy_file(src, dst)


def copy_dir(src: str, dst: str, deny_regex_patterns: Iterable[str] = ()) -> None:
    """Copies the directory `src` to `dst` as TFX's `io_utils.copy_dir` does (tfx 1.16,
    utils/io_utils.py, lines 59-116): `dst` emptied first (lines 96-98), every file under
    `src` whose full path no pattern of `deny_regex_patterns` finds (`re.search`, lines 84-94)
    copied to the same relative path, and every directory under it that no pattern finds
    made, empty ones included (lines 100-116: a directory when a file is copied into it, and
    each subdirectory)."""
    denied = [re.compile(p) for p in deny_regex_patterns]

    def should_copy(path: str) -> bool:  # Lines 87-94, without an allow list.
        return not any(p.search(path) for p in denied)

    src, dst = os.fspath(src).rstrip("/"), os.fspath(dst).rstrip("/")
    if exists(dst):
        rmtree(dst)
    _makedirs(dst)
    # The directories made so far: TFX asks `fileio.isdir` (line 103), which on S3 answers
    # False for a directory with nothing in it yet; every directory this copy made is one
    # of these, as `dst` was emptied first.
    made = {dst}
    for dir_name, sub_dirs, leaf_files in walk(src):
        new_dir_name = dir_name.replace(src, dst, 1)
        for leaf_file in leaf_files:
            if should_copy(os.path.join(dir_name, leaf_file)):
                if new_dir_name not in made:  # Lines 108-113.
                    _makedirs(new_dir_name)
                    made.add(new_dir_name)
                _copy_file(os.path.join(dir_name, leaf_file), os.path.join(new_dir_name, leaf_file))
        for sub_dir in sub_dirs:  # Lines 115-116.
            if should_copy(os.path.join(dir_name, sub_dir)):
                _makedirs(os.path.join(new_dir_name, sub_dir))
                made.add(os.path.join(new_dir_name, sub_dir))
