"""Whether Transform writes a transformed copy of the data, chosen from its size.

Materialized, the Trainer reads Transform's output and only parses it; not
materialized, Transform only analyzes and the Trainer runs the Transform graph
over the raw examples it reads (trainer/data.py). Which is faster depends on
how many rows the Trainer reads against how many there are. Locally the
Trainer reads a few hundred batches, so the size of the data decides. Measured
on the 2-core development machine:

- 15k taxi rows (2 MB): the whole DAG 26.8 s materialized against 28.6 s not:
  Transform 7.8 s against 5.2 s, but the Trainer 6.0 s against 9.3 s, and a
  rerun after a model edit (Transform cached) 20.4 s against 24.2 s.
- 1.5M rows (192 MB): Transform alone 77 s materialized against 27 s not; the
  whole DAG 267 s against 217 s (the Trainer 6.9 s against 9.2 s).

Writing costs about 0.26 s per MB of CSV, the Trainer's graph about 3 s
whatever the size, so they cross near 12 MB (about 90k taxi rows).
`python -m benchmarks.scale` runs sizes either side.

Kubeflow keeps TFX's default (materialized): there the Trainer reads
`train_steps` batches of a GPU-sized batch, epochs over the data, on a host
whose cores should feed the accelerator rather than recompute the transform.
"""

from __future__ import annotations

MATERIALIZE_MAX_BYTES = 12 * 1024 * 1024


def materialize_transform(data_bytes: int) -> bool:
    """True when Transform should write transformed examples for `data_bytes` of input."""
    return data_bytes <= MATERIALIZE_MAX_BYTES
