"""The draft's pass over Parquet files: the rows the CSV path's pass takes.

Each row group is read and cast as ExampleGen casts it
(components/example_gen/parquet_columns.py), over every file the run reads, so each
column's type is the one merged over all of them. The rows reach the
profiles as cell text, as a CSV's would, except that a missing value is None:
a Parquet `""` is a value, as ExampleGen writes it (a CSV's empty cell is
missing); TFDV's statistics come from ExampleGen's own reading
(statistics.py), as for CSV.
List columns are left out of the profiles, and pandas' index columns
(`__index_level_0__`, a named index) are row labels, not data: the draft
ignores both, saying so (`not_features`); a fork adds a list as a feature by
hand.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from components.example_gen.parquet_columns import ParquetPlan, read_row_group
from components.example_gen.parquet_files import footer_schema
from pipeline import object_store
from schemas.draft.profiles import DataRead, RowCollector


def _batches(plan: ParquetPlan) -> Iterator[pa.RecordBatch]:
    for unit in plan.row_groups:
        yield from read_row_group(unit, plan, object_store.open_binary)


def _cells(column: pa.Array) -> list[str | None]:
    """A feature column's cells as a CSV would hold them (None where missing: a `""` is a
    value); a list column's are all missing (`not_features` says why it is ignored)."""
    if pa.types.is_list(column.type):
        return [None] * len(column)
    values = column.to_pylist()
    if pa.types.is_binary(column.type):
        return [None if v is None else v.decode("utf-8", "backslashreplace") for v in values]
    if pa.types.is_floating(column.type):
        return [None if v is None else repr(v) for v in values]
    return [None if v is None else str(v) for v in values]


def read_parquet_data(plan: ParquetPlan, *, sample_size: int) -> DataRead:
    """profiles.read_data's pass, over Parquet row groups."""
    collector = RowCollector(plan.column_names, sample_size, missing_cell=None)
    for batch in _batches(plan):
        cells = {name: _cells(batch.column(name)) for name in batch.schema.names}
        empty: list[str | None] = [None] * batch.num_rows
        for row in zip(*(cells.get(name, empty) for name in collector.columns), strict=True):
            collector.add(row)
    return collector.result()


def not_features(plan: ParquetPlan) -> dict[str, str]:
    """Columns the draft ignores whatever they hold, and why: list columns (the profiles
    take single values) and the index pandas wrote beside the frame's columns."""
    reasons = {
        name: "a list column: the draft profiles single values; add it as a feature by hand"
        for name, feature in plan.types.items()
        if feature.is_list
    }
    for path in sorted({path for path, _ in plan.row_groups}):
        metadata = footer_schema(path, object_store.open_binary).pandas_metadata or {}
        # A RangeIndex is kept as a description ({"kind": "range", ...}), not a column.
        for name in metadata.get("index_columns", ()):
            if isinstance(name, str):
                reasons[name] = "pandas' index (to_parquet wrote the row labels): not data"
    return reasons
