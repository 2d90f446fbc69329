"""Checks on the input data location, run before any TFX component starts.

ExampleGen reports a missing directory, an empty file or mismatched headers
deep inside a Beam stack trace; these checks say the same in one line. The data
root may be a local directory or an object-store prefix (s3://, gs://), read
through the same filesystems as the pipeline (pipeline/object_store.py).

The files checked are those ExampleGen reads (components/example_gen/input_files.py):
writers' leftovers (`_SUCCESS`, `*.crc`, hidden and empty files) are skipped,
and the format is the dataset spec's `input.format` or the files' extension.
A CSV file's header is checked here; a Parquet file's footer (its columns and
their types: components/example_gen/parquet_to_examples.py), which refuses a column no
feature can hold before any Beam work, and the values of the columns read that
no feature can take (`check_values`: from the footer's statistics, or a
bounded scan of that column), each in one line with the cast to write.

With a span pattern (the dataset spec's `input.pattern`), the files checked
are those of the spans a run reads: the latest, or the window of the last N.
The partitions decide which days there are (components/example_gen/input_files.py
`read_days`): a day's folder a writer marked complete and left without a data
file stops the run, naming it; one without a marker is left out, and said so.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass

from components.example_gen.csv_header import CsvHeaderError, read_header
from components.example_gen.input_files import (
    InputFormatError,
    Partition,
    data_files,
    empty_day_message,
    format_of_path,
    holds_rows,
    input_format,
    is_leftover,
    no_rows_message,
    read_days,
)
from components.example_gen.parquet_columns import ParquetPlan, check_values, plan_files
from components.example_gen.parquet_files import ParquetError
from components.example_gen.spans import Span, SpanPattern, latest_spans, root_problem
from components.example_gen.text_encoding import non_utf8_line
from pipeline import object_store


class InputDataError(ValueError):
    """The data root cannot be read as the pipeline's input."""


@dataclass(frozen=True)
class DataRoot:
    """A checked data root: its data files, their format, and their columns (a CSV
    header every file shares; Parquet: the union of the files' columns)."""

    files: tuple[str, ...]
    header: tuple[str, ...]
    spans: tuple[Span, ...] = ()  # with a span pattern: the spans a run reads, oldest first
    format: str = "csv"
    parquet: ParquetPlan | None = None  # Parquet: each column's type over every file
    # Span folders with no data file and no writer's marker, left out (input_files.read_days).
    left_out: tuple[Partition, ...] = ()


def check_data_root(
    data_root: str | os.PathLike,
    pattern: str | None = None,
    spans: int = 1,
    *,
    format: str | None = None,
    ignore: tuple[str, ...] = (),
    skip_unsupported: bool = False,
    columns: tuple[str, ...] | None = None,
) -> DataRoot:
    """The files a run reads under `data_root`, their format and columns, or
    InputDataError naming the problem. `pattern`, `spans`, `format`: the dataset
    spec's `input` section; `ignore`: its ignored columns, never read; `columns`
    (scoring): the only columns read; `skip_unsupported` (scoring): every column no
    feature can hold is skipped, as if ignored."""
    reading = _Reading(format, ignore, skip_unsupported, columns)
    root = os.fspath(data_root)
    try:
        object_store.check_uri(root, "data root")
    except object_store.ObjectStoreError as err:
        raise InputDataError(str(err)) from None
    if not object_store.isdir(root):
        raise InputDataError(f"data root {root} is not a directory")
    if pattern is not None:
        return _check_spans(root, SpanPattern(pattern), spans, reading)
    paths = [object_store.join(root, n) for n in object_store.listdir(root)]
    files = data_files([p for p in paths if object_store.isfile(p)], object_store.file_size)
    if not files:
        empty = [p for p in paths if object_store.isfile(p) and not is_leftover(p)]
        if empty:
            raise InputDataError(f"{empty[0]} is empty: it has no header row (nor any data)")
        raise InputDataError(
            f"data root {root} holds no data files (*.csv or *.parquet; writers' markers, "
            "hidden and empty files are skipped)" + _pattern_hint(root, paths)
        )
    checked = _checked(f"data root {root}", files, reading)
    _check_rows(f"data root {root}", files, checked.format)
    return checked


# A partition folder's name: `dt=2024-01-02` (a date) or `span=12` (a number).
_DATE_FOLDER = re.compile(r"^([^=/]+)=\d{4}-\d{2}-\d{2}$")
_NUMBER_FOLDER = re.compile(r"^([^=/]+)=\d+$")


def _pattern_hint(root: str, paths: list[str]) -> str:
    """When data files sit one folder down (a Hive layout, `dt=2024-01-02/*.parquet`): the
    `--input-pattern` that reads them as spans; else nothing."""
    for folder in sorted(p for p in paths if object_store.isdir(p)):
        name = os.path.basename(folder.rstrip("/"))
        inside = [object_store.join(folder, n) for n in object_store.listdir(folder)]
        files = data_files([p for p in inside if object_store.isfile(p)], object_store.file_size)
        endings = sorted({os.path.splitext(f)[1] for f in files if format_of_path(f)})
        if not endings:
            continue
        if (date := _DATE_FOLDER.match(name)) is not None:
            pattern = f"{date.group(1)}={{YYYY}}-{{MM}}-{{DD}}/*{endings[0]}"
        elif (number := _NUMBER_FOLDER.match(name)) is not None:
            pattern = f"{number.group(1)}={{SPAN}}/*{endings[0]}"
        else:
            return (
                f"; its folder {name} holds them: pass that folder as the data root, or "
                "name the folders as spans (span=1, dt=2024-01-02) and pass --input-pattern"
            )
        return (
            f"; its folders hold them ({name}/{os.path.basename(files[0])}): read them as "
            f"spans with --input-pattern '{pattern}' (input.pattern in the dataset spec)"
        )
    return ""


def _check_rows(where: str, files: list[str], read_format: str) -> None:
    """InputDataError unless `files` (one span's, or the root's) hold a row."""
    if not holds_rows(files, read_format, object_store.open_binary):
        raise InputDataError(no_rows_message(where, files))


@dataclass(frozen=True)
class _Reading:
    """Which columns a run reads: check_data_root's arguments."""

    format: str | None
    ignore: tuple[str, ...]
    skip_unsupported: bool
    columns: tuple[str, ...] | None


def _checked(
    where: str, files: list[str], reading: _Reading, found: tuple[Span, ...] = ()
) -> DataRoot:
    try:
        read_format = input_format(files, reading.format)
    except InputFormatError as err:
        raise InputDataError(f"{where}: {err}") from None
    if read_format == "parquet":
        try:
            plan = plan_files(
                files,
                object_store.open_binary,
                reading.ignore,
                columns=reading.columns,
                skip_unsupported=reading.skip_unsupported,
            )
            check_values(plan, files, object_store.open_binary)
        except ParquetError as err:
            raise InputDataError(str(err)) from None
        return DataRoot(
            files=tuple(files),
            header=plan.column_names,
            spans=found,
            format=read_format,
            parquet=plan,
        )
    return DataRoot(files=tuple(files), header=_shared_header(files), spans=found)


def _check_spans(root: str, pattern: SpanPattern, count: int, reading: _Reading) -> DataRoot:
    problem = root_problem(root)
    if problem:
        # TFX's ExampleGen matches span files with a regex made from root and pattern
        # alike (contract/dataset/span_grammar.py `glob_and_regex`).
        raise InputDataError(
            f"data root {root} holds {problem}, which TFX's ExampleGen cannot read as a "
            "folder name beside an input pattern; rename the folder"
        )
    paths = pattern.relative_matches(root, object_store.glob)
    # TFX's ExampleGen fails on any file its glob lists that it reads no span from, a
    # writer's marker too: the check reads each as it does.
    refused = {p: reason for p in paths if (reason := pattern.refusal(p)) is not None}
    unpadded = [p for p in refused if pattern.matches_unpadded(p)]
    if unpadded:
        raise InputDataError(
            f"{root}: {unpadded[0]} has its date unpadded (Spark writes month=1, day=5), and "
            f"the input pattern {pattern.pattern!r} takes {{MM}} and {{DD}} as two digits, as "
            "TFX does: write the partitions by one date column formatted yyyy-MM-dd "
            "(partitionBy('dt')) and use the pattern 'dt={YYYY}-{MM}-{DD}/*.parquet'"
        )
    if refused:
        first, reason = next(iter(refused.items()))
        raise InputDataError(
            f"{root}: {', '.join(list(refused)[:3])} match(es) input pattern "
            f"{pattern.pattern!r} but hold no span number in its place as TFX's ExampleGen "
            f"reads it ({first}: {reason}); move them out of the data root"
        )
    days = read_days(pattern, root, object_store.glob, count)
    if days.empty:
        raise InputDataError(empty_day_message(root, days.empty[-1]))
    found = latest_spans(pattern, paths, count)
    if not found:
        raise InputDataError(
            f"no files under {root} match the input pattern {pattern.pattern!r} "
            "(input.pattern in the dataset spec)"
        )
    by_span = {
        span.span: data_files(
            [object_store.join(root, f) for f in span.files], object_store.file_size
        )
        for span in found
    }
    files = [f for span_files in by_span.values() for f in span_files]
    checked = _checked(
        f"input pattern {pattern.pattern!r} under {root}", files, reading, tuple(found)
    )
    for span in found:
        _check_rows(_span_name(span), by_span[span.span] or list(span.files), checked.format)
    return dataclasses.replace(checked, left_out=days.left_out)


def _span_name(span: Span) -> str:
    """A span as its folder names it (`dt=2024-01-02`), and its number."""
    folder = os.path.dirname(span.files[0]) if span.files else ""
    return f"span {span.span}" + (f" ({folder})" if folder else "")


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
