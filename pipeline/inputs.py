"""Checks on the input data location, run before any TFX component starts.

CsvExampleGen reports a missing directory, an empty file or mismatched headers
deep inside a Beam stack trace; these checks say the same in one line. The data
root may be a local directory or an object-store prefix (s3://, gs://), read
through the same filesystems as the pipeline (pipeline/object_store.py).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass

from pipeline import object_store


class InputDataError(ValueError):
    """The data root cannot be read as the pipeline's CSV input."""


@dataclass(frozen=True)
class CsvDataRoot:
    """A checked data root: its CSV files and the one header they share."""

    files: tuple[str, ...]
    header: tuple[str, ...]


def check_csv_data_root(data_root: str | os.PathLike) -> CsvDataRoot:
    """The CSV files under `data_root` and their header, or InputDataError naming the problem."""
    root = os.fspath(data_root)
    try:
        object_store.check_uri(root, "data root")
    except object_store.ObjectStoreError as err:
        raise InputDataError(str(err)) from None
    if not object_store.isdir(root):
        raise InputDataError(f"data root {root} is not a directory")
    names = [n for n in object_store.listdir(root) if not n.startswith(".")]
    files = [n for n in names if object_store.isfile(object_store.join(root, n))]
    csv_files = [object_store.join(root, n) for n in files if n.endswith(".csv")]
    if not csv_files:
        raise InputDataError(f"data root {root} holds no *.csv files")
    others = [n for n in files if not n.endswith(".csv")]
    if others:
        # CsvExampleGen reads every file under input_base, CSV or not.
        raise InputDataError(f"data root {root} holds files that are not CSV: {', '.join(others)}")
    headers = {}
    for path in csv_files:
        with object_store.open_text(path) as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header or not any(cell.strip() for cell in header):
                raise InputDataError(f"{path} is empty: it has no header row")
            if next(reader, None) is None:
                raise InputDataError(f"{path} has a header but no data rows")
        if header[0].startswith("\ufeff"):
            # CsvExampleGen would make the BOM part of the first column's name.
            raise InputDataError(
                f"{path} starts with a UTF-8 byte-order mark; save it as plain UTF-8 "
                f"(its first column would be named {header[0]!r})"
            )
        unnamed = [i + 1 for i, cell in enumerate(header) if not cell.strip()]
        if unnamed:
            # Typically an index column a dataframe export wrote without a name.
            raise InputDataError(
                f"{path}: column(s) {unnamed} of the header have no name; every column "
                "becomes a feature and needs one (or drop an unnamed index column)"
            )
        repeated = sorted({cell for cell in header if header.count(cell) > 1})
        if repeated:
            raise InputDataError(f"{path}: column name(s) {repeated} appear more than once")
        headers[path] = tuple(header)
    first, *rest = csv_files
    for path in rest:
        if headers[path] != headers[first]:
            raise InputDataError(
                f"{path} has columns {list(headers[path])} but {first} has "
                f"{list(headers[first])}; every CSV under the data root must share one header"
            )
    return CsvDataRoot(files=tuple(csv_files), header=headers[first])
