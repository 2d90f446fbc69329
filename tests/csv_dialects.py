"""CSV files as the exporters people use write them, for the dialect tests.

Where the writer is installed here (Python's csv module, pandas) it writes the
file; R, Excel and Spark are not, so their byte layouts are written literally,
each function naming the tool and the export it reproduces.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from pathlib import Path

Rows = Sequence[Sequence[str]]
UTF8_BOM = b"\xef\xbb\xbf"


def _csv_module(dialect: str, **options) -> Callable[[Sequence[str], Rows], bytes]:
    def write(header: Sequence[str], rows: Rows) -> bytes:
        text = io.StringIO(newline="")
        writer = csv.writer(text, dialect=dialect, **options)
        writer.writerow(header)
        writer.writerows(rows)
        return text.getvalue().encode()

    return write


def pandas_to_csv(header: Sequence[str], rows: Rows, *, index: bool = False) -> bytes:
    """pandas' `DataFrame.to_csv(path)`; its default `index=True` adds an unnamed column."""
    import pandas as pd

    return pd.DataFrame(list(rows), columns=list(header)).to_csv(index=index).encode()


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def r_write_csv(header: Sequence[str], rows: Rows, *, row_names: bool = False) -> bytes:
    """R's `write.csv(df, path, row.names = FALSE)` (R 4.x, utils): every column name
    quoted, every cell of a character column quoted with quotes doubled, numbers
    bare and a missing one written NA, LF line ends. `row_names=True`, R's
    default, adds a first column named "" holding "1", "2", ..."""
    numeric = [
        all(_is_number(row[i]) for row in rows if row[i] not in ("", "NA"))
        for i in range(len(header))
    ]

    def quoted(cell: str) -> str:
        return '"' + cell.replace('"', '""') + '"'

    def written(cell: str, is_number: bool) -> str:
        return (cell or "NA") if is_number else quoted(cell)

    lines = [([quoted("")] if row_names else []) + [quoted(name) for name in header]]
    for number, row in enumerate(rows, start=1):
        cells = [written(c, numeric[i]) for i, c in enumerate(row)]
        lines.append(([quoted(str(number))] if row_names else []) + cells)
    return "".join(",".join(line) + "\n" for line in lines).encode()


def excel_csv_utf8(header: Sequence[str], rows: Rows) -> bytes:
    """Excel's "CSV UTF-8 (Comma delimited)": a UTF-8 byte-order mark, then CRLF lines,
    a cell quoted only when it holds a comma, a quote or a line break."""
    return UTF8_BOM + _csv_module("excel")(header, rows)


def excel_csv_macintosh(header: Sequence[str], rows: Rows) -> bytes:
    """Excel's "CSV (Macintosh)": lines ended by CR alone, text in Mac Roman (ASCII
    here; a byte beyond it is not UTF-8, which the runner refuses naming the line)."""
    # Written CRLF and the row ends made CR: Python's writer quotes a cell by the
    # characters of its line terminator, so "\r" alone would leave a cell's LF
    # unquoted, where Excel quotes every cell holding a line break.
    text = _csv_module("excel")(header, rows).decode().replace("\r\n", "\r")
    return text.encode("mac_roman")


def excel_csv_semicolon(header: Sequence[str], rows: Rows) -> bytes:
    """Excel's "CSV (Comma delimited)" where the list separator is ";" (German,
    French, ... regional settings): semicolons between cells, CRLF lines."""
    return _csv_module("excel", delimiter=";")(header, rows)


def spark_csv_part(header: Sequence[str], rows: Rows) -> bytes:
    """One part file of Spark's `df.write.option("header", True).csv(dir)` (Spark
    3.x, univocity): LF lines, a cell quoted when it holds a comma, a quote or a line
    break, an empty string written as "", and a quote escaped with a backslash
    (Spark's default `escape`), which is not CSV's doubled quote."""

    def cell(value: str) -> str:
        if value == "":
            return '""'
        if any(c in value for c in ',"\n\r'):
            return '"' + value.replace('"', '\\"') + '"'
        return value

    return "".join(",".join(map(cell, line)) + "\n" for line in [header, *rows]).encode()


def rewrite(path: Path, writer: Callable[[Sequence[str], Rows], bytes]) -> None:
    """Writes the CSV file `path` again, as `writer` writes its rows."""
    with path.open(newline="") as f:
        header, *rows = list(csv.reader(f))
    path.write_bytes(writer(header, rows))


# Every writer whose files a run reads, by the name the docs' table gives it.
RUNNING_WRITERS: dict[str, Callable[[Sequence[str], Rows], bytes]] = {
    "csv module, excel dialect": _csv_module("excel"),
    "csv module, unix dialect": _csv_module("unix"),
    "pandas to_csv(index=False)": pandas_to_csv,
    "R write.csv(row.names=FALSE)": r_write_csv,
    "Excel CSV UTF-8": excel_csv_utf8,
    "Excel CSV (Macintosh)": excel_csv_macintosh,
    "Spark write.csv(header=True)": spark_csv_part,
}
EXCEL_TAB = _csv_module("excel-tab")
