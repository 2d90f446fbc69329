"""The local run's Beam options: the mode chosen by size, and ExampleGen kept in memory."""

from __future__ import annotations

import pytest
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

from pipeline.beam import (
    IN_MEMORY_MAX_BYTES,
    beam_pipeline_args,
    choose_beam_mode,
    local_step_beam_args,
)


def test_the_mode_follows_the_size_unless_one_is_asked_for():
    assert choose_beam_mode(IN_MEMORY_MAX_BYTES) == "in_memory"
    assert choose_beam_mode(IN_MEMORY_MAX_BYTES + 1) == "multi_processing"
    assert choose_beam_mode(1, "multi_processing") == "multi_processing"
    with pytest.raises(ValueError, match="unknown Beam mode 'threads'"):
        beam_pipeline_args("threads")


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
