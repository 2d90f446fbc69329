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
