"""Where a CSV file stops being UTF-8, said as a person can act on it: the line.

Python's decoder reports a byte offset inside whatever chunk it was handed, and
pyarrow's CSV reader only "invalid UTF8 data"; neither names a line. Lines are
split on the newline byte, which never occurs inside a multi-byte UTF-8
character, so each line decodes on its own.
"""

from __future__ import annotations

from collections.abc import Iterable


def non_utf8_line(lines: Iterable[bytes]) -> str | None:
    """'line N is not UTF-8 (byte 0xNN at column C)' for the first line that is not,
    else None. `lines`: a file opened in binary mode, or any iterable of its lines."""
    for number, line in enumerate(lines, start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            return (
                f"line {number} is not UTF-8 (byte 0x{line[err.start]:02x} at column "
                f"{err.start + 1}); save the file as UTF-8 (a spreadsheet's 'CSV UTF-8' "
                "export; `iconv -f latin1 -t utf-8` converts a Latin-1 file)"
            )
    return None
