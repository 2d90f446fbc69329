"""Parquet files with a logical type newer than pyarrow 10, made from ones it writes.

pyarrow 15 and later write float16 as a FIXED_LEN_BYTE_ARRAY of 2 bytes annotated
with Parquet's FLOAT16 logical type (member 15 of the LogicalType union); GEOMETRY
(17) annotates a BYTE_ARRAY of WKB. pyarrow 10, the project's, writes neither, but it
writes the physical columns: this adds the annotation to a column's schema element
in the footer, as the newer writer puts it there (the element's last field, 10:
logicalType), so the file is what a current writer's is to any Parquet reader.
tests/data/exports/float16_columns.parquet is one a current pyarrow wrote.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa

from components.example_gen.parquet_footer import _Reader

FLOAT16, GEOMETRY = 15, 17
_STRUCT = 0x0C  # the Thrift compact protocol's struct type


def _field_header(field_id: int, previous: int) -> bytes:
    """A struct-typed field's header: the delta from the `previous` field's id when it
    fits in four bits, else a delta of 0 and the id itself."""
    delta = field_id - previous
    if 0 < delta <= 15:
        return bytes([(delta << 4) | _STRUCT])
    zigzag = field_id << 1  # zigzag of a positive id
    out = bytearray([_STRUCT])
    while True:  # the field id as a zigzag varint, after a header of delta 0
        byte, zigzag = zigzag & 0x7F, zigzag >> 7
        out.append(byte | (0x80 if zigzag else 0))
        if not zigzag:
            return bytes(out)


def with_logical_type(path: Path, column: str, member: int, *, trailing: bytes = b"") -> Path:
    """`path` rewritten with LogicalType `member` (an empty struct) on the leaf named
    `column`; `trailing`: bytes of further fields after it (to make one that is not the
    element's last)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<i", data[-8:-4])
    footer = data[-8 - length : -8]
    for element, spans in _Reader(footer).schema_elements():
        if element.get(4) == column.encode() and 10 not in element:
            stop = spans[0][0]
            last = max(field for field in spans if field)
            logical = _field_header(10, last) + _field_header(member, 0) + b"\x00\x00"
            edited = footer[:stop] + logical + trailing + footer[stop:]
            break
    else:
        raise ValueError(f"no unannotated column {column!r} in {path}")
    path.write_bytes(data[: -8 - length] + edited + struct.pack("<i", len(edited)) + b"PAR1")
    return path


def half_floats(values: list[float | None]) -> pa.Array:
    """float16 values as pyarrow 10 can write them: their 2 bytes each, little-endian."""
    mask = [v is None for v in values]
    halves = np.array([0 if v is None else v for v in values], dtype="<f2")
    return pa.array([h.tobytes() for h in halves], pa.binary(2), mask=np.array(mask))
