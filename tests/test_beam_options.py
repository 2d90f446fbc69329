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
    assert local_step_beam_args("in_memory", example_gen="CsvExampleGen") == {}
    step_args = local_step_beam_args("multi_processing", example_gen="CsvExampleGen")
    # create_pipeline puts a step's own arguments after the pipeline's; Beam keeps the last.
    args = beam_pipeline_args("multi_processing", num_workers=2) + step_args["CsvExampleGen"]
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
