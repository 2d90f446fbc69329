"""Checks on the input data location, run before any TFX component starts.

CsvExampleGen reports a missing directory, an empty file or mismatched headers
deep inside a Beam stack trace; these checks say the same in one line.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path


class InputDataError(ValueError):
    """The data root cannot be read as the pipeline's CSV input."""


@dataclass(frozen=True)
class CsvDataRoot:
    """A checked data root: its CSV files and the one header they share."""

    files: tuple[Path, ...]
    header: tuple[str, ...]


def check_csv_data_root(data_root: str | Path) -> CsvDataRoot:
    """The CSV files under `data_root` and their header, or InputDataError naming the problem."""
    root = Path(data_root)
    if not root.is_dir():
        raise InputDataError(f"data root {root} is not a directory")
    files = sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith("."))
    csv_files = [p for p in files if p.suffix == ".csv"]
    if not csv_files:
        raise InputDataError(f"data root {root} holds no *.csv files")
    others = [p.name for p in files if p.suffix != ".csv"]
    if others:
        # CsvExampleGen reads every file under input_base, CSV or not.
        raise InputDataError(f"data root {root} holds files that are not CSV: {', '.join(others)}")
    headers = {}
    for path in csv_files:
        with path.open(newline="") as f:
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
