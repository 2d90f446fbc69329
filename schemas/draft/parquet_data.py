"""The draft's pass over Parquet files: the rows and the statistics the CSV path takes.

Each row group is read and cast as ExampleGen casts it
(components/parquet_columns.py), over every file the run reads, so each
column's type is the one merged over all of them. The rows reach the
profiles as cell text, as a CSV's would (a missing value is ""), and TFDV's
statistics are computed on the same columns as list arrays, the way
StatisticsGen will see the examples. List columns are left out of the
profiles (each cell reads as missing), so the draft ignores them; a fork adds
one as a feature by hand.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from components.parquet_columns import VALUE_TYPES, ParquetPlan, read_row_group
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


def parquet_statistics(plan: ParquetPlan):
    """TFDV's statistics of every row, each column a list array as in decoded examples."""
    from tensorflow_data_validation.statistics import stats_impl, stats_options
    from tfx_bsl.arrow import array_util

    batches = []
    for batch in _batches(plan):
        columns = []
        for name, feature in plan.types.items():
            if name in batch.schema.names:
                column = batch.column(name)
            else:  # a file that lacks the column: missing in its rows
                value_type = VALUE_TYPES[feature.kind]
                column = pa.nulls(
                    batch.num_rows, pa.list_(value_type) if feature.is_list else value_type
                )
            if not pa.types.is_list(column.type):
                column = array_util.ToSingletonListArray(column)
            columns.append(column)
        batches.append(pa.RecordBatch.from_arrays(columns, list(plan.types)))
    table = pa.Table.from_batches(batches)
    whole = pa.RecordBatch.from_arrays(
        [column.combine_chunks() for column in table.columns], table.schema.names
    )
    return stats_impl.generate_statistics_in_memory(whole, stats_options.StatsOptions())
