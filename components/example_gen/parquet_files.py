"""A Parquet file opened as pyarrow 10 (TFX's) can read it, and what its footer alone says.

pyarrow 10 refuses a whole file whose footer holds a logical type newer than
its own (Parquet's FLOAT16, which pyarrow 15 and later write for float16,
VARIANT, GEOMETRY, GEOGRAPHY). `opened_parquet` opens such a file with those
types cut from its footer (components/example_gen/parquet_footer.py): a float16
column then reads as its 2-byte values, which it decodes as half floats, and a
column of another newer type is named, for the caller to refuse
(components/example_gen/parquet_columns.py). Any binary file object serves,
tf.io.gfile's (s3://, gs://) too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from components.example_gen.parquet_footer import (
    FLOAT16,
    LOGICAL_TYPE_NAMES,
    footer_for_pyarrow_10,
    unknown_logical_types,
)


class ParquetError(ValueError):
    """A Parquet file or column ExampleGen cannot read as features; names the file and column."""


def is_list_type(t: pa.DataType) -> bool:
    """Whether values of `t` come in a list per row: list, large_list, fixed_size_list."""
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


@dataclass(frozen=True)
class OpenedParquet:
    """A Parquet file as pyarrow 10 reads it, with what its own footer parser could not
    take (components/example_gen/parquet_footer.py): `halves`, the float16 columns, which it
    reads as their 2-byte values (fixed_size_binary[2]), and `newer`, the columns of another
    logical type newer than it (VARIANT, GEOMETRY, GEOGRAPHY), by that type's name."""

    parquet: pq.ParquetFile
    halves: frozenset[str] = frozenset()
    newer: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def schema(self) -> pa.Schema:
        """The file's Arrow schema, its float16 columns float16 again."""
        schema = self.parquet.schema_arrow
        for name in self.halves:
            i = schema.get_field_index(name)
            schema = schema.set(i, schema.field(i).with_type(_half_type(schema.field(i).type)))
        return schema

    def columns(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        """A batch read from the file, by column, its float16 columns decoded."""
        return {
            name: _half_floats(column) if name in self.halves else column
            for name, column in zip(batch.schema.names, batch.columns, strict=True)
        }


def opened_parquet(path: str, f: IO[bytes]) -> OpenedParquet:
    """A file opened for its footer and rows; where pyarrow 10 cannot parse the footer for
    a logical type newer than its own, opened with that type cut from it. ParquetError
    for a file that is neither."""
    try:
        parquet = pq.ParquetFile(_ArrowReadable(f))
        parquet.schema_arrow  # noqa: B018 -- a schema pyarrow cannot convert fails here
        return OpenedParquet(parquet)
    except (pa.ArrowException, OSError) as err:
        rewritten = footer_for_pyarrow_10(f)
        if rewritten is None:
            newer = unknown_logical_types(f)
            if not newer:
                raise ParquetError(_not_parquet(path, err)) from None
            column, member = newer[0]
            fix = (
                f"write float32 instead (pandas: df[{column!r}] = df[{column!r}]"
                ".astype('float32'); pyarrow: cast the column to pa.float32())"
                if member == FLOAT16
                else "write that column as a type the table in docs/parquet-and-partitions.md "
                "lists, or leave it out of the file"
            )
            raise ParquetError(
                f"column {column!r} in {path} has Parquet's "
                f"{LOGICAL_TYPE_NAMES.get(member, f'logical type {member}')} type, newer than "
                "this pyarrow (10, TFX's), in a footer the template cannot rewrite for it (so "
                f"no column of the file can be read): {fix}"
            ) from None
    tail, columns = rewritten
    try:
        metadata = pq.read_metadata(pa.BufferReader(tail))
        parquet = pq.ParquetFile(_ArrowReadable(f), metadata=metadata)
        parquet.schema_arrow  # noqa: B018
    except (pa.ArrowException, OSError) as err:
        raise ParquetError(_not_parquet(path, err)) from None
    newer_members = {c: m for c, m in columns if m != FLOAT16}
    return OpenedParquet(
        parquet,
        halves=frozenset(c for c, m in columns if c not in newer_members),
        newer={c: LOGICAL_TYPE_NAMES.get(m, f"logical type {m}") for c, m in newer_members.items()},
    )


def footer_schema(path: str, open_binary: Callable[[str], IO[bytes]]) -> pa.Schema:
    """A Parquet file's Arrow schema (with pandas' metadata, if any), from its footer;
    ParquetError as `opened_parquet` says."""
    with open_binary(path) as f:
        return opened_parquet(path, f).schema


def values_in(path: str, open_binary: Callable[[str], IO[bytes]]) -> int:
    """Rows times columns of a Parquet file, from its footer (no rows read)."""
    with open_binary(path) as f:
        metadata = opened_parquet(path, f).parquet.metadata
    return metadata.num_rows * metadata.num_columns


def _half_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_half_type(t.value_type), t.list_size)
    if is_list_type(t):
        return pa.list_(_half_type(t.value_type))
    return pa.float16() if t == pa.binary(2) else t


def _half_floats(column: pa.Array) -> pa.Array:
    """A float16 column pyarrow 10 read as fixed_size_binary[2], as half floats: the
    bytes are IEEE 754 binary16, little-endian (Parquet's FLOAT16, parquet-format
    2.10.0 LogicalTypes.md)."""
    if pa.types.is_fixed_size_list(column.type):
        size = column.type.list_size
        values = column.values.slice(column.offset * size, len(column) * size)
        offsets = pa.array(np.arange(len(column) + 1, dtype=np.int32) * size)
        return pa.ListArray.from_arrays(offsets, _half_floats(values), mask=column.is_null())
    if is_list_type(column.type):
        return pa.ListArray.from_arrays(
            column.offsets, _half_floats(column.values), mask=column.is_null()
        )
    if column.type != pa.binary(2):
        return column
    halves = np.frombuffer(
        column.buffers()[1], dtype="<f2", count=len(column), offset=column.offset * 2
    )
    return pa.array(halves, mask=column.is_null().to_numpy(zero_copy_only=False))


def _not_parquet(path: str, err: Exception) -> str:
    return f"{path} is not a Parquet file pyarrow can read: {err}"


class _ArrowReadable:
    """A binary file as pyarrow reads one: tf.io.gfile's GFile (s3://, gs://) has no `closed`."""

    def __init__(self, file: IO[bytes]):
        self._file = file
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        return self._file.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True
