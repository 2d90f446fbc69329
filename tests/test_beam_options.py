"""The local run's Beam options: the mode chosen by size, and ExampleGen kept in memory."""

from __future__ import annotations

import pytest
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

from pipeline.beam import (
    IN_MEMORY_MAX_BYTES,
    JOB_SERVICE_TIMEOUT_S,
    MULTI_PROCESSING_RUNNER_ARG,
    JobServiceError,
    beam_pipeline_args,
    check_job_service,
    choose_beam_mode,
    data_size_bytes,
    job_service_timeout,
    local_step_beam_args,
)

# A module only `--beam_plugins` would import in a worker process (nothing here imports it).
PLUGIN = "tests.beam_worker_probe"


def test_the_mode_follows_the_size_unless_one_is_asked_for():
    assert choose_beam_mode(IN_MEMORY_MAX_BYTES) == "in_memory"
    assert choose_beam_mode(IN_MEMORY_MAX_BYTES + 1) == "multi_processing"
    assert choose_beam_mode(1, "multi_processing") == "multi_processing"
    with pytest.raises(ValueError, match="unknown Beam mode 'threads'"):
        beam_pipeline_args("threads")


def test_parquet_counts_at_about_its_csv_size_not_its_compressed_size(tmp_path):
    """The threshold was measured in CSV bytes: the same rows as Parquet take a sixth of
    that on disk, and counted so would stay in memory at six times the threshold."""
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    from tests.conftest import read_taxi_rows, write_csv

    header, rows = read_taxi_rows(limit=3000)
    csv_file = tmp_path / "data.csv"
    write_csv(csv_file, header, rows)
    parquet_file = tmp_path / "data.parquet"
    pq.write_table(pa_csv.read_csv(csv_file), parquet_file, row_group_size=1000)
    as_csv = data_size_bytes([csv_file])
    as_parquet = data_size_bytes([parquet_file], "parquet")
    assert parquet_file.stat().st_size < as_csv / 3
    assert 0.75 * as_csv < as_parquet < 1.5 * as_csv
    assert as_parquet == 8 * len(rows) * len(header)


def test_example_gen_runs_in_memory_when_the_others_use_every_core():
    assert local_step_beam_args("in_memory", example_gen="ExampleGen") == {}
    step_args = local_step_beam_args("multi_processing", example_gen="ExampleGen")
    # create_pipeline puts a step's own arguments after the pipeline's; Beam keeps the last.
    args = beam_pipeline_args("multi_processing", num_workers=2) + step_args["ExampleGen"]
    options = PipelineOptions(args).view_as(DirectOptions)
    assert (options.direct_running_mode, options.direct_num_workers) == ("in_memory", 1)


def test_a_local_beam_step_keeps_its_arguments_and_packages_no_tfx(monkeypatch, tmp_path):
    """A local run's Beam workers are its own subprocesses: TFX must not copy its
    install into an sdist for them (pipeline/local/node_launch.py)."""
    from tfx.components.statistics_gen.executor import Executor
    from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor
    from tfx.utils import dependency_utils

    from pipeline.local.node_launch import tfx_not_shipped_to_beam_workers

    monkeypatch.setattr(dependency_utils, "build_ephemeral_package", lambda: "/tmp/tfx.tar.gz")
    args = beam_pipeline_args("multi_processing", num_workers=2)
    context = BaseBeamExecutor.Context(
        beam_pipeline_args=args, tmp_dir=str(tmp_path), unique_id="StatisticsGen"
    )
    with tfx_not_shipped_to_beam_workers():
        kept = Executor(context)._beam_pipeline_args
    assert kept[: len(args)] == args
    assert not [a for a in kept if a.startswith("--extra_package")]
    # Outside it, TFX's own default: the executor would build and ship the sdist.
    shipped = Executor(context)._beam_pipeline_args
    assert "--extra_package=/tmp/tfx.tar.gz" in shipped


def test_an_in_memory_beam_step_runs_on_the_fn_api_runner_and_never_tries_prism(
    monkeypatch, tmp_path
):
    """Beam's default DirectRunner first tries Prism, fetching its binary from GitHub
    at run time (pipeline/beam.py); the named runner never does. So does ExampleGen,
    in memory, when the other steps use every core."""
    import apache_beam as beam
    from apache_beam.runners.portability import fn_api_runner, prism_runner
    from apache_beam.testing.util import assert_that, equal_to

    handed_to_prism = []

    def no_prism(runner, pipeline, options):
        handed_to_prism.append(pipeline)
        raise RuntimeError("no Prism here")  # the DirectRunner then falls back

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", no_prism)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    in_memory = beam_pipeline_args("in_memory")
    example_gen = local_step_beam_args("multi_processing", example_gen="ExampleGen")
    assert (
        PipelineOptions(
            beam_pipeline_args("multi_processing") + example_gen["ExampleGen"]
        ).get_all_options()
        == PipelineOptions(in_memory).get_all_options()
    )
    pipeline = beam.Pipeline(argv=in_memory)
    counted = pipeline | beam.Create([1, 2, 3]) | beam.combiners.Count.Globally()
    assert_that(counted, equal_to([3]))
    pipeline.run().wait_until_finish()
    assert type(pipeline.runner) is fn_api_runner.FnApiRunner
    assert handed_to_prism == []
    assert not list(tmp_path.iterdir())

    # Beam's default, for contrast: the same pipeline goes to Prism first.
    default = beam.Pipeline(argv=[])
    assert_that(default | beam.Create([1, 2, 3]) | beam.combiners.Count.Globally(), equal_to([3]))
    default.run().wait_until_finish()
    assert handed_to_prism == [default]


def _plugin_imported_in_worker(_element, parent: int) -> tuple[bool, bool]:
    """Runs in a Beam worker: whether it is another process than the test's, and whether
    it imported PLUGIN when it started."""
    import os
    import sys

    return os.getpid() != parent, PLUGIN in sys.modules


def _worker_saw(args: list[str]):
    """Runs one element through a worker with `--beam_plugins=PLUGIN`; returns the pipeline."""
    import os

    import apache_beam as beam

    pipeline = beam.Pipeline(argv=[*args, f"--beam_plugins={PLUGIN}"])
    seen = pipeline | beam.Create([0]) | beam.Map(_plugin_imported_in_worker, os.getpid())
    return pipeline, seen


@pytest.mark.slow  # two pipelines, each starting a worker process
def test_a_multi_processing_step_never_tries_prism_and_its_workers_get_the_options(
    monkeypatch,
):
    """Local runs above the in-memory threshold and Kubeflow's `engine: direct` run on
    the FnApiRunner, named (pipeline/beam_runner.py); their worker processes still get
    the pipeline's options, `--beam_plugins` (s3:// for TensorFlow) among them."""
    from apache_beam.runners.portability import fn_api_runner, prism_runner
    from apache_beam.testing.util import assert_that, equal_to

    handed_to_prism = []

    def no_prism(runner, pipeline, options):
        handed_to_prism.append(pipeline)
        raise RuntimeError("no Prism here")  # the DirectRunner then falls back

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", no_prism)
    args = beam_pipeline_args("multi_processing", num_workers=1)
    assert args[0] == MULTI_PROCESSING_RUNNER_ARG
    pipeline, seen = _worker_saw(args)
    assert_that(seen, equal_to([(True, True)]))
    pipeline.run().wait_until_finish()
    assert handed_to_prism == []
    assert type(pipeline.runner) is fn_api_runner.FnApiRunner

    # The negative: the FnApiRunner named alone, as in memory, hands its workers no options.
    alone = ["--runner=FnApiRunner", *args[1:]]
    pipeline, seen = _worker_saw(alone)
    assert_that(seen, equal_to([(True, False)]))
    pipeline.run().wait_until_finish()


@pytest.mark.slow  # two pipelines, each starting a worker process
@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
def test_with_the_network_blocked_no_beam_step_tries_to_download_a_runner(monkeypatch, mode):
    """The same guarantee seen from the network's side: every connection that leaves
    the machine, and Prism's own download (apache_beam 2.74,
    runners/portability/prism_runner.py, `_download_to_local_path` through `urlopen`),
    is recorded and refused. Beam's default DirectRunner, the positive control, tries."""
    import socket

    import apache_beam as beam
    from apache_beam.runners.portability import prism_runner

    attempts = []
    connect = socket.socket.connect

    def loopback_only(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and not host.startswith(("127.", "::1", "localhost", "/")):
            attempts.append(address)
            raise OSError(f"network blocked by the test: {address}")
        return connect(sock, address)

    def no_download(url, *args, **kwargs):
        attempts.append(url)
        raise OSError(f"network blocked by the test: {url}")

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    monkeypatch.setattr(prism_runner, "urlopen", no_download)

    def run(args):
        with beam.Pipeline(argv=args) as pipeline:
            _ = pipeline | beam.Create([1, 2]) | beam.Map(lambda x: x * 2)

    run(beam_pipeline_args(mode, num_workers=1))
    assert attempts == []
    run(["--runner=DirectRunner", *beam_pipeline_args(mode, num_workers=1)[1:]])
    assert any("prism" in str(a) for a in attempts), attempts


def test_the_named_runner_is_beams_fn_api_runner_as_beam_resolves_it():
    """Beam builds the runner from its name; tf.Transform then picks its TensorFlow session
    config by the runner's exact type, and a subclass would get none (pipeline/beam_runner.py)."""
    from apache_beam.runners.direct.direct_runner import DirectRunner
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    from apache_beam.runners.runner import create_runner
    from tensorflow_transform.beam import impl

    runner = create_runner(MULTI_PROCESSING_RUNNER_ARG.split("=", 1)[1])
    assert type(runner) is FnApiRunner
    configs = impl._DEFAULT_TENSORFLOW_CONFIG_BY_BEAM_RUNNER_TYPE
    assert configs.get(type(runner)) is configs[DirectRunner] is not None


def test_a_portable_step_waits_for_its_job_service_as_long_as_beam_is_told_to():
    """Beam's own `job_server_timeout`, set under a flink or spark engine's options, is the
    step's wait too (the step checks the job service before Beam does); unset, 20 s."""
    from apache_beam.options.pipeline_options import PortableOptions

    from kubeflow.settings.beam import BeamEngine

    options = {"job_endpoint": "flink-jobserver.flink:8099"}
    unset = BeamEngine("flink", options).pipeline_args("image")
    assert job_service_timeout(unset) == JOB_SERVICE_TIMEOUT_S
    args = BeamEngine("flink", {**options, "job_server_timeout": 45}).pipeline_args("image")
    assert job_service_timeout(args) == 45
    assert PipelineOptions(args).view_as(PortableOptions).job_server_timeout == 45
    # Beam keeps the last of a repeated flag, and reads its old spelling too.
    assert job_service_timeout([*args, "--job-server-timeout=7"]) == 7
    with pytest.raises(JobServiceError, match=r"--job_server_timeout=2\.5: not a whole number"):
        job_service_timeout(["--job_server_timeout=2.5"])


def test_a_job_service_that_does_not_answer_fails_within_the_wait_naming_it():
    import socket
    import time

    with socket.socket() as bound:  # bound, never listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        endpoint = f"localhost:{bound.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(JobServiceError, match=f"at {endpoint} did not answer within 1 s"):
            check_job_service(endpoint, 1)
    assert time.monotonic() - started < JOB_SERVICE_TIMEOUT_S
