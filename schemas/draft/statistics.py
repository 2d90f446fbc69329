"""The statistics the draft infers types from: TFDV's, over the examples a run's
ExampleGen would write from the same files.

TFDV's `generate_statistics_from_csv` reads CSV a line at a time (Beam's
ReadFromText): a quoted cell holding a line break, or a file whose lines end in
CR alone (Excel's "CSV (Macintosh)"), fails there with a traceback, and a quoted
header or a byte-order mark names the columns differently from the run. Here
the rows go through ExampleGen's own reader (components/example_gen/csv_to_examples.py,
pyarrow) and are encoded as its tf.Examples, so the draft types what the run
reads, and a file the run cannot read is a DraftError naming it.

The examples are decoded as StatisticsGen decodes them, with one change: an
empty cell (a feature with no values) is counted missing, as TFDV's CSV decoder
counts it, so presence and value counts are inferred as they were from CSV
(schema.py relaxes them for every column but the label).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Sequence

from pipeline.beam import IN_MEMORY_RUNNER_ARG
from schemas.draft.profiles import DraftError

# Beam appends where an error was raised: "... [while running 'ReadBlocks']".
_BEAM_STEP = re.compile(r" \[while running '.*'\]$", re.DOTALL)
# Beam logs a step's error with its traceback before raising it (apache_beam
# 2.74, runners/common.py, DoFnRunner._reraise_augmented); the draft says it in
# one line, and an error it does not expect still raises with its traceback.
_BEAM_STEP_LOGGER = "apache_beam.runners.common"


def example_statistics(
    data_root: str,
    patterns: Sequence[str],
    columns: Sequence[str],
    data_format: str,
    ignore: Sequence[str] = (),
):
    """TFDV's DatasetFeatureStatisticsList of the examples ExampleGen reads from the files
    `patterns` (globs relative to `data_root`, as ExampleGen's split patterns) name, in
    `data_format`, its features in the order of `columns` (the data's; examples sort
    theirs); `ignore`: the columns ignored (one no feature can hold is skipped)."""
    import apache_beam as beam
    import tensorflow_data_validation as tfdv

    from components.example_gen.csv_to_examples import CsvError
    from components.example_gen.parquet_files import ParquetError
    from components.example_gen.read_examples import ReadExamples

    with tempfile.TemporaryDirectory() as scratch:
        output = os.path.join(scratch, "statistics.tfrecord")
        try:
            with (
                _beam_step_errors_unlogged(),
                beam.Pipeline(argv=[IN_MEMORY_RUNNER_ARG]) as pipeline,
            ):
                _ = (
                    pipeline
                    | "ReadExamples"
                    >> ReadExamples(
                        data_root, list(patterns), {"format": data_format, "ignore": list(ignore)}
                    )
                    | "Decode" >> beam.Map(_decode)
                    | "Statistics" >> tfdv.GenerateStatistics(tfdv.StatsOptions())
                    | "Write" >> tfdv.WriteStatisticsToTFRecord(output)
                )
        except (CsvError, ParquetError) as err:
            raise DraftError(_BEAM_STEP.sub("", str(err))) from None
        statistics = tfdv.load_statistics(output)
    features = statistics.datasets[0].features
    position = {name: i for i, name in enumerate(columns)}
    ordered = sorted(features, key=lambda f: position.get(f.path.step[0], len(position)))
    del features[:]
    features.extend(ordered)
    return statistics


@contextlib.contextmanager
def _beam_step_errors_unlogged() -> Iterator[None]:
    logger = logging.getLogger(_BEAM_STEP_LOGGER)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _decode(block: list[bytes]):
    """Serialized tf.Examples as a record batch, an empty list as missing (see above)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from tfx_bsl.coders.example_coder import ExamplesToRecordBatchDecoder

    batch = ExamplesToRecordBatchDecoder().DecodeBatch(block)
    columns = []
    for column in batch.columns:
        if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            empty = pc.equal(pc.list_value_length(column), 0)
            column = type(column).from_arrays(column.offsets, column.values, mask=empty)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, batch.schema.names)
