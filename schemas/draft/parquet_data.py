"""The draft's pass over Parquet files: the rows the CSV path's pass takes.

Each row group is read and cast as ExampleGen casts it
(components/parquet_columns.py), over every file the run reads, so each
column's type is the one merged over all of them. The rows reach the
profiles as cell text, as a CSV's would (a missing value is ""); TFDV's
statistics come from ExampleGen's own reading (statistics.py), as for CSV.
List columns are left out of the profiles (each cell reads as missing), so
the draft ignores them; a fork adds one as a feature by hand.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from components.parquet_columns import ParquetPlan, read_row_group
from pipeline import object_store
from schemas.draft.profiles import DataRead, RowCollector


def _batches(plan: ParquetPlan) -> Iterator[pa.RecordBatch]:
    for unit in plan.row_groups:
        yield from read_row_group(unit, plan, object_store.open_binary)


def _cells(column: pa.Array) -> list[str]:
    """A feature column's cells as a CSV would hold them ("" where missing)."""
    if pa.types.is_list(column.type):
        return [""] * len(column)
    values = column.to_pylist()
    if pa.types.is_binary(column.type):
        return ["" if v is None else v.decode("utf-8", "backslashreplace") for v in values]
    if pa.types.is_floating(column.type):
        return ["" if v is None else repr(v) for v in values]
    return ["" if v is None else str(v) for v in values]


def read_parquet_data(plan: ParquetPlan, *, sample_size: int) -> DataRead:
    """profiles.read_data's pass, over Parquet row groups."""
    collector = RowCollector(plan.column_names, sample_size)
    for batch in _batches(plan):
        cells = {name: _cells(batch.column(name)) for name in batch.schema.names}
        empty = [""] * batch.num_rows
        for row in zip(*(cells.get(name, empty) for name in collector.columns), strict=True):
            collector.add(row)
    return collector.result()
