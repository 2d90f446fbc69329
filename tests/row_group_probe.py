"""A Beam plugin that records which process reads each Parquet row group.

    --beam_plugins=tests.row_group_probe   (with ROW_GROUP_PROBE_DIR set)

Beam's worker processes import each `--beam_plugins` module when they start,
before any bundle is unpickled (apache_beam's runners/worker/sdk_worker_main.py,
`_import_beam_plugins`), and inherit the launching process's environment
(runners/portability/local_job_service.py, SubprocessSdkWorker). ExampleGen's
reader is pickled as a reference to `components.example_gen.parquet_columns.read_row_group`,
so a worker that imported this module unpickles the wrapper below: each row
group it reads leaves an empty file named by the worker's pid, the file and the
row group's index in ROW_GROUP_PROBE_DIR. Without that variable, nothing changes.
"""

from __future__ import annotations

import os
from pathlib import Path

from components.example_gen import parquet_columns

PROBE_DIR = "ROW_GROUP_PROBE_DIR"


def reads(probe_dir: Path) -> list[tuple[int, str, int]]:
    """(pid, file name, row group index) of each row group read."""
    found = []
    for marker in probe_dir.iterdir():
        pid, index, name = marker.name.split("-", 2)
        found.append((int(pid), name, int(index)))
    return sorted(found)


def _install(probe_dir: str) -> None:
    read_row_group = parquet_columns.read_row_group

    def recorded(unit, plan, open_binary):
        path, index = unit
        Path(probe_dir, f"{os.getpid()}-{index}-{Path(path).name}").touch()
        yield from read_row_group(unit, plan, open_binary)

    parquet_columns.read_row_group = recorded


if os.environ.get(PROBE_DIR):
    _install(os.environ[PROBE_DIR])
