"""Raw CSV rows -> serialized tf.Examples, typed by the schema: a test helper.

This is what a client of the serving signature sends; tests use it to score
raw rows, encoded as ExampleGen encodes them. A cell that does not parse
as its column's type is an error naming the column, as it is for
ExampleGen: "1.7" in an int column is not 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2


def _parsed(kind: type, column: str, value: str):
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"column {column!r}: {value!r} is not {kind.__name__}") from None


def serialize_rows(
    rows: Iterable[Mapping[str, str]],
    schema: schema_pb2.Schema,
    *,
    drop: Iterable[str] = (),
) -> list[bytes]:
    """Encodes CSV-style string rows; empty cells become features with no values."""
    types = {f.name: f.type for f in schema.feature}
    dropped = set(drop)
    serialized = []
    for row in rows:
        feature = {}
        for name, value in row.items():
            if name in dropped or name not in types:
                continue
            kind = types[name]
            if kind == schema_pb2.FLOAT:
                floats = [_parsed(float, name, value)] if value != "" else []
                feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=floats))
            elif kind == schema_pb2.INT:
                ints = [_parsed(int, name, value)] if value != "" else []
                feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=ints))
            else:
                strings = [value.encode()] if value != "" else []
                feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=strings))
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        serialized.append(example.SerializeToString())
    return serialized
