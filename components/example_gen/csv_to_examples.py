"""ExampleGen's CSV reader: pyarrow parses, tf.Examples are encoded a batch at a time.

TFX's CSV executor parses each line with Python's `csv` module and builds a
`tf.train.Example` per row in Python: about 6,000 rows/s here, four fifths of
ExampleGen's time on a 1.5M-row file. This reader replaces it (`csv_batches`:
ExampleGen's reader for CSV, components/example_gen/executor.py), still a Beam pipeline
so that it scales out, a file per worker, on a cluster engine:

1. `InferColumnTypes`: each file is parsed by pyarrow's C++ reader, every
   column as text, and each column typed by the rule TFX's CSV executor uses
   (tfx_bsl's `ColumnTypeInferrer`): INT if every non-empty cell is a 64-bit
   integer, else FLOAT if every one is a float, else STRING; UNKNOWN when the
   column is empty throughout. The rule is decided on whole columns with two
   regular expressions; a cell neither matches is decided by Python's
   `int()`/`float()` as TFX decides it.
2. `ReadBlocks`: the files again, in blocks of rows.
3. `TypeColumns`: each block's text columns as int64, float32 or binary
   columns, an empty cell null, which components/example_gen/encoding.py encodes
   as every reader's: byte for byte the *deterministic* serialization of the
   Example TFX would build (features in name order). ExampleGen's split is a
   hash of exactly those bytes, so every row lands in the split it lands in
   under the stock executor.

The two are compared on the same files in tests/test_csv_to_examples.py:
identical examples per split, including the corner cases of the type rule.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
from tfx_bsl.coders.csv_decoder import ColumnType

from components.example_gen.csv_header import CsvHeaderError, read_header
from components.example_gen.text_encoding import non_utf8_line

# Bytes of CSV per block: ~8,000 taxi rows, a few MB of Examples per block.
BLOCK_BYTES = 1 << 20

# Cells these match are ints (floats) by Python's int() (float()) and by
# arrow's casts alike. Anything else that is not empty ("+1", " 2", "1_000",
# "nan", "inf") is typed and converted by Python's own rule.
_INT_CELL = r"^-?[0-9]+$"
_FLOAT_CELL = r"^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"

_INT64_MIN, _INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


class CsvError(ValueError):
    """A CSV file ExampleGen cannot read; names the file."""


def python_cell_type(cell: bytes) -> ColumnType:
    """The type TFX's CSV executor gives one cell (tfx_bsl's csv_decoder rule)."""
    if not cell:
        return ColumnType.UNKNOWN
    try:
        # An int beyond 64 bits is a string, not a float.
        return ColumnType.INT if _INT64_MIN <= int(cell) <= _INT64_MAX else ColumnType.STRING
    except ValueError:
        try:
            float(cell)
        except ValueError:
            return ColumnType.STRING
        return ColumnType.FLOAT


def _matches(column: pa.Array, pattern: str) -> np.ndarray:
    return pc.match_substring_regex(column, pattern).to_numpy(zero_copy_only=False)


def column_type(column: pa.Array) -> ColumnType:
    """The type of one column of cells (text), as TFX's CSV executor infers it."""
    non_empty = pc.binary_length(column).to_numpy(zero_copy_only=False) > 0
    ints = _matches(column, _INT_CELL)
    floats = _matches(column, _FLOAT_CELL) & ~ints
    found = [ColumnType.UNKNOWN]
    if ints.any():
        try:
            column.filter(pa.array(ints)).cast(pa.int64())
            found.append(ColumnType.INT)
        except pa.ArrowInvalid:  # beyond 64 bits somewhere
            unique = pc.unique(column.filter(pa.array(ints))).cast(pa.binary()).to_pylist()
            found += [python_cell_type(c) for c in unique]
    if floats.any():
        found.append(ColumnType.FLOAT)
    others = non_empty & ~ints & ~floats
    if others.any():
        unique = pc.unique(column.filter(pa.array(others))).cast(pa.binary()).to_pylist()
        found += [python_cell_type(c) for c in unique]
    return max(found)


def merge_types(
    column_names: list[str], per_file: list[dict[str, ColumnType]]
) -> dict[str, ColumnType]:
    """Each column's type over several blocks or files: the highest of INT < FLOAT < STRING."""
    return {
        name: max((types[name] for types in per_file), default=ColumnType.UNKNOWN)
        for name in column_names
    }


class _QuoteCountingFile:
    """A binary file that counts the double quotes read from it.

    pyarrow takes a quote left open at the end of a file as closed there; TFX's
    reader refuses the file ("unbalanced quotes"), and so does this one.
    """

    def __init__(self, file: Any):
        self._file = file
        self.quotes = 0
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        self.quotes += data.count(b'"')
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def read_blocks(
    path: str, column_names: list[str], keep: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """A CSV file's rows as blocks of text columns; empty cells stay empty strings.
    `keep`: the columns kept (every row is still parsed whole: a cell count is checked)."""
    read = pa_csv.ReadOptions(block_size=BLOCK_BYTES)
    # Quoted cells may hold line breaks, as TFX's reader allows.
    parse = pa_csv.ParseOptions(newlines_in_values=True)
    convert = pa_csv.ConvertOptions(
        column_types={name: pa.string() for name in column_names},
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    with beam.io.filesystems.FileSystems.open(path) as f:
        counted = _QuoteCountingFile(f)
        try:
            reader = pa_csv.open_csv(
                counted, read_options=read, parse_options=parse, convert_options=convert
            )
            for block in reader:
                if block.schema.names != column_names:
                    raise CsvError(
                        f"CSV file {path}: columns {block.schema.names}, header {column_names}"
                    )
                if keep is not None and keep != column_names:
                    block = pa.RecordBatch.from_arrays([block.column(n) for n in keep], keep)
                yield block
        except (pa.ArrowInvalid, UnicodeDecodeError) as err:
            problem = _non_utf8_line(path) or str(err)
            if _COLUMN_COUNT.search(problem):
                problem += f"; {_COLUMN_COUNT_HINT}"
            raise CsvError(f"CSV file {path}: {problem}") from None
        if counted.quotes % 2:
            raise CsvError(f"CSV file {path}: a quoted cell is never closed (unbalanced quotes)")


# pyarrow's message for a row whose cells do not match the header's columns.
_COLUMN_COUNT = re.compile(r"Expected \d+ columns, got \d+")
_COLUMN_COUNT_HINT = (
    "every row needs one cell per column of the header: quote a cell that holds a comma, "
    'and double a quote inside one ("" as Excel, R and pandas write it; Spark escapes it '
    'with a backslash unless written with .option("escape", \'"\'))'
)


def _non_utf8_line(path: str) -> str | None:
    """Where `path` stops being UTF-8 (read again: only on a failed read)."""
    with beam.io.filesystems.FileSystems.open(path) as f:
        return non_utf8_line(f)


# --- typing -------------------------------------------------------------------


def _cells_as(column: pa.Array, present: np.ndarray, kind: ColumnType) -> np.ndarray:
    """The present cells of a numeric column as int64 or float32; absent rows hold 0."""
    dtype = np.int64 if kind == ColumnType.INT else np.float32
    fast = _matches(column, _INT_CELL if kind == ColumnType.INT else _FLOAT_CELL)
    if kind == ColumnType.FLOAT:
        fast |= _matches(column, _INT_CELL)
    values = np.zeros(len(column), dtype=dtype)
    if fast.any():
        arrow_type = pa.int64() if kind == ColumnType.INT else pa.float64()
        try:
            parsed = column.filter(pa.array(fast)).cast(arrow_type).to_numpy(zero_copy_only=False)
            # float64 -> float32 rounds as protobuf stores a Python float in a float field.
            values[fast] = parsed.astype(dtype)
        except pa.ArrowInvalid:  # e.g. "1e999", which Python reads as inf: Python's way
            fast[:] = False
    slow = present & ~fast
    if slow.any():
        parse = int if kind == ColumnType.INT else float
        cells = column.filter(pa.array(slow)).cast(pa.binary()).to_pylist()
        values[slow] = [parse(c) for c in cells]
    return values


def typed_batch(block: pa.RecordBatch, types: dict[str, ColumnType]) -> pa.RecordBatch:
    """A block of text columns typed as the encoder takes them (components/example_gen/encoding.py):
    int64, float32 or binary, an empty cell null; an UNKNOWN column stays as it is."""
    columns = []
    for name in block.schema.names:
        column, kind = block.column(name), types[name]
        present = pc.binary_length(column).to_numpy(zero_copy_only=False) > 0
        if kind == ColumnType.UNKNOWN:
            pass
        elif kind == ColumnType.STRING:
            column = pc.if_else(pa.array(present), column.cast(pa.binary()), None)
        else:
            column = pa.array(_cells_as(column, present, kind), mask=~present)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, block.schema.names)


# --- the transform ------------------------------------------------------------


class _InferColumnTypes(beam.DoFn):
    def __init__(self, column_names: list[str], read: list[str]):
        self._column_names = column_names
        self._read = read

    def process(self, path: str) -> Iterator[dict[str, ColumnType]]:
        per_block = [
            {name: column_type(block.column(name)) for name in self._read}
            for block in read_blocks(path, self._column_names, self._read)
        ]
        yield merge_types(self._read, per_block)


class _MergeColumnTypes(beam.CombineFn):
    def __init__(self, column_names: list[str]):
        self._column_names = column_names

    def create_accumulator(self) -> dict[str, ColumnType]:
        return merge_types(self._column_names, [])

    def add_input(self, accumulator, types):
        return merge_types(self._column_names, [accumulator, types])

    def merge_accumulators(self, accumulators):
        return merge_types(self._column_names, list(accumulators))

    def extract_output(self, accumulator):
        return accumulator


def _column_names(pattern: str, files: list[str]) -> list[str]:
    """The header the files share, read by a CSV parser as pyarrow reads it (TFX's
    `load_csv_column_names` splits the first line on commas, quotes and all)."""
    try:
        headers = [read_header(path, beam.io.filesystems.FileSystems.open) for path in files]
    except CsvHeaderError as err:
        raise CsvError(str(err)) from None
    names = list(headers[0].columns)
    for path, header in zip(files[1:], headers[1:], strict=True):
        if list(header.columns) != names:
            raise CsvError(
                f"{path} has columns {list(header.columns)} but {files[0]} has {names}; "
                f"the files of {pattern} must share one header"
            )
    return names


def as_text(types: dict[str, ColumnType], text: tuple[str, ...]) -> dict[str, ColumnType]:
    """`types` with the `text` columns STRING: read as written (`007`, `07` and `7` are
    three keys), whatever the type rule would make of them."""
    return {name: ColumnType.STRING if name in text else kind for name, kind in types.items()}


def csv_batches(
    root: beam.pvalue.PBegin,
    files: list[str],
    ignore: tuple[str, ...] = (),
    text: tuple[str, ...] = (),
    columns: tuple[str, ...] | None = None,
    skip_unsupported: bool = False,
) -> tuple[beam.PCollection, beam.pvalue.AsSingleton]:
    """ExampleGen's CSV reader (components/example_gen/executor.py): batches of typed columns, and
    each column's kind (a side input: a first pass over the files infers them). Only the
    columns read are typed and kept: never one in `ignore`, nor one outside `columns` when
    given (scoring's). `text`: columns read as the text written (scoring's keys), never
    typed as numbers. `skip_unsupported` is for formats with columns no feature can
    hold; a CSV has none."""
    del skip_unsupported
    column_names = _column_names(os.path.dirname(files[0]), files)
    read = read_columns(column_names, ignore, columns)
    paths = root | "CreateFilenames" >> beam.Create(files)
    types = beam.pvalue.AsSingleton(
        paths
        | "InferColumnTypes" >> beam.ParDo(_InferColumnTypes(column_names, read))
        | "MergeColumnTypes" >> beam.CombineGlobally(_MergeColumnTypes(read))
        | "ColumnsAsText" >> beam.Map(as_text, text)
    )
    # Read, typed, encoded, split and written in one stage, a block at a time:
    # memory stays a few blocks per worker. (Spreading one file's blocks over
    # the workers with a Reshuffle gained nothing on 1.5M rows, 33 s against
    # 31 s, and held the file in the runner: +0.3 GB.)
    blocks = paths | "ReadBlocks" >> beam.FlatMap(read_blocks, column_names, read)
    return blocks | "TypeColumns" >> beam.Map(typed_batch, types), types


def read_columns(
    header: Iterable[str], ignore: Iterable[str] = (), columns: Iterable[str] | None = None
) -> list[str]:
    """The columns of a CSV `header` that are read: not ignored, and within `columns`."""
    ignored, wanted = set(ignore), None if columns is None else set(columns)
    return [n for n in header if n not in ignored and (wanted is None or n in wanted)]
