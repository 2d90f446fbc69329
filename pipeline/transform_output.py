"""Whether Transform writes a transformed copy of the data, chosen from its size.

Materialized, the Trainer reads Transform's output and only parses it; not
materialized, Transform only analyzes and the Trainer runs the Transform graph
over the raw examples it reads (trainer/data.py). Which is faster depends on
how many rows the Trainer reads against how many there are. Locally the
Trainer reads a few hundred batches, so the size of the data decides: writing
costs time in proportion to the data, the Trainer's graph about the same time
whatever its size, and the two cross near 12 MB of CSV (about 90k taxi rows).
`python -m benchmarks.scale` runs sizes either side; docs/where-the-time-goes.md
holds the figures, materialized and not, on the sample and on 1.5M rows.

Kubeflow keeps TFX's default (materialized): there the Trainer reads
`train_steps` batches of a GPU-sized batch, epochs over the data, on a host
whose cores should feed the accelerator rather than recompute the transform.
"""

from __future__ import annotations

MATERIALIZE_MAX_BYTES = 12 * 1024 * 1024


def materialize_transform(data_bytes: int) -> bool:
    """True when Transform should write transformed examples for `data_bytes` of input."""
    return data_bytes <= MATERIALIZE_MAX_BYTES
