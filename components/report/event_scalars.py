"""Scalars from TensorBoard event files, read without TensorFlow.

An event file is a TFRecord file of `Event` protos (components/tfrecords.py).
TensorBoard ships the `Event` proto in `tensorboard.compat.proto`, whose import
loads protobuf alone (tensorboard's own `__init__` loads its submodules lazily),
under the proto package `tensorboard`, so it sits beside TensorFlow's
`tensorflow.Event` in a process that loads both.

Port register: docs/ports.md
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from components import store_files
from components.tfrecords import read_records

_EVENT_FILE_MARK = "tfevents"

# What `tf.make_ndarray` reads for a numeric dtype (TF 2.16.2,
# tensorflow/python/framework/tensor_util.py, `MakeNdarray`, lines 660-733):
# the value field it takes per DataType (types.proto's numbers), and the numpy
# format of the same dtype in `tensor_content` (line 665). Only these dtypes
# convert to a numpy kind of "f", "i" or "u" (the kinds the curves keep);
# bfloat16, float8, int4 and the quantized types convert to numpy's "V" kind
# through ml_dtypes and TF's structured dtypes, and strings, bools and complex
# numbers are not numbers the curves keep.
_NUMERIC_DTYPES: dict[int, tuple[str, str]] = {
    1: ("float_val", "<f"),  # DT_FLOAT, line 689
    2: ("double_val", "<d"),  # DT_DOUBLE, line 691
    3: ("int_val", "<i"),  # DT_INT32, lines 693-707
    4: ("int_val", "<B"),  # DT_UINT8
    5: ("int_val", "<h"),  # DT_INT16
    6: ("int_val", "<b"),  # DT_INT8
    17: ("int_val", "<H"),  # DT_UINT16
    9: ("int64_val", "<q"),  # DT_INT64, line 708
    22: ("uint32_val", "<I"),  # DT_UINT32, line 710
    23: ("uint64_val", "<Q"),  # DT_UINT64, line 712
    19: ("half_val", "<e"),  # DT_HALF: a float16's bits in an int field, lines 678-682
}


def _scalar(tensor) -> float | None:
    """A rank-0 numeric TensorProto's value as `float(tf.make_ndarray(tensor))` gives it, or
    None where the curves skip the tensor (another rank or a dtype that is not a number)."""
    if len(tensor.tensor_shape.dim) != 0 or tensor.dtype not in _NUMERIC_DTYPES:
        return None
    field_name, content_format = _NUMERIC_DTYPES[tensor.dtype]
    if tensor.tensor_content:  # line 665: the raw bytes, reshaped to the (empty) shape
        (value,) = struct.unpack(content_format, tensor.tensor_content)
        return float(value)
    values = getattr(tensor, field_name)
    if not values:  # lines 727-728: no values is zeros of the shape
        return 0.0
    # A scalar takes the first value (more would not reshape to a scalar, line 733).
    if field_name == "half_val":
        return float(struct.unpack("<e", struct.pack("<H", values[0] & 0xFFFF))[0])
    return float(values[0])


def scalar_events(directory: str) -> Iterator[tuple[str, int, float]]:
    """(tag, step, value) of every scalar in the event files of `directory`, files by name."""
    from tensorboard.compat.proto import event_pb2

    for name in sorted(store_files.listdir(directory)):
        if _EVENT_FILE_MARK not in name:
            continue
        path = os.path.join(directory, name.rstrip("/"))
        for record in read_records(path):
            event = event_pb2.Event.FromString(record)
            for value in event.summary.value:
                if value.HasField("tensor"):
                    number = _scalar(value.tensor)
                    if number is not None:
                        yield value.tag, int(event.step), number
                elif value.HasField("simple_value"):
                    yield value.tag, int(event.step), float(value.simple_value)
