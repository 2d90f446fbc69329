"""The columns of a Parquet footer pyarrow 10 cannot parse, read without pyarrow.

pyarrow 10 (TFX pins it) refuses a whole file when one column carries a
logical type newer than its Parquet library: `LogicalType::FromThrift`
(apache/arrow tag apache-arrow-10.0.1, cpp/src/parquet/types.cc) knows the
union's members 1 to 14 and throws "Metadata contains Thrift LogicalType that
is not recognized" for any other, naming no column. pyarrow 15 and later write
float16 as member 15, FLOAT16, so a float16 column from any current pandas or
pyarrow makes the file unreadable here: its footer, its schema and its other
columns alike.

This module reads just enough of the footer to name those columns: the
FileMetaData's schema elements, each one's name, number of children and
logical type, from the Thrift compact protocol. It also writes the footer
again without those logical types (`footer_for_pyarrow_10`): each such leaf is
then its physical type to pyarrow 10 (a float16, FIXED_LEN_BYTE_ARRAY of 2
bytes, is fixed_size_binary[2]), and every other column of the file reads as
it always did, for the caller's own decoding
(components/example_gen/parquet_files.py). Field ids from
apache/parquet-format tag apache-parquet-format-2.12.0,
src/main/thrift/parquet.thrift: FileMetaData `2: required list<SchemaElement>
schema` (line 1116 at 2.10.0); SchemaElement `4: required string name`,
`5: optional i32 num_children`, `10: optional LogicalType logicalType`
(lines 430, 437, 467 at 2.10.0); LogicalType members 15 FLOAT16, 16 VARIANT,
17 GEOMETRY, 18 GEOGRAPHY (lines 493-496 at 2.12.0).

Port register: docs/ports.md
"""

from __future__ import annotations

import struct
from typing import IO, Any

# LogicalType members pyarrow 10's FromThrift knows (9 is reserved, never written).
KNOWN_TO_PYARROW_10 = frozenset(range(1, 15))
FLOAT16 = 15
LOGICAL_TYPE_NAMES = {FLOAT16: "FLOAT16", 16: "VARIANT", 17: "GEOMETRY", 18: "GEOGRAPHY"}

_FILE_SCHEMA, _NAME, _NUM_CHILDREN, _LOGICAL_TYPE = 2, 4, 5, 10
_MAGIC = b"PAR1"

# Thrift compact protocol's type ids (thrift's doc/specs/thrift-compact-protocol.md).
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = 1, 2, 3, 4, 5, 6, 7, 8
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12


class _Reader:
    """The compact protocol's values as Python ones: a struct is a dict by field id."""

    def __init__(self, data: bytes):
        self._data = data
        self._at = 0

    def _byte(self) -> int:
        value = self._data[self._at]
        self._at += 1
        return value

    def _varint(self) -> int:
        shift = value = 0
        while True:
            byte = self._byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def _zigzag(self) -> int:
        n = self._varint()
        return (n >> 1) ^ -(n & 1)

    def _take(self, size: int) -> bytes:
        if self._at + size > len(self._data):
            raise ValueError("truncated footer")
        chunk = self._data[self._at : self._at + size]
        self._at += size
        return chunk

    def value(self, kind: int) -> Any:
        if kind in (_TRUE, _FALSE):  # a list's bool element: one byte
            return self._byte() == _TRUE
        if kind == _BYTE:
            return self._byte()
        if kind in (_I16, _I32, _I64):
            return self._zigzag()
        if kind == _DOUBLE:
            return struct.unpack("<d", self._take(8))[0]
        if kind == _BINARY:
            return self._take(self._varint())
        if kind in (_LIST, _SET):
            size, element_kind = self._list_header()
            return [self.value(element_kind) for _ in range(size)]
        if kind == _MAP:
            size = self._varint()
            types = self._byte() if size else 0
            return {self.value(types >> 4): self.value(types & 0x0F) for _ in range(size)}
        if kind == _STRUCT:
            return self.struct()
        raise ValueError(f"not a Thrift compact type: {kind}")

    def _list_header(self) -> tuple[int, int]:
        """A list's size and its elements' type."""
        header = self._byte()
        size = header >> 4 if header >> 4 != 15 else self._varint()
        return size, header & 0x0F

    def _field(self, previous: int) -> tuple[int, int] | None:
        """The next field's id and type (ids are deltas from the `previous` field's, or
        given in full); None at the struct's STOP."""
        header = self._byte()
        kind = header & 0x0F
        if kind == 0:
            return None
        delta = header >> 4
        return (previous + delta if delta else self._zigzag()), kind

    def struct(self, spans: dict[int, tuple[int, int]] | None = None) -> dict[int, Any]:
        """One struct; `spans`, when given, gets each field's bytes (header to value),
        and the STOP's under 0."""
        fields: dict[int, Any] = {}
        field_id = 0
        while True:
            start = self._at
            field = self._field(field_id)
            if field is None:
                if spans is not None:
                    spans[0] = (start, self._at)
                return fields
            field_id, kind = field
            # A struct field's bool is in its header's type.
            fields[field_id] = kind == _TRUE if kind in (_TRUE, _FALSE) else self.value(kind)
            if spans is not None:
                spans[field_id] = (start, self._at)

    def schema_elements(self) -> list[tuple[dict[int, Any], dict[int, tuple[int, int]]]]:
        """A FileMetaData's schema elements, each with its fields' spans; the rest of
        the footer is read past."""
        elements: list[tuple[dict[int, Any], dict[int, tuple[int, int]]]] = []
        field_id = 0
        while (field := self._field(field_id)) is not None:
            field_id, kind = field
            if field_id != _FILE_SCHEMA or kind != _LIST:
                self.value(kind)
                continue
            size, _ = self._list_header()
            for _ in range(size):
                spans: dict[int, tuple[int, int]] = {}
                elements.append((self.struct(spans), spans))
        return elements


def _footer_bytes(file: IO[bytes]) -> bytes | None:
    """The FileMetaData's bytes, or None: not a Parquet file's tail."""
    file.seek(-8, 2)
    tail = file.read(8)
    if tail[4:] != _MAGIC:
        return None
    (length,) = struct.unpack("<i", tail[:4])
    file.seek(-8 - length, 2)
    return file.read(length)


def _unknown(footer: bytes) -> list[tuple[str, int, tuple[int, int] | None]]:
    """Each leaf or group whose logical type pyarrow 10 does not know: its top-level
    column, the LogicalType member and the bytes of its logicalType field, where that
    field is the element's last (so cutting it keeps the next field's header valid)."""
    elements = _Reader(footer).schema_elements()
    found: list[tuple[str, int, tuple[int, int] | None]] = []
    # Depth first: the root, then each column's subtree; a group has num_children.
    remaining = [elements[0][0].get(_NUM_CHILDREN, 0)] if elements else []
    top = ""
    for element, spans in elements[1:]:
        while remaining and remaining[-1] == 0:
            remaining.pop()
        if not remaining:
            break
        remaining[-1] -= 1
        if len(remaining) == 1:
            top = element.get(_NAME, b"").decode("utf-8", "replace")
        members = set(element.get(_LOGICAL_TYPE, {})) - KNOWN_TO_PYARROW_10
        if members:
            logical = spans[_LOGICAL_TYPE]
            last = logical[1] == spans[0][0]  # the STOP follows it
            found += [(top, member, logical if last else None) for member in sorted(members)]
        if element.get(_NUM_CHILDREN):
            remaining.append(element[_NUM_CHILDREN])
    return found


def _read(file: IO[bytes]) -> tuple[bytes, list[tuple[str, int, tuple[int, int] | None]]]:
    """The footer's bytes and its unknown logical types (`_unknown`); nothing for a
    footer this reader cannot parse (a best effort: the caller then gives pyarrow's
    own message)."""
    try:
        footer = _footer_bytes(file)
        return (footer, _unknown(footer)) if footer is not None else (b"", [])
    except Exception:
        return b"", []


def _by_column(found: list[tuple[str, int, Any]]) -> list[tuple[str, int]]:
    columns: list[tuple[str, int]] = []
    for column, member, _ in found:
        if (column, member) not in columns:
            columns.append((column, member))
    return columns


def unknown_logical_types(file: IO[bytes]) -> list[tuple[str, int]]:
    """Each top-level column whose leaves carry a logical type pyarrow 10 does not know,
    with that LogicalType member's id; empty when the footer is unreadable or has none."""
    return _by_column(_read(file)[1])


def footer_for_pyarrow_10(file: IO[bytes]) -> tuple[bytes, list[tuple[str, int]]] | None:
    """A Parquet file's tail (footer, its length, the magic) with each logical type
    pyarrow 10 does not know cut from its schema element, and the columns it was cut
    from (as `unknown_logical_types`); None when there is none, or one cannot be cut.
    Only the schema's annotations change: the row groups, their column chunks and
    offsets are the file's, so pyarrow reads the file's own pages with it
    (`pq.ParquetFile(file, metadata=pq.read_metadata(tail))`)."""
    footer, found = _read(file)
    if not found or any(span is None for _, _, span in found):
        return None
    cut = bytearray(footer)
    for start, end in sorted({span for _, _, span in found if span}, reverse=True):
        del cut[start:end]
    return _MAGIC + bytes(cut) + struct.pack("<i", len(cut)) + _MAGIC, _by_column(found)
