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
  would otherwise leave a run's window one span short without a word.

A reader per format (`READERS` in components/read_examples.py) turns the files into
Arrow record batches; a third format is one more entry in `FORMATS` and its reader.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from typing import IO

from components.csv_header import read_header
from components.parquet_columns import footer_schema, values_in

# Format -> the file name endings it is known by.
FORMATS: dict[str, tuple[str, ...]] = {
    "csv": (".csv",),
    "parquet": (".parquet", ".parq"),
}
_LEFTOVER_PREFIXES = ("_SUCCESS", "_committed_", "_started_", "_temporary", ".")
_LEFTOVER_SUFFIXES = (".crc",)


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


def parquet_column_names(
    files: Iterable[str], open_binary: Callable[[str], IO[bytes]]
) -> tuple[str, ...]:
    """Every column of the Parquet `files`, from their footers. Scoring ignores them all
    (`skip_unsupported`): a column no feature can hold is one the model never read."""
    names: dict[str, None] = {}
    for path in files:
        names.update(dict.fromkeys(footer_schema(path, open_binary).names))
    return tuple(names)
