"""Beam options chosen from the size of the data.

On small data Beam's start-up dominates: the in-memory runner skips the
worker processes that `multi_processing` starts, each of which imports
TensorFlow. Large data wants the cores, and memory bounded per worker. Locally
two steps already run at once (StatisticsGen beside Transform), so on two
cores the workers pay only far above the sample's size.
The threshold between them comes from whole-DAG runs in both modes at the
sizes either side of it: `python -m benchmarks.scale` measures them, and
docs/scale.md holds the figures.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Literal

from pipeline import object_store

BeamMode = Literal["auto", "in_memory", "multi_processing"]

# Up to this much input (about 2M taxi rows) the in-memory runner measured both
# faster and smaller; at twice it the two were level, and beyond it the in-memory
# runner's memory grows faster (docs/scale.md has the runs).
IN_MEMORY_MAX_BYTES = 256 * 1024 * 1024
# Every Beam step names its runner. Beam's default, the DirectRunner, first tries
# to run each pipeline on Prism (apache_beam 2.74.0, runners/direct/direct_runner.py
# L203-233): it fetches Prism's binary from GitHub at run time, runs the pipeline
# there when the fetch works, and otherwise falls back to the FnApiRunner
# (L234-245), about 0.4 s later and leaving temporary directories behind. Named,
# a step runs where its tests ran, with no download.
# In memory: Beam's own FnApiRunner.
IN_MEMORY_RUNNER_ARG = "--runner=FnApiRunner"
# Multi-processing: the FnApiRunner handed the pipeline's options, which its
# worker processes need (`--beam_plugins` for s3://), as the DirectRunner hands
# them (pipeline/beam_runner.py); a FnApiRunner named alone has none to pass.
MULTI_PROCESSING_RUNNER_ARG = "--runner=pipeline.beam_runner.fn_api_runner_with_options"
# A running job service answers at once; Beam itself would wait its
# `job_server_timeout` (300 s by default) and then raise a timeout that names nothing.
JOB_SERVICE_TIMEOUT_S = 20
# Beam's own option for that wait, in whole seconds (apache-beam 2.74.0,
# options/pipeline_options.py L1888-1898, PortableOptions, `type=int`; the portable
# runner waits that long for the job service: runners/portability/portable_runner.py
# L285-286, job_server.py L52-54). Set, it is the step's wait too.
JOB_SERVER_TIMEOUT_FLAGS = ("--job_server_timeout=", "--job-server-timeout=")


class JobServiceError(RuntimeError):
    """A Beam step's job service (Flink's or Spark's job server) did not answer."""


# A Parquet file counts at about the size its rows take as CSV text and as Arrow
# in memory, 8 bytes a value, rather than its compressed size on disk (a sixth of
# the CSV's for the taxi sample): counted on disk, Parquet data many times the
# threshold would stay in memory.
PARQUET_BYTES_PER_VALUE = 8


def data_size_bytes(files: Iterable[str | os.PathLike], input_format: str = "csv") -> int:
    """The size of the input a run reads (pipeline.inputs.DataRoot.files) as the
    threshold counts it: a CSV file's bytes, a Parquet file's values (its footer's
    rows times columns) at PARQUET_BYTES_PER_VALUE."""
    if input_format == "parquet":
        from components.example_gen.parquet_files import values_in

        return sum(
            PARQUET_BYTES_PER_VALUE * values_in(os.fspath(f), object_store.open_binary)
            for f in files
        )
    return sum(object_store.file_size(f) for f in files)


def choose_beam_mode(data_bytes: int, requested: BeamMode = "auto") -> str:
    if requested != "auto":
        return requested
    return "in_memory" if data_bytes <= IN_MEMORY_MAX_BYTES else "multi_processing"


def beam_pipeline_args(mode: str, *, num_workers: int | None = None) -> list[str]:
    """Beam arguments for `mode` (`in_memory` or `multi_processing`) on this machine.

    `num_workers=None` uses this machine's cores; 0 lets Beam count the cores
    of the machine it runs on (a Kubeflow pod).
    """
    if mode == "in_memory":
        # The FnApiRunner's defaults: in memory, one worker.
        return [IN_MEMORY_RUNNER_ARG]
    if mode == "multi_processing":
        workers = num_workers if num_workers is not None else (os.cpu_count() or 1)
        return [
            MULTI_PROCESSING_RUNNER_ARG,
            "--direct_running_mode=multi_processing",
            f"--direct_num_workers={workers}",
        ]
    raise ValueError(f"unknown Beam mode {mode!r}; use in_memory or multi_processing")


def local_step_beam_args(mode: str, *, example_gen: str) -> dict[str, list[str]]:
    """Per-step Beam arguments for a local run in `mode`, on top of
    `beam_pipeline_args(mode)`: `create_pipeline`'s `beam_pipeline_args_by_component`.

    ExampleGen (step id `example_gen`) stays in memory. It reads a CSV file in
    one worker whatever the mode, and the in-memory runner skips the workers'
    start-up and the trip of every block through them: faster on the sizes a
    local run sees (`python -m benchmarks.scale`; docs/scale.md). And the
    multi-processing runner has dropped blocks between its stages
    (components/example_gen/blocks.py counts the rows to catch it).
    """
    if mode != "multi_processing":
        return {}
    return {
        example_gen: [
            IN_MEMORY_RUNNER_ARG,
            "--direct_running_mode=in_memory",
            "--direct_num_workers=1",
        ]
    }


def _last_value(beam_args: list[str], prefixes: str | tuple[str, ...]) -> str | None:
    """The value of the last `--flag=value` argument starting with one of `prefixes`, as
    Beam reads a flag given twice; None when none is given."""
    values = [a.split("=", 1)[1] for a in beam_args if a.startswith(prefixes)]
    return values[-1] if values else None


def job_endpoint(beam_args: list[str]) -> str | None:
    """The job service a portable Beam step submits to, from its arguments; None for others."""
    if "--runner=PortableRunner" not in beam_args:
        return None
    return _last_value(beam_args, "--job_endpoint=")


def job_service_timeout(beam_args: list[str]) -> int:
    """How long a portable step waits for its job service: Beam's `job_server_timeout` when
    its arguments set it (the last one, as Beam reads them), JOB_SERVICE_TIMEOUT_S otherwise."""
    value = _last_value(beam_args, JOB_SERVER_TIMEOUT_FLAGS)
    if value is None:
        return JOB_SERVICE_TIMEOUT_S
    if not value.isdigit() or int(value) < 1:
        raise JobServiceError(
            f"--job_server_timeout={value}: not a whole number of seconds above 0"
        )
    return int(value)


def check_job_service(endpoint: str, timeout_s: float = JOB_SERVICE_TIMEOUT_S) -> None:
    """Waits up to `timeout_s` for the job service at `endpoint`; JobServiceError naming it."""
    import grpc

    channel = grpc.insecure_channel(endpoint)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout_s)
    except grpc.FutureTimeoutError:
        raise JobServiceError(
            f"Beam job service at {endpoint} did not answer within {timeout_s:.0f} s. Check "
            "the engine's options.job_endpoint under beam: in kubeflow/pipeline.yaml, and that "
            "the Flink or Spark job server runs and is reachable from the pipeline's pods "
            "(options.job_server_timeout sets this wait)"
        ) from None
    finally:
        channel.close()
