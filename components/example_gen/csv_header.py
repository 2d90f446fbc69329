"""A CSV file's header, read by a CSV parser: one reading for the runner's check,
ExampleGen and the draft.

TFX's `io_utils.load_csv_column_names` splits the first line on commas: a
quoted header (R's `write.csv`, Python's `csv.writer` with the `unix` dialect)
keeps its quotes, a header cell holding a comma splits in two, and a UTF-8
byte-order mark (Excel's "CSV UTF-8") becomes part of the first name. pyarrow,
which reads the rows (components/example_gen/csv_to_examples.py), unquotes and drops the
mark, so the names here are read the way it reads them: Python's `csv` module
(the `excel` dialect: comma, double quote, any line ending) over the file
decoded as `utf-8-sig`, blank lines skipped.

What no run can read is refused here, once, with the file named: no header, a
header separated by something other than commas, columns without a name or
with the same name.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from components.example_gen.text_encoding import non_utf8_line

# Separators of other CSV dialects: European spreadsheets (";"), "excel-tab" and
# TSV exports ("\t"), some databases' dumps ("|").
OTHER_SEPARATORS = {";": "semicolon", "\t": "tab", "|": "pipe"}


class CsvHeaderError(ValueError):
    """A CSV file's header no run can read; the message names the file and what to do."""


@dataclass(frozen=True)
class CsvHeader:
    columns: tuple[str, ...]
    has_rows: bool  # a row follows the header (blank lines are no rows)


class _Raw(io.RawIOBase):
    """Any file with read(n) as a raw stream: TensorFlow's GFile (an object store's
    file) has no readable(), which io.TextIOWrapper asks for."""

    def __init__(self, binary: IO[bytes]):
        self._binary = binary

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._binary.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def csv_reader(binary: IO[bytes]) -> Any:
    """A `csv.reader` over a file opened in binary mode, a byte-order mark dropped.

    A blank line reads as an empty row, which pyarrow skips: skip it too. The
    reader raises UnicodeDecodeError and csv.Error, and counts lines (`line_num`).
    """
    text = io.TextIOWrapper(io.BufferedReader(_Raw(binary)), encoding="utf-8-sig", newline="")
    return csv.reader(text)


def read_header(path: str, open_binary: Callable[[str], IO[bytes]]) -> CsvHeader:
    """The header of the CSV file `path`, or CsvHeaderError naming the file and the fix.

    `open_binary`: how this caller opens a file (an object store's client, Beam's
    filesystems); the file is reopened only to place a byte that is not UTF-8.
    """
    try:
        with open_binary(path) as f:
            reader = csv_reader(f)
            rows = (row for row in reader if row)
            header = next(rows, None)
            has_rows = next(rows, None) is not None
    except UnicodeDecodeError:
        # The decoder reads ahead: a bad byte in the first rows fails the header.
        with open_binary(path) as f:
            problem = non_utf8_line(f)
        raise CsvHeaderError(f"{path}: {problem or 'not UTF-8'}") from None
    except csv.Error as err:  # A NUL byte, say, or a cell over csv's size limit.
        raise CsvHeaderError(f"{path}: line {reader.line_num}: {err}") from None
    if not header or not any(cell.strip() for cell in header):
        raise CsvHeaderError(f"{path} is empty: it has no header row")
    _check_columns(path, header)
    return CsvHeader(tuple(header), has_rows)


def _check_columns(path: str, header: list[str]) -> None:
    """CsvHeaderError unless every column of `header` has a name of its own.

    Linear in the number of columns: a file may have a hundred thousand.
    """
    if len(header) == 1:
        found = [name for sep, name in OTHER_SEPARATORS.items() if sep in header[0]]
        if found:
            raise CsvHeaderError(
                f"{path}: the header is one column, {header[0][:80]!r}, separated by "
                f"{' and '.join(found)}s, not commas; save the file as comma-separated CSV "
                "(a spreadsheet's 'CSV (Comma delimited)' or 'CSV UTF-8' export, "
                "pandas' to_csv(sep=','))"
            )
    unnamed = [i + 1 for i, cell in enumerate(header) if not cell.strip()]
    if unnamed:
        # Typically an index column a dataframe export wrote without a name.
        raise CsvHeaderError(
            f"{path}: column(s) {unnamed[:10]} of the header have no name; every column "
            "becomes a feature and needs one (or drop an unnamed index column: pandas' "
            "to_csv(index=False), R's write.csv(row.names=FALSE))"
        )
    repeated = sorted(name for name, n in Counter(header).items() if n > 1)
    if repeated:
        raise CsvHeaderError(f"{path}: column name(s) {repeated[:10]} appear more than once")
