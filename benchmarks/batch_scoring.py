"""Batch scoring on many rows, beside the floor: the exported model's own batched calls.

    ./dev exec python -m benchmarks.batch_scoring --serving-dir outputs/serving_model
    ./dev exec python -m benchmarks.batch_scoring --serving-dir DIR --rows 150000

The rows are the embedded taxi sample repeated (benchmarks/scale.py's
`write_rows`) with a `trip_id` key, encoded as ExampleGen encodes them
(components/example_gen/encoding.py) into one gzipped TFRecord file: the input
the scorer gets from ExampleGen. Each measurement runs in a fresh process.

Ours: `score_partition` (components/scoring/executor.py) into a Parquet partition,
Beam in memory, as a local run of that size runs it. The floor, in one
process: read the records (tf.data), call `serving_default` on batches of the
same size, parse the key, and write keys and probabilities with pyarrow.
Peak memory is the process's maximum resident size.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks.scale import LARGE_ROWS, measured_in_python, write_rows

_OURS = """
import resource, sys, time
from pathlib import Path
import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from components.scoring.executor import ScoringSettings, score_partition
from components.serving.served_version import choose_version
from pipeline.beam import beam_pipeline_args
started = time.monotonic()
result = score_partition(
    example_files=[sys.argv[1]], span=0, input_fingerprint="benchmark", output_dir=sys.argv[2],
    model=choose_version(sys.argv[3]), settings=ScoringSettings(keys=("trip_id",),
    batch_size=int(sys.argv[4])),
    new_pipeline=lambda: beam.Pipeline(options=PipelineOptions(beam_pipeline_args("in_memory"))))
assert result.manifest.rows == int(sys.argv[5]), result.manifest
print(time.monotonic() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

_FLOOR = """
import resource, sys, time
import numpy as np, pyarrow as pa, pyarrow.parquet as pq, tensorflow as tf
from components.serving.served_version import choose_version
started = time.monotonic()
signature = tf.saved_model.load(choose_version(sys.argv[3]).path).signatures["serving_default"]
keys, scores = [], []
spec = {"trip_id": tf.io.FixedLenFeature([], tf.int64)}
records = tf.data.TFRecordDataset(sys.argv[1], compression_type="GZIP").batch(int(sys.argv[4]))
for batch in records:
    keys.append(tf.io.parse_example(batch, spec)["trip_id"].numpy())
    scores.append(signature(examples=batch)["probabilities"].numpy()[:, 0])
table = pa.table({"trip_id": np.concatenate(keys), "probability": np.concatenate(scores)})
assert table.num_rows == int(sys.argv[5])
pq.write_table(table, sys.argv[2] + "/floor.parquet")
print(time.monotonic() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


_WRITE = """
import sys
from pathlib import Path
from benchmarks.batch_scoring import write_examples
write_examples(int(sys.argv[1]), Path(sys.argv[2]))
print(0)
"""


def write_examples(rows: int, workdir: Path) -> Path:
    """`rows` taxi rows with a `trip_id`, as ExampleGen's gzipped tf.Examples."""
    import gzip

    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    from tfx_bsl.coders.csv_decoder import ColumnType

    from components.example_gen.encoding import encode_examples
    from components.tfrecords import tfrecord_frames

    csv = workdir / "data.csv"
    write_rows(csv, rows)
    table = pa_csv.read_csv(csv, convert_options=pa_csv.ConvertOptions(strings_can_be_null=True))
    table = table.append_column("trip_id", pa.array(np.arange(rows, dtype=np.int64)))
    kinds = {
        field.name: ColumnType.INT
        if pa.types.is_integer(field.type)
        else ColumnType.FLOAT
        if pa.types.is_floating(field.type)
        else ColumnType.STRING
        for field in table.schema
    }
    path = workdir / "examples.gz"
    with gzip.open(path, "wb", compresslevel=6) as f:
        for batch in table.to_batches(max_chunksize=65_536):
            records = encode_examples(batch, kinds)
            for start in range(0, len(records), 256):
                f.write(tfrecord_frames(records[start : start + 256]))
    return path


def table(rows: int, batch_size: int, ours: list[float], floor: list[float]) -> str:
    return "\n".join(
        [
            f"Batch scoring of {rows:,} rows, batches of {batch_size:,}",
            "",
            "| run | seconds | peak memory |",
            "| --- | --- | --- |",
            f"| ours (score_partition, Parquet partition, committed) | {ours[0]:.1f} | "
            f"{ours[1] / 1e9:.2f} GB |",
            f"| floor (tf.data read, batched serving_default, pyarrow write) | {floor[0]:.1f} | "
            f"{floor[1] / 1e9:.2f} GB |",
            f"| ratio | {ours[0] / floor[0]:.2f} | |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    from components.scoring.settings import DEFAULT_BATCH_SIZE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serving-dir", required=True, help="a serving directory (./dev run's)")
    parser.add_argument("--rows", type=int, default=LARGE_ROWS)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        # In a process of its own: a child forked from a process that held the
        # rows would report that process's peak as its own.
        measured_in_python(_WRITE, str(args.rows), tmp)
        examples = str(workdir / "examples.gz")
        common = (args.serving_dir, str(args.batch_size), str(args.rows))
        (workdir / "ours").mkdir()
        (workdir / "floor").mkdir()
        ours = measured_in_python(_OURS, examples, str(workdir / "ours"), *common)
        floor = measured_in_python(_FLOOR, examples, str(workdir / "floor"), *common)
    print(table(args.rows, args.batch_size, ours, floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
