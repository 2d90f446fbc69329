"""Profiling: one pass over the CSV files, and what each column holds.

The pass reads every row once: it counts each column's values over the first
MAX_ROWS_READ rows (the profiles the draft decides from) and keeps a seeded
reservoir sample of rows drawn across all of them (the drift noise's). A file
that is not UTF-8 or not CSV is a DraftError naming the file and line.
"""

from __future__ import annotations

import csv
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from components.example_gen.csv_header import csv_reader
from pipeline import object_store
from pipeline.inputs import InputDataError, check_utf8

# Rows read for the spec's decisions; the schema's statistics use all rows.
MAX_ROWS_READ = 200_000
# Good-Turing share of unseen values: UNSEEN_MULTIPLE times the share of values
# seen once, within these bounds (schema.py explains the use).
UNSEEN_MULTIPLE = 3.0
UNSEEN_SHARE_BOUNDS = (0.02, 0.2)
# Rows counted at a time.
_CHUNK = 10_000
# The index of a column a file lacks: past any row's end.
_ABSENT = 1 << 62
# Value types from narrowest to widest: a column is the narrowest every value parses as.
VALUE_TYPES = ("int", "float", "string")


class DraftError(ValueError):
    """The data cannot be drafted as asked; the message says why."""


def number(value: float) -> str:
    """A number as the drafted files write it (six significant digits)."""
    return f"{value:.6g}"


def finite(values) -> list[float]:
    """The values that are not NaN (min() of a list holding NaN depends on its order)."""
    return [v for v in values if not (isinstance(v, float) and math.isnan(v))] or [0]


@dataclass(frozen=True)
class ColumnProfile:
    """What the draft knows of one column, from the rows it read."""

    name: str
    value_type: str  # int | float | string, as ExampleGen types it
    rows: int
    missing: int
    counts: Counter

    @property
    def present(self) -> int:
        return self.rows - self.missing

    @property
    def distinct(self) -> int:
        return len(self.counts)

    def numbers(self) -> list[float]:
        """Every present value, as a float (a numeric column's)."""
        return [float(v) for v, n in self.counts.items() for _ in range(n)]

    @property
    def nan_count(self) -> int:
        """Cells that read as NaN (a float column's "NaN", "nan")."""
        if self.value_type != "float":
            return 0
        return sum(n for v, n in self.counts.items() if math.isnan(v))

    @property
    def singletons(self) -> int:
        """Values seen exactly once."""
        return sum(1 for n in self.counts.values() if n == 1)

    def unseen_share(self) -> float:
        """The share of values a new sample may hold that this one has not shown: the
        Good-Turing estimate (values seen once, over all values), with a margin."""
        estimate = UNSEEN_MULTIPLE * self.singletons / max(self.present, 1)
        low, high = UNSEEN_SHARE_BOUNDS
        return min(high, max(low, math.ceil(estimate * 100) / 100))

    def describe(self) -> str:
        text = f"{self.value_type}, {self.distinct} distinct"
        if self.missing:
            text += f", {self.missing} of {self.rows} missing"
        if self.value_type != "string" and self.counts:
            values = finite(self.counts)
            text += f", {number(min(values))}..{number(max(values))}"
        if self.nan_count:
            text += f", {self.nan_count} NaN"
        return text


@dataclass(frozen=True)
class DataRead:
    """What the one pass over the data kept, as the cells' text (`missing_cell` where
    missing: "" for a CSV, where an empty cell is missing; None for Parquet, where ""
    is a value, as ExampleGen writes it).

    `counts` and `missing` cover the first `rows` rows (at most MAX_ROWS_READ);
    `sample` holds up to the sample size of rows drawn evenly across all of
    them, each a tuple in `columns`' order.
    """

    columns: tuple[str, ...]
    rows: int
    counts: dict[str, Counter[str | None]]
    missing: Counter[str]
    sample: list[tuple[str | None, ...]]
    missing_cell: str | None = ""


def read_data(csv_files: Sequence[str], columns: Sequence[str], *, sample_size: int) -> DataRead:
    """One pass over `csv_files`: counts for the profiles, and a reservoir sample.

    The sample is seeded (the same draft from the same data) and drawn across
    the data, not taken from its head: sorted or time-ordered data would
    otherwise measure the noise of its first rows only.
    """
    collector = RowCollector(columns, sample_size)
    for path in csv_files:
        with object_store.open_binary(path) as f:
            reader = csv_reader(f)  # the header as the runner's check reads it
            rows_read = (cells for cells in reader if cells)  # a blank line is no row
            try:
                header = {name: i for i, name in enumerate(next(rows_read, []))}
                at = [header.get(name, _ABSENT) for name in collector.columns]
                for cells in rows_read:
                    # A short row's last cells, and a column the file lacks, are empty.
                    collector.add(tuple(cells[i] if i < len(cells) else "" for i in at))
            except csv.Error as err:
                raise DraftError(f"{path}: line {reader.line_num}: {err}") from None
            except UnicodeDecodeError:
                _raise_not_utf8(path)
                raise
    return collector.result()


class RowCollector:
    """The pass's bookkeeping over rows of cell text, whatever the files' format: counts
    over the first MAX_ROWS_READ rows, and a seeded reservoir sample of all of them."""

    def __init__(self, columns: Sequence[str], sample_size: int, missing_cell: str | None = ""):
        self.columns = tuple(columns)
        self._missing_cell = missing_cell
        self._sample_size = sample_size
        self._counts: dict[str, Counter[str | None]] = {name: Counter() for name in self.columns}
        # Counted a chunk at a time (Counter is C).
        self._profiled: list[tuple[str | None, ...]] = []
        self._sample: list[tuple[str | None, ...]] = []
        self._chooser = random.Random(0)
        self._rows = self._seen = 0

    def add(self, values: tuple[str | None, ...]) -> None:
        if self._rows < MAX_ROWS_READ:
            self._rows += 1
            self._profiled.append(values)
            if len(self._profiled) == _CHUNK:
                _count(self._profiled, self.columns, self._counts)
        if len(self._sample) < self._sample_size:
            self._sample.append(values)
        else:
            slot = self._chooser.randrange(self._seen + 1)
            if slot < self._sample_size:
                self._sample[slot] = values
        self._seen += 1

    def result(self) -> DataRead:
        _count(self._profiled, self.columns, self._counts)
        missing = Counter(
            {name: found.pop(self._missing_cell, 0) for name, found in self._counts.items()}
        )
        return DataRead(
            self.columns, self._rows, self._counts, missing, self._sample, self._missing_cell
        )


def _count(rows: list[tuple[str | None, ...]], columns: tuple[str, ...], counts) -> None:
    """Adds `rows`' cells to each column's counts (the empty cell too), and empties `rows`."""
    if rows:
        for name, cells in zip(columns, zip(*rows, strict=True), strict=True):
            counts[name].update(cells)
    rows.clear()


def _raise_not_utf8(path: str) -> None:
    """A DraftError naming the line where `path` stops being UTF-8 (the decoder reads ahead)."""
    try:
        check_utf8(path)
    except InputDataError as err:
        raise DraftError(str(err)) from None


def _typed(value: str, value_type: str):
    if value_type == "int":
        return int(value)
    if value_type == "float":
        return float(value)
    return value


def _typed_counts(counts: Counter, at_least: str) -> tuple[str, Counter]:
    """The narrowest of VALUE_TYPES, no narrower than `at_least`, that parses every value
    counted in `counts`, and the counts keyed by the values so parsed."""
    for value_type in VALUE_TYPES[VALUE_TYPES.index(at_least) :]:
        typed: Counter = Counter()
        try:
            for value, n in counts.items():
                typed[_typed(value, value_type)] += n
        except ValueError:
            continue
        return value_type, typed
    raise AssertionError("every value parses as a string")


def profiles_of(data: DataRead, types: dict[str, str]) -> dict[str, ColumnProfile]:
    """Each of `types`' columns profiled from the pass's counts.

    `types` are TFDV's, inferred from one span's statistics; a column is
    widened where the rows read hold a value that type cannot take (a `2.5`
    in an older span of a column the latest types int): the draft's types come
    from the same rows as its profiles.
    """
    profiles = {}
    for name, value_type in types.items():
        widened, typed = _typed_counts(data.counts[name], at_least=value_type)
        profiles[name] = ColumnProfile(name, widened, data.rows, data.missing[name], typed)
    return profiles


def read_profiles(csv_files: Sequence[str], types: dict[str, str]) -> dict[str, ColumnProfile]:
    """Each column's profile over the rows of `csv_files` (at most MAX_ROWS_READ)."""
    return profiles_of(read_data(csv_files, list(types), sample_size=0), types)
