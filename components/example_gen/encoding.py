"""ExampleGen's encoder: typed Arrow columns -> serialized tf.Examples, a batch at a time.

Every reader (components/example_gen/csv_to_examples.py,
components/example_gen/parquet_to_examples.py)
turns its files into Arrow record batches whose columns are already typed as
features, and this module encodes them, whatever the format was:

- an INT column holds int64 values, a FLOAT column float32 (or float64,
  rounded to float32 as protobuf stores a Python float in a float field), a
  STRING column binary or string; a list of one of these is a feature with
  several values;
- a null (a missing cell, a row of a file that lacks the column, a null list,
  an empty list) is written as TFX's CSV executor writes an empty cell: the
  feature with its kind and no values, which every reader downstream takes as
  missing; 0, 0.0, False and "" are values;
- an UNKNOWN column (empty throughout) is a Feature with no kind, as TFX
  writes it.

The bytes are those of the *deterministic* serialization of the Example TFX
would build (features in name order): ExampleGen's split is a hash of exactly
those bytes (components/example_gen/blocks.py), so a row lands in the same split
whichever format it was read from.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tfx_bsl.coders.csv_decoder import ColumnType

# tf.train.Example's wire format: Example.features (1) -> Features.feature
# (1, map entries of key (1) and value (2)) -> Feature's oneof kind:
# bytes_list (1), float_list (2), int64_list (3) -> the list's values (1,
# packed for numbers). Tags here are (field << 3) | 2 (length-delimited).
_TAG_1 = b"\x0a"
_FEATURE_TAG = {ColumnType.STRING: b"\x0a", ColumnType.FLOAT: b"\x12", ColumnType.INT: b"\x1a"}


def _binary(lengths: np.ndarray, data: np.ndarray) -> pa.BinaryArray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.BinaryArray.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _varints(values: np.ndarray) -> pa.BinaryArray:
    """Protobuf varints of unsigned 64-bit values (a negative int64 as its two's complement)."""
    values = values.astype(np.uint64, copy=False)
    if len(values) == 0 or values.max() < 0x80:  # lengths, mostly: one byte each
        return _binary(np.ones(len(values), np.int64), values.astype(np.uint8))
    lengths = np.ones(len(values), dtype=np.int64)
    for k in range(1, 10):
        lengths += values >= np.uint64(1 << (7 * k))
    width = int(lengths.max())
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    groups = ((values[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    position = np.arange(width)[None, :]
    groups |= np.where(position < (lengths[:, None] - 1), 0x80, 0).astype(np.uint8)
    return _binary(lengths, groups[position < lengths[:, None]])


def _join(*parts: pa.Array | bytes) -> pa.BinaryArray:
    arrays = [pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p for p in parts]
    return pc.binary_join_element_wise(*arrays, pa.scalar(b"", pa.binary()))


def _length_prefixed(values: pa.BinaryArray) -> pa.BinaryArray:
    lengths = pc.binary_length(values).to_numpy(zero_copy_only=False)
    return _join(_varints(lengths), values)


def _value_bytes(values: pa.Array, kind: ColumnType) -> pa.BinaryArray:
    """Each value's bytes inside its list: a varint, 4 bytes of float, or a tagged string."""
    if kind == ColumnType.STRING:
        return _join(_TAG_1, _length_prefixed(values.cast(pa.binary()).fill_null(b"")))
    if kind == ColumnType.FLOAT:
        floats = values.fill_null(0).to_numpy(zero_copy_only=False).astype("<f4")
        return _binary(np.full(len(values), 4), np.frombuffer(floats.tobytes(), np.uint8))
    ints = values.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return _varints(ints)


def _list_payload(values: pa.BinaryArray, kind: ColumnType) -> pa.BinaryArray:
    """A feature's list message from its values' bytes (numbers are packed)."""
    if kind == ColumnType.STRING:
        return values
    return _join(_TAG_1, _length_prefixed(values))


def list_values(column: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """A list column's values per row (a null list holds none) and those values, null
    elements dropped: what a feature of each row holds."""
    flat = column.flatten()  # the values of non-null lists, null elements among them
    parents = pc.list_parent_indices(column).to_numpy(zero_copy_only=False)
    kept = flat.is_valid().to_numpy(zero_copy_only=False)  # null elements are dropped
    return np.bincount(parents[kept], minlength=len(column)), flat.filter(pa.array(kept))


def _feature(column: pa.Array, kind: ColumnType) -> pa.Array:
    """Each row's serialized tf.train.Feature: its values, or none for a null."""
    tag = _FEATURE_TAG[kind]
    missing = pa.scalar(tag + b"\x00", pa.binary())
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        counts, values = list_values(column)
        offsets = np.zeros(len(column) + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        per_value = _value_bytes(values, kind)
        joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), per_value), b"")
        return pc.if_else(
            counts > 0, _join(tag, _length_prefixed(_list_payload(joined, kind))), missing
        )
    present = column.is_valid().to_numpy(zero_copy_only=False)
    payload = _list_payload(_value_bytes(column, kind), kind)
    return pc.if_else(present, _join(tag, _length_prefixed(payload)), missing)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _entry_key(name: str) -> bytes:
    """A map entry's key field and the tag of its value field."""
    key = name.encode()
    return _TAG_1 + _varint(len(key)) + key + b"\x12"


def encode_examples(batch: pa.RecordBatch, kinds: dict[str, ColumnType]) -> list[bytes]:
    """A batch of typed columns (module doc) as serialized tf.Examples, one per row.

    `kinds`: every column's kind; a column of `kinds` the batch lacks is null
    throughout.
    """
    rows = batch.num_rows
    names = set(batch.schema.names)
    # Joined with the entries, so that the result is one value per row even
    # when every column is UNKNOWN (a constant entry).
    parts: list[pa.Array | bytes] = [_binary(np.zeros(rows, np.int64), np.empty(0, np.uint8))]
    for name in sorted(kinds, key=str.encode):  # map entries in key order, as protobuf sorts
        kind = kinds[name]
        if kind == ColumnType.UNKNOWN:
            entry = _entry_key(name) + b"\x00"  # Feature() with no kind, as TFX writes it
            parts.append(_TAG_1 + _varint(len(entry)) + entry)
            continue
        if name in names:
            feature = _feature(batch.column(name), kind)
        else:
            feature = pa.array([_FEATURE_TAG[kind] + b"\x00"] * rows, pa.binary())
        entry = _join(_entry_key(name), _length_prefixed(feature))
        parts.append(_join(_TAG_1, _length_prefixed(entry)))
    return _join(_TAG_1, _length_prefixed(_join(*parts))).to_pylist()
