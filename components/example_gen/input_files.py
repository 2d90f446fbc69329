"""Which files under a data root ExampleGen reads, and in which format.

Shared by the runner's check of the data root (pipeline/inputs.py), the
schema draft and ExampleGen's executor, so that all three read the same files:

- writers' leftovers are not data: Spark's and Hadoop's `_SUCCESS`,
  `_committed_*` and `_started_*` markers, `*.crc` checksums, hidden files
  (`.part-0000.crc`, `.DS_Store`) and empty files;
- the format is the dataset spec's `input.format` when it names one, else the
  files' extension (`.csv`, `.parquet`); a folder that mixes formats is
  refused, naming both;
- a span (or a data root without spans) whose files hold no row is refused
  (`holds_rows`): an exporter that wrote a 0-row file and `_SUCCESS` for a day
  would otherwise leave a run's window one span short without a word;
- partitions, not files, decide which days exist (`read_days`): a span's folder
  (`dt=2024-01-03/`) that a writer marked complete (`_SUCCESS`, `_committed_*`)
  and that holds no data file is an empty day, refused as a 0-row file is; one
  with no marker and no data file may be a write in progress, and is left out,
  said in one line (`left_out_line`). The rule and the writers it follows are in
  docs/parquet-and-partitions.md, "Empty partitions".

A reader per format (`READERS` in components/example_gen/read_examples.py) turns the files into
Arrow record batches; a third format is one more entry in `FORMATS` and its reader.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO

from components.example_gen.csv_header import read_header
from components.example_gen.parquet_files import values_in
from components.example_gen.spans import SpanPattern, glob_root
from contract.fields import one_line

# Format -> the file name endings it is known by.
FORMATS: dict[str, tuple[str, ...]] = {
    "csv": (".csv",),
    "parquet": (".parquet", ".parq"),
}
_LEFTOVER_PREFIXES = ("_SUCCESS", "_committed_", "_started_", "_temporary", ".")
_LEFTOVER_SUFFIXES = (".crc",)
# A writer's "this folder is complete": Hadoop's FileOutputCommitter (and Spark's
# commit protocols over it) writes `_SUCCESS` at job commit; Databricks' DBIO
# commit writes `_committed_<id>` beside the files it commits.
_COMPLETE_MARKERS = ("_SUCCESS", "_committed_")


class InputFormatError(ValueError):
    """The files to read are in no format, or in several; the message names them."""


def is_leftover(path: str) -> bool:
    """A writer's marker, checksum or hidden file: never data (module doc)."""
    name = posixpath.basename(path.rstrip("/"))
    return name.startswith(_LEFTOVER_PREFIXES) or name.endswith(_LEFTOVER_SUFFIXES)


def data_files(paths: Iterable[str], size: Callable[[str], int]) -> list[str]:
    """`paths` without writers' leftovers and empty files (`size`: the filesystem's)."""
    return [p for p in paths if not is_leftover(p) and size(p) > 0]


def format_of_path(path: str) -> str | None:
    lowered = path.lower()
    for name, endings in FORMATS.items():
        if lowered.endswith(endings):
            return name
    return None


def input_format(files: Iterable[str], declared: str | None = None) -> str:
    """The one format `files` are read in: `declared` (the spec's `input.format`), or the
    one their extensions name; InputFormatError for a mix, or for files in none."""
    files = list(files)
    if declared is not None:
        if declared not in FORMATS:
            raise InputFormatError(f"input format {declared!r} is not one of {', '.join(FORMATS)}")
        return declared
    by_format: dict[str, list[str]] = {}
    unknown = []
    for path in files:
        found = format_of_path(path)
        if found is None:
            unknown.append(path)
        else:
            by_format.setdefault(found, []).append(path)
    if len(by_format) > 1:
        (a, a_files), (b, b_files) = sorted(by_format.items())[:2]
        raise InputFormatError(
            f"the files read mix formats: {a} ({a_files[0]}) and {b} ({b_files[0]}); "
            "keep one format per data root (or per span pattern: input.pattern)"
        )
    if unknown:
        raise InputFormatError(
            f"files that are neither CSV nor Parquet: {', '.join(unknown[:3])}; name them "
            "*.csv or *.parquet, move them out of the data root, or set input.format in the "
            "dataset spec"
        )
    if not by_format:
        raise InputFormatError("there are no files to read")
    return next(iter(by_format))


def holds_rows(
    files: Iterable[str], read_format: str, open_binary: Callable[[str], IO[bytes]]
) -> bool:
    """Whether any of `files` holds a row: a Parquet footer's count (no rows read), a CSV
    row after the header. `files`: data files (`data_files`), in `read_format`."""
    if read_format == "parquet":
        return any(values_in(path, open_binary) > 0 for path in files)
    return any(read_header(path, open_binary).has_rows for path in files)


def no_rows_message(where: str, files: list[str]) -> str:
    """The one line a run stops with when `where` (a span, or the data root) holds no row."""
    return (
        f"{where} holds no rows: {', '.join(files[:3])} ha{'s' if len(files) == 1 else 've'} "
        "0 rows (a writer's _SUCCESS beside an empty export is still empty); a run never "
        "reads fewer rows than asked without saying so: remove the empty partition, or write "
        "its rows, then run again"
    )


@dataclass(frozen=True)
class Partition:
    """One span's folder under the data root (`dt=2024-01-03`), as its listing shows it."""

    folder: str  # relative to the data root
    span: int
    version: int | None
    marker: str | None  # the writer's completion marker in it (`_SUCCESS`), if any
    holds_data: bool  # a data file the input pattern matches


@dataclass(frozen=True)
class Days:
    """What the partitions say of a run's window: the empty days in it (refused) and the
    unmarked empty folders left out (a write in progress), each oldest first."""

    empty: tuple[Partition, ...] = ()
    left_out: tuple[Partition, ...] = ()


def partitions(
    pattern: SpanPattern, root: str, glob: Callable[[str], Iterable[str]]
) -> list[Partition]:
    """The span folders under `root` (`glob`: the filesystem's), oldest first; none when
    the input pattern names its spans by file, not by folder (`SpanPattern.folder`)."""
    folder_pattern = pattern.folder()
    if folder_pattern is None:
        return []
    base = root.rstrip("/")
    folders = set(folder_pattern.relative_matches(base, glob))
    entries = [p[len(base) + 1 :] for p in glob(f"{glob_root(base)}/{folder_pattern.glob()}/*")]
    markers: dict[str, str] = {}
    with_data: set[str] = set()
    for entry in entries:
        folder, name = posixpath.split(entry)
        folders.add(folder)
        if name.startswith(_COMPLETE_MARKERS):
            markers.setdefault(folder, name)
        elif not is_leftover(entry) and pattern.match(entry) is not None:
            with_data.add(folder)
    found = []
    for folder in folders:
        span_version = folder_pattern.match(folder)
        if span_version is not None:
            found.append(Partition(folder, *span_version, markers.get(folder), folder in with_data))
    return sorted(found, key=lambda p: (p.span, -1 if p.version is None else p.version))


def read_days(
    pattern: SpanPattern, root: str, glob: Callable[[str], Iterable[str]], count: int
) -> Days:
    """The empty days among the newest `count` days under `root` and the folders left out.

    A day is a span with a data file or a marked folder; of a span's folders, the newest
    version with data or a marker is the day's (an unmarked empty one is left out). The
    data files' spans are TFX's (components/example_gen/span_resolution.py resolves them): this only
    adds the days they miss, so where every day holds a file nothing changes.
    """
    by_span: dict[int, list[Partition]] = {}
    for partition in partitions(pattern, root, glob):
        by_span.setdefault(partition.span, []).append(partition)
    days: dict[int, Partition] = {}
    unmarked: list[Partition] = []
    for span, folders in by_span.items():
        counted = [p for p in folders if p.holds_data or p.marker]
        unmarked += [p for p in folders if not p.holds_data and not p.marker]
        if counted:
            days[span] = counted[-1]
    window = sorted(days)[-count:]
    if not window:
        return Days(left_out=tuple(unmarked))
    return Days(
        empty=tuple(days[s] for s in window if not days[s].holds_data),
        left_out=tuple(p for p in unmarked if p.span >= window[0]),
    )


def empty_day_message(where: str, partition: Partition) -> str:
    """The one line a run stops with when a day in its window is a marked, empty folder."""
    return (
        f"span {partition.span} ({partition.folder}) under {where} holds no rows: it has the "
        f"writer's {partition.marker} and no data file, so the day was written complete and "
        "empty; a run never reads fewer days than asked without saying so: write the day's "
        "rows, or remove the partition, then run again"
    )


def left_out_line(where: str, left_out: Iterable[Partition]) -> str:
    """The one line a run, a draft or a scoring says of the unmarked empty folders it left
    out; "" when there are none."""
    # Folder names are the data's: one printable line whatever they hold (a newline, a
    # terminal's escape sequence); the HTML report escapes what is left.
    folders = [one_line(p.folder) for p in left_out]
    if not folders:
        return ""
    return (
        f"left out {', '.join(folders)} under {one_line(where)}: no data file and no writer's "
        "marker (_SUCCESS, _committed_*), so a write in progress; not read as a day"
    )
