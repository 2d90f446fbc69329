"""ExampleGen's Parquet reader: a Beam element per row group, each read by pyarrow and its
columns cast to their features (components/example_gen/parquet_columns.py holds the type
mapping, the merge over files, and the casts).

TFX's Parquet executor (`custom_executors/parquet_executor.py`) turns each row
into a Python dict and each value into a Feature with `if not pyval:` in the
way, so 0, 0.0, False and "" become missing (tensorflow/tfx#6407). Here no row
is ever a Python object. Each row group is a Beam element, so a large file is
read by several workers on a multi-processing or cluster runner.
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam
from tfx_bsl.coders.csv_decoder import ColumnType

from components.example_gen.parquet_columns import check_values, plan_files, read_row_group


def _open(path: str) -> Any:
    return beam.io.filesystems.FileSystems.open(
        path, compression_type=beam.io.filesystem.CompressionTypes.UNCOMPRESSED
    )


def parquet_batches(
    root: beam.pvalue.PBegin,
    files: list[str],
    ignore: tuple[str, ...] = (),
    text: tuple[str, ...] = (),
    columns: tuple[str, ...] | None = None,
    skip_unsupported: bool = False,
) -> tuple[beam.PCollection, dict[str, ColumnType]]:
    """ExampleGen's Parquet reader (components/example_gen/executor.py): batches of typed columns,
    and each column's kind. The footers are read here, before the pipeline runs; only
    the columns read are ever read (`plan_files`: not `ignore`d, within `columns`).
    `text` is for CSV: a Parquet column's type is written in the file (a string column's
    `007` stays `007`; an int64 column holds numbers)."""
    del text
    plan = plan_files(files, _open, ignore, columns=columns, skip_unsupported=skip_unsupported)
    # Kubeflow runs no runner's check: the same refusal, before the pipeline runs.
    check_values(plan, files, _open)
    batches = (
        root
        | "RowGroups" >> beam.Create(plan.row_groups)
        | "ReadRowGroups" >> beam.FlatMap(read_row_group, plan, _open)
    )
    return batches, {name: ColumnType[kind] for name, kind in plan.kinds.items()}
