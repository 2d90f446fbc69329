"""ExampleGen's input settings as the compiled DAG passes them: the window and the input config.

Which spans an execution reads, and their fingerprint, is
components/example_gen/span_resolution.py's (TFX's resolution, ported without TFX): the
InputSnapshot step's pod runs it without TensorFlow. This module builds the
settings it reads: `input_window`, and `input_config`, TFX's input proto,
which the compiler and TFX's driver take.
"""

from __future__ import annotations

import json
from typing import Any

from tfx.proto import example_gen_pb2


def input_window(
    pattern: str | None,
    spans: int,
    format: str | None = None,
    ignore: tuple[str, ...] = (),
    text: tuple[str, ...] = (),
    skip_unsupported: bool = False,
    columns: tuple[str, ...] | None = None,
) -> str:
    """The `input_window` execution property: the raw pattern and the window size; the
    files' format where the dataset spec names one (`input.format`), the columns it
    ignores (a Parquet column no feature can hold is skipped only if ignored), and the
    columns read as the text written (scoring's keys: a CSV's `007` stays `007`);
    `skip_unsupported` (scoring): every column no feature can hold is skipped, as if
    ignored, since the model never read one; `columns` (scoring): the only columns read,
    those the model and the keys use (None: every column not ignored)."""
    window: dict[str, Any] = {"pattern": pattern, "spans": spans}
    if format is not None:
        window["format"] = format
    if ignore:
        window["ignore"] = sorted(ignore)
    if text:
        window["text"] = sorted(text)
    if skip_unsupported:
        window["skip_unsupported"] = True
    if columns is not None:
        window["columns"] = sorted(columns)
    return json.dumps(window, sort_keys=True)


def input_config(pattern: str | None) -> example_gen_pb2.Input:
    """ExampleGen's input config: one split, `pattern` or (None) every file under the root,
    TFX's default (tfx 1.16, tfx/components/example_gen/utils.py, lines 209-215, spelled
    out: that module is inside TFX's component package)."""
    return example_gen_pb2.Input(
        splits=[
            example_gen_pb2.Input.Split(
                name="single_split", pattern="*" if pattern is None else pattern
            )
        ]
    )
