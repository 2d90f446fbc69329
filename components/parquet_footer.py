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
logical type, from the Thrift compact protocol. Field ids from
apache/parquet-format tag apache-parquet-format-2.12.0,
src/main/thrift/parquet.thrift: FileMetaData `2: required list<SchemaElement>
schema` (line 1116 at 2.10.0); SchemaElement `4: required string name`,
`5: optional i32 num_children`, `10: optional LogicalType logicalType`
(lines 430, 437, 467 at 2.10.0); LogicalType members 15 FLOAT16, 16 VARIANT,
17 GEOMETRY, 18 GEOGRAPHY (lines 493-496 at 2.12.0).
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
            header = self._byte()
            size = header >> 4 if header >> 4 != 15 else self._varint()
            return [self.value(header & 0x0F) for _ in range(size)]
        if kind == _MAP:
            size = self._varint()
            types = self._byte() if size else 0
            return {self.value(types >> 4): self.value(types & 0x0F) for _ in range(size)}
        if kind == _STRUCT:
            return self.struct()
        raise ValueError(f"not a Thrift compact type: {kind}")

    def struct(self) -> dict[int, Any]:
        fields: dict[int, Any] = {}
        field_id = 0
        while True:
            header = self._byte()
            kind = header & 0x0F
            if kind == 0:  # STOP
                return fields
            delta = header >> 4
            field_id = field_id + delta if delta else self._zigzag()
            # A struct field's bool is in its header's type.
            fields[field_id] = kind == _TRUE if kind in (_TRUE, _FALSE) else self.value(kind)


def unknown_logical_types(file: IO[bytes]) -> list[tuple[str, int]]:
    """Each top-level column whose leaves carry a logical type pyarrow 10 does not know,
    with that LogicalType member's id; empty when the footer is unreadable or has none."""
    try:
        file.seek(-8, 2)
        tail = file.read(8)
        if tail[4:] != _MAGIC:
            return []
        (length,) = struct.unpack("<i", tail[:4])
        file.seek(-8 - length, 2)
        elements = _Reader(file.read(length)).struct().get(_FILE_SCHEMA, [])
    except Exception:  # a best effort: the caller then gives pyarrow's own message
        return []
    found: list[tuple[str, int]] = []
    # Depth first: the root, then each column's subtree; a group has num_children.
    remaining = [elements[0].get(_NUM_CHILDREN, 0)] if elements else []
    top = ""
    for element in elements[1:]:
        while remaining and remaining[-1] == 0:
            remaining.pop()
        if not remaining:
            break
        remaining[-1] -= 1
        if len(remaining) == 1:
            top = element.get(_NAME, b"").decode("utf-8", "replace")
        members = set(element.get(_LOGICAL_TYPE, {})) - KNOWN_TO_PYARROW_10
        found += [(top, member) for member in sorted(members) if (top, member) not in found]
        if element.get(_NUM_CHILDREN):
            remaining.append(element[_NUM_CHILDREN])
    return found
