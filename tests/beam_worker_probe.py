"""Writes one file per element through tf.io.gfile from inside Beam's worker processes.

    python -m tests.beam_worker_probe OUTPUT_PREFIX [BEAM_ARGS...]

The DirectRunner's multi-processing workers are fresh interpreters: what
the launching process registered with TensorFlow is not there. The probe's
DoFn imports TensorFlow alone, as tf.Transform's and TFMA's do.
"""

from __future__ import annotations

import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions


class WriteThroughGfile(beam.DoFn):
    def __init__(self, prefix: str):
        self._prefix = prefix

    def process(self, element: int):
        import tensorflow as tf

        with tf.io.gfile.GFile(f"{self._prefix}/{element}.txt", "w") as f:
            f.write(str(element))
        yield element


def main(argv: list[str]) -> None:
    prefix, *beam_args = argv
    with beam.Pipeline(options=PipelineOptions(beam_args)) as pipeline:
        _ = pipeline | beam.Create([1, 2]) | beam.ParDo(WriteThroughGfile(prefix))


if __name__ == "__main__":
    main(sys.argv[1:])
