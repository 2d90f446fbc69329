"""Where scores go, and how a partition is committed exactly once.

    OUTPUT_DIR/span=<span>/version=<model version>/part-*.parquet (or .csv)
                                                  /_errors.csv
                                                  /_SUCCESS    (the manifest, JSON, last)
    OUTPUT_DIR/_temporary/span=<span>/version=<model version>/<attempt>/...
                                                  (a run in progress, or killed)

A run writes its partition under `_temporary/`, then moves it into place and
writes `_SUCCESS` last, as Spark's output committers and Beam's
`FileBasedSink` do. A partition without `_SUCCESS` is not complete, whatever
files it holds: a killed run leaves nothing that looks complete. A rerun with
the same input fingerprint and model digest finds the manifest and does
nothing; with other input (the span rewritten) it replaces the partition. A
new model version is another partition, and the old one stays.

A run that finishes with a partition (committed, or found already complete)
removes every attempt of that partition under `_temporary/`: killed attempts
would otherwise stay for good. Attempts of other partitions are left alone,
since another run may be writing them. As Hadoop's `FileOutputCommitter`
deletes its `_temporary/` at job commit, this assumes one run per partition at
a time (a schedule's `max_concurrency: 1`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from components import store_files

SUCCESS_FILE = "_SUCCESS"
TEMPORARY_DIR = "_temporary"
# Underscored, as _SUCCESS: readers of the directory (pyarrow, pandas, Spark) skip it.
ERRORS_FILE = "_errors.csv"
PART_PREFIX = "part"
FORMATS = ("parquet", "csv")
# The manifest's own format; a reader refuses another.
MANIFEST_FORMAT = 1
# The manifest's copy in the BatchScorer's `scores` artifact.
MANIFEST_FILE = "manifest.json"
# How many duplicate keys a refusal lists.
DUPLICATES_LISTED = 5


class ScoredOutputError(RuntimeError):
    """The scores cannot be committed: duplicate keys, or too many rows that failed.

    `attempt`: the uncommitted attempt's directory, where one was written (the
    scoring report reads its counts and reasons from it). The message names
    it too, so that a report built from the error's text alone (Kubeflow's,
    from the step's record) finds it: `attempt_named_in`.
    """

    attempt: str | None = None

    def __str__(self) -> str:
        message = super().__str__()
        return f"{message} ({UNCOMMITTED_IN}{self.attempt})" if self.attempt else message


UNCOMMITTED_IN = "the uncommitted scores: "


def attempt_named_in(error: str) -> str | None:
    """The attempt directory a ScoredOutputError's message names, or None."""
    _, found, rest = error.rpartition(f"({UNCOMMITTED_IN}")
    return rest.rsplit(")", 1)[0] if found and ")" in rest else None


@dataclass(frozen=True)
class Manifest:
    """What `_SUCCESS` records: the partition's counts, input and model."""

    span: int
    model_version: str
    model_digest: str
    input_fingerprint: str
    rows: int
    errors: int
    keys: tuple[str, ...]
    format: str
    files: tuple[str, ...]
    manifest_format: int = MANIFEST_FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        values = json.loads(text)
        values["keys"] = tuple(values["keys"])
        values["files"] = tuple(values["files"])
        return cls(**values)

    def same_scores(self, other: Manifest) -> bool:
        """Same input, same model, same output settings: the partition already holds these."""
        return (self.input_fingerprint, self.model_digest, self.keys, self.format) == (
            other.input_fingerprint,
            other.model_digest,
            other.keys,
            other.format,
        )


def partition_dir(output_dir: str, span: int, model_version: str) -> str:
    return os.path.join(output_dir, f"span={span}", f"version={model_version}")


def version_of(directory: str) -> str | None:
    """The model version of a partition or an attempt at one, from its path; None if none."""
    parts = directory.rstrip("/").split("/")
    found = [p.removeprefix("version=") for p in parts if p.startswith("version=")]
    return found[-1] if found else None


def attempts_dir(output_dir: str, span: int, model_version: str) -> str:
    """Where the attempts at one partition write, each in a folder of its own."""
    return os.path.join(output_dir, TEMPORARY_DIR, f"span={span}", f"version={model_version}")


def temporary_dir(output_dir: str, span: int, model_version: str) -> str:
    """A fresh place for one attempt's files, never read as output."""
    return os.path.join(attempts_dir(output_dir, span, model_version), uuid.uuid4().hex)


def remove_attempts(output_dir: str, span: int, model_version: str) -> None:
    """Removes what attempts at the partition left under `_temporary/` (killed ones, once
    the partition is complete), then `_temporary/` itself when nothing else is in it."""
    from tfx.dsl.io import fileio  # The scorer writes; it has loaded TensorFlow.

    attempts = attempts_dir(output_dir, span, model_version)
    if fileio.exists(attempts):
        fileio.rmtree(attempts)
    for parent in (os.path.dirname(attempts), os.path.join(output_dir, TEMPORARY_DIR)):
        if fileio.exists(parent) and not fileio.listdir(parent):
            fileio.rmtree(parent)


def read_manifest(partition: str) -> Manifest | None:
    """The partition's manifest; None when it has none (not complete, or never written)."""
    path = os.path.join(partition, SUCCESS_FILE)
    if not store_files.exists(path):
        return None
    with store_files.open(path, "r") as f:
        return Manifest.from_json(f.read())


def commit(temporary: str, partition: str, manifest: Manifest) -> None:
    """Moves `temporary` to `partition` (replacing what was there) and writes `_SUCCESS` last.

    The old manifest goes first, so that from that moment no reader takes the
    old partition for complete; the new one is written only once every file is
    in place.
    """
    from tfx.dsl.io import fileio  # The scorer writes; it has loaded TensorFlow.

    if fileio.exists(partition):
        old = os.path.join(partition, SUCCESS_FILE)
        if fileio.exists(old):
            fileio.remove(old)
        fileio.rmtree(partition)
    fileio.makedirs(os.path.dirname(partition))
    fileio.rename(temporary, partition)
    with fileio.open(os.path.join(partition, SUCCESS_FILE + ".tmp"), "w") as f:
        f.write(manifest.to_json())
    fileio.rename(
        os.path.join(partition, SUCCESS_FILE + ".tmp"), os.path.join(partition, SUCCESS_FILE)
    )


def _version_order(version: str) -> tuple[int, int | str]:
    """Model versions in push order: the Pusher's are numbers (compared as numbers)."""
    return (1, int(version)) if version.isdigit() else (0, version)


def latest_partitions(output_dir: str) -> list[str]:
    """Each span's complete partition (with `_SUCCESS`) of the newest model version, oldest
    span first: what a reader of the whole directory reads to get each key once.

    The directory keeps every version's scores of a span side by side (a new version
    never replaces an old one's), so `pyarrow.dataset` over it counts a key once per
    version, and reads partitions a killed run left without `_SUCCESS`.
    """
    found = []
    for span_name in store_files.listdir(output_dir):
        span_dir = os.path.join(output_dir, span_name.rstrip("/"))
        if not span_name.startswith("span=") or not store_files.isdir(span_dir):
            continue
        complete = [
            name.rstrip("/").removeprefix("version=")
            for name in store_files.listdir(span_dir)
            if name.startswith("version=")
            and store_files.exists(os.path.join(span_dir, name.rstrip("/"), SUCCESS_FILE))
        ]
        if complete:
            newest = max(complete, key=_version_order)
            found.append((int(span_name.rstrip("/").removeprefix("span=")), newest))
    return [partition_dir(output_dir, span, version) for span, version in sorted(found)]


def duplicate_keys(rows: Sequence[tuple[Any, ...]]) -> tuple[int, list[tuple[Any, ...]]]:
    """(how many rows repeat an earlier row's keys, the first few repeated keys in row order)."""
    seen: set[tuple[Any, ...]] = set()
    repeated: dict[tuple[Any, ...], None] = {}
    count = 0
    for row in rows:
        if row in seen:
            count += 1
            repeated.setdefault(row, None)
        else:
            seen.add(row)
    return count, list(repeated)[:DUPLICATES_LISTED]


def check_duplicate_keys(keys: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
    """ScoredOutputError naming the first few repeated keys."""
    count, first = duplicate_keys(rows)
    if count:
        shown = ", ".join(
            "(" + ", ".join(f"{k}={v!r}" for k, v in zip(keys, row, strict=True)) + ")"
            for row in first
        )
        raise ScoredOutputError(
            f"{count} row(s) repeat a key ({', '.join(keys)}), e.g. {shown}; make the keys "
            "unique in the data, or pass --allow-duplicate-keys"
        )


def check_error_share(errors: int, rows: int, max_share: float, reasons: Mapping[str, int]) -> None:
    """ScoredOutputError when more than `max_share` of the input rows could not be scored."""
    total = errors + rows
    if total and errors / total > max_share:
        common = ", ".join(
            f"{reason} ({n})" for reason, n in sorted(reasons.items(), key=lambda r: -r[1])[:3]
        )
        raise ScoredOutputError(
            f"{errors} of {total} rows ({errors / total:.2%}) could not be scored, over the "
            f"allowed share {max_share:.2%} (--max-error-share); most common: {common}"
        )
