"""ExampleGen's read: data files -> blocks of serialized tf.Examples (`ReadExamples`).

The ExampleGen step (components/example_gen/executor.py) reads its input with it, and
the draft (schemas/draft/statistics.py) reads the same files with it for
TFDV's types, so both see the examples a run writes. Nothing here imports
TFX's component package: `tfx.components.example_gen` runs
`tfx/components/__init__.py` (tfx 1.16, which imports every stock component
and, through the Evaluator's, TFMA), and the draft never defines or runs a
component. The split and write (components/example_gen/blocks.py) are TFX's and
stay there.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import apache_beam as beam
from absl import logging
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue
from tfx.dsl.io import fileio

from components.example_gen.csv_to_examples import csv_batches
from components.example_gen.encoding import encode_examples
from components.example_gen.input_files import (
    data_files,
    holds_rows,
    input_format,
    no_rows_message,
)
from components.example_gen.parquet_examples import feature_columns, feature_schema
from components.example_gen.parquet_to_examples import parquet_batches
from components.example_gen.span_resolution import InputPatternError
from components.example_gen.spans import glob_root

# The rows a source reads, counted in this namespace; components/example_gen/blocks.py
# counts those it writes beside them and compares the two (`check_rows_written`).
METRICS_NAMESPACE = "ExampleGen"
ROWS_READ = "rows_read"


def count_rows_read(rows: int) -> None:
    """Called for every batch read, as it is encoded (`_EncodeAhead`, below)."""
    Metrics.counter(METRICS_NAMESPACE, ROWS_READ).inc(rows)


class InOrderThread:
    """Work done on one thread of its own, in the order it was handed over, with at
    most `ahead` pieces waiting: what the GIL-free parts of one piece (Arrow's
    kernels, zlib) give a second core while the caller's thread goes on."""

    def __init__(self, name: str, ahead: int):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._ahead = ahead
        self._pending: deque[tuple[Any, Future]] = deque()

    def submit(self, tag: Any, work: Callable[..., Any], *args: Any) -> list[tuple[Any, Any]]:
        """Hands `work(*args)` over; returns (tag, result) of the oldest pieces, waited
        for while more than `ahead` wait (a piece's exception is raised here)."""
        self._pending.append((tag, self._pool.submit(work, *args)))
        done = []
        while len(self._pending) > self._ahead:
            done.append(self._done())
        return done

    def drain(self) -> list[tuple[Any, Any]]:
        """(tag, result) of every piece still waiting, in order; then the thread ends."""
        done = [self._done() for _ in range(len(self._pending))]
        self.close()
        return done

    def _done(self) -> tuple[Any, Any]:
        tag, future = self._pending.popleft()
        return tag, future.result()

    def close(self) -> None:
        """Ends the thread; pieces not yet started are dropped (a failed bundle's)."""
        self._pool.shutdown(cancel_futures=True)
        self._pending.clear()


# Format -> its reader: (pipeline root, files, ignored columns, columns read as text,
# the columns read (None: every one not ignored), whether to skip a column no feature
# can hold) -> (batches of typed columns, each column's kind: a dict or a side input).
READERS = {"csv": csv_batches, "parquet": parquet_batches}


def _open_binary(path: str) -> Any:
    return fileio.open(path, "rb")


def _size(path: str) -> int:
    """A file's bytes; a directory holds none to read (TFX's default pattern, `*`, lists them)."""
    return 0 if fileio.isdir(path) else fileio.stat(path).length


# Batches handed to the encoding thread and not yet written: memory stays this
# many batches ahead of the writer.
ENCODE_AHEAD = 2


def _examples_and_columns(batch, kinds) -> tuple[list[bytes], Any]:
    """A batch's tf.Examples, and its columns as tfx_bsl decodes those examples
    (components/example_gen/parquet_examples.py): ExampleGen writes both."""
    return encode_examples(batch, kinds), feature_columns(batch, kinds)


class _EncodeAhead(beam.DoFn):
    """Batches of typed columns -> blocks of serialized tf.Examples, in the order they came
    (with `with_columns`, each block paired with its rows' feature columns).

    Each batch is encoded on a thread of its own while Beam's thread reads and
    types the next, and splits and writes the last: the encoder's Arrow kernels
    let go of the GIL, so the two use both cores.
    """

    def __init__(self, with_columns: bool = False) -> None:
        self._with_columns = with_columns
        self._encoder: InOrderThread | None = None

    def _encode(self, batch, kinds):
        # encode_examples is looked up at each call: a test replaces it.
        if self._with_columns:
            return _examples_and_columns(batch, kinds)
        return encode_examples(batch, kinds)

    def start_bundle(self) -> None:
        self._encoder = InOrderThread("EncodeExamples", ENCODE_AHEAD)

    def process(self, batch, kinds) -> Iterator[list[bytes]]:
        assert self._encoder is not None
        for rows, examples in self._encoder.submit(batch.num_rows, self._encode, batch, kinds):
            count_rows_read(rows)  # on Beam's thread: its metrics are kept per thread
            yield examples

    def finish_bundle(self) -> Iterator[WindowedValue]:
        assert self._encoder is not None
        for rows, examples in self._encoder.drain():
            count_rows_read(rows)
            yield WindowedValue(examples, MIN_TIMESTAMP, [GlobalWindow()])

    def teardown(self) -> None:
        if self._encoder is not None:
            self._encoder.close()


def _typed_batches(
    root: beam.pvalue.PBegin, input_base: str, patterns: list[str], window: dict[str, Any]
) -> tuple[beam.PCollection, Any]:
    """The data files `patterns` name under `input_base` (every span of a window, read
    together: one set of columns and types), as batches of typed columns and their kinds."""
    by_pattern = {}
    for pattern in patterns:
        matched = data_files(fileio.glob(os.path.join(glob_root(input_base), pattern)), _size)
        if not matched:
            raise RuntimeError(
                f"Split pattern {os.path.join(input_base, pattern)} does not match any files."
            )
        by_pattern[pattern] = matched
    files = [path for matched in by_pattern.values() for path in matched]
    read_format = input_format(files, window.get("format"))
    for pattern, matched in by_pattern.items():
        # Kubeflow runs no runner's check (pipeline/inputs.py): an empty span stops here.
        # Without spans, a header alone gives empty splits, as TFX's CSV executor's do.
        if window.get("pattern") and not holds_rows(matched, read_format, _open_binary):
            raise InputPatternError(no_rows_message(os.path.join(input_base, pattern), matched))
    logging.info(
        "Reading %d %s file(s) under %s into tf.Examples.", len(files), read_format, input_base
    )
    columns = window.get("columns")
    return READERS[read_format](
        root,
        files,
        tuple(window.get("ignore", ())),
        tuple(window.get("text", ())),
        None if columns is None else tuple(columns),
        bool(window.get("skip_unsupported")),
    )


@beam.ptransform_fn
@beam.typehints.with_input_types(beam.Pipeline)
@beam.typehints.with_output_types(list[bytes])
def ReadExamples(
    root: beam.pvalue.PBegin, input_base: str, patterns: list[str], window: dict[str, Any]
) -> beam.PCollection:
    """The data files `patterns` name under `input_base` (every span of a window, read
    together: one set of columns and types), as blocks of serialized tf.Examples."""
    batches, kinds = _typed_batches(root, input_base, patterns, window)
    return batches | "EncodeExamples" >> beam.ParDo(_EncodeAhead(), kinds)


@beam.ptransform_fn
@beam.typehints.with_input_types(beam.Pipeline)
def ReadExamplesWithColumns(
    root: beam.pvalue.PBegin, input_base: str, patterns: list[str], window: dict[str, Any]
) -> tuple[beam.PCollection, beam.PCollection]:
    """`ReadExamples`, each block paired with its rows' feature columns (a record
    batch, row for row: components/example_gen/parquet_examples.py), for ExampleGen's two outputs;
    and the columns' schema, one element (a split without rows still gets its file)."""
    batches, kinds = _typed_batches(root, input_base, patterns, window)
    blocks = batches | "EncodeExamples" >> beam.ParDo(_EncodeAhead(with_columns=True), kinds)
    if isinstance(kinds, dict):  # known before the pipeline runs (Parquet's footers)
        schema = root | "FeatureSchema" >> beam.Create([feature_schema(kinds)])
    else:  # a side input the pipeline computes (CSV's type inference)
        schema = kinds.pvalue | "FeatureSchema" >> beam.Map(feature_schema)
    return blocks, schema
