"""TFRecord framing, written and read without TensorFlow.

A TFRecord file is a run of records, each framed as its length (8 bytes, little
endian), the masked CRC32C of those 8 bytes, the data, and the masked CRC32C of
the data. ExampleGen's writer (components/example_gen/blocks.py) frames its runs
here, and the run reports read the Trainer's event files and the Evaluator's
metrics here, so a light step reads them without loading TensorFlow.

The reader follows TensorFlow's (TF 2.16, tsl/lib/io/record_reader.cc,
`RecordReader::ReadChecksummed` and `RecordReader::ReadRecord`): a file that
ends where a record would start ends the records; one that ends inside a
record is a truncated record; a CRC32C that does not match is a corrupted
record. Both name the file and the record's offset. The CRCs are checked with
google_crc32c, the implementation ExampleGen's writer already uses.

Port register: docs/ports.md
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import google_crc32c

from components import store_files

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
# The constant TensorFlow's crc32c::Mask adds (tsl/lib/hash/crc32c.h, `kMaskDelta`).
_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> bytes:
    """The CRC32C of `data`, rotated right by 15 bits plus the mask delta, as TFRecord keeps it."""
    crc = google_crc32c.value(data)
    return _CRC.pack((((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF)


def tfrecord_frames(records: list[bytes]) -> bytes:
    """`records` in TFRecord framing: length, its masked CRC32C, the data, its masked CRC32C."""
    parts = []
    for record in records:
        length = _LENGTH.pack(len(record))
        parts += [length, masked_crc32c(length), record, masked_crc32c(record)]
    return b"".join(parts)


class RecordError(ValueError):
    """A TFRecord file that ends inside a record, or whose checksum does not match."""


def _checksummed(data: bytes, at: int, size: int, path: str, record_at: int) -> bytes:
    """`size` bytes at `at` followed by their masked CRC32C: the bytes, checked. Errors name
    the record's first byte, `record_at`."""
    end = at + size + _CRC.size
    if end > len(data):
        raise RecordError(
            f"{path}: truncated record at byte {record_at} (the file ends at byte {len(data)})"
        )
    body = data[at : at + size]
    if data[at + size : end] != masked_crc32c(body):
        raise RecordError(
            f"{path}: corrupted record at byte {record_at} (its CRC32C does not match)"
        )
    return body


def read_records(path: str) -> Iterator[bytes]:
    """Each record of an uncompressed TFRecord file at `path` (local or s3://), in order."""
    with store_files.open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        (length,) = _LENGTH.unpack(_checksummed(data, at, _LENGTH.size, path, at))
        body_at = at + _LENGTH.size + _CRC.size
        yield _checksummed(data, body_at, length, path, at)
        at = body_at + length + _CRC.size
