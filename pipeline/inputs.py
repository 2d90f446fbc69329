"""Checks on the input data location, run before any TFX component starts.

CsvExampleGen reports a missing directory, an empty file or mismatched headers
deep inside a Beam stack trace; these checks say the same in one line. The data
root may be a local directory or an object-store prefix (s3://, gs://), read
through the same filesystems as the pipeline (pipeline/object_store.py).

With a span pattern (the dataset spec's `input.pattern`), the files checked
are those of the spans a run reads: the latest, or the window of the last N.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from components.csv_header import CsvHeaderError, read_header
from components.spans import Span, SpanPattern, latest_spans
from components.text_encoding import non_utf8_line
from pipeline import object_store


class InputDataError(ValueError):
    """The data root cannot be read as the pipeline's CSV input."""


@dataclass(frozen=True)
class CsvDataRoot:
    """A checked data root: its CSV files and the one header they share."""

    files: tuple[str, ...]
    header: tuple[str, ...]
    spans: tuple[Span, ...] = ()  # with a span pattern: the spans a run reads, oldest first


def check_csv_data_root(
    data_root: str | os.PathLike, pattern: str | None = None, spans: int = 1
) -> CsvDataRoot:
    """The CSV files a run reads under `data_root` and their header, or InputDataError
    naming the problem. `pattern`, `spans`: the dataset spec's `input` section."""
    root = os.fspath(data_root)
    try:
        object_store.check_uri(root, "data root")
    except object_store.ObjectStoreError as err:
        raise InputDataError(str(err)) from None
    if not object_store.isdir(root):
        raise InputDataError(f"data root {root} is not a directory")
    if pattern is not None:
        return _check_spans(root, SpanPattern(pattern), spans)
    names = object_store.listdir(root)
    files = [n for n in names if object_store.isfile(object_store.join(root, n))]
    csv_files = [object_store.join(root, n) for n in files if n.endswith(".csv")]
    if not csv_files:
        raise InputDataError(f"data root {root} holds no *.csv files")
    others = [n for n in files if not n.endswith(".csv")]
    if others:
        # CsvExampleGen reads every file under input_base, CSV or not, hidden
        # ones too (Spark writes _SUCCESS and .crc files beside its part files).
        raise InputDataError(
            f"data root {root} holds files that are not CSV: {', '.join(others[:10])}; "
            "a run reads every file in it: move them out of the data root"
        )
    return CsvDataRoot(files=tuple(csv_files), header=_shared_header(csv_files))


def _check_spans(root: str, pattern: SpanPattern, count: int) -> CsvDataRoot:
    paths = pattern.relative_matches(root, object_store.glob)
    not_spans = [p for p in paths if pattern.match(p) is None]
    if not_spans:
        # TFX's ExampleGen fails on any file its glob finds without a span number.
        raise InputDataError(
            f"{root}: {', '.join(not_spans[:3])} match(es) input pattern {pattern.pattern!r} "
            "but hold no span number in its place; move them out of the data root"
        )
    found = latest_spans(pattern, paths, count)
    if not found:
        raise InputDataError(
            f"no files under {root} match the input pattern {pattern.pattern!r} "
            "(input.pattern in the dataset spec)"
        )
    relative = [f for span in found for f in span.files]
    others = [f for f in relative if not f.endswith(".csv")]
    if others:
        # CsvExampleGen reads every file the pattern matches, CSV or not.
        raise InputDataError(
            f"input pattern {pattern.pattern!r} under {root} matches files that are not CSV: "
            f"{', '.join(others)}"
        )
    csv_files = [object_store.join(root, f) for f in relative]
    return CsvDataRoot(files=tuple(csv_files), header=_shared_header(csv_files), spans=tuple(found))


def _shared_header(csv_files: list[str]) -> tuple[str, ...]:
    """The one header every file in `csv_files` has, or InputDataError."""
    headers = {}
    for path in csv_files:
        try:
            header = read_header(path, object_store.open_binary)
        except CsvHeaderError as err:
            raise InputDataError(str(err)) from None
        if not header.has_rows:
            raise InputDataError(f"{path} has a header but no data rows")
        headers[path] = header.columns
    first, *rest = csv_files
    for path in rest:
        if headers[path] != headers[first]:
            raise InputDataError(
                f"{path} has columns {list(headers[path])} but {first} has "
                f"{list(headers[first])}; every CSV a run reads must share one header"
            )
    return headers[first]


def check_utf8(path: str) -> None:
    """InputDataError naming the file and the line where `path` stops being UTF-8.

    Reads the whole file: for a tool that reads every row anyway (the schema
    draft), or to place an error a decoder has already met.
    """
    with object_store.open_binary(path) as f:
        problem = non_utf8_line(f)
    if problem:
        raise InputDataError(f"{path}: {problem}")
