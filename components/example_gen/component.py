"""ExampleGen as the DAG wires it: the component, its spec and its driver.

The work, `SpanResolvingExecutor`, is components/example_gen/executor.py.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tfx import types
from tfx.components.example_gen import component as example_gen_component
from tfx.components.example_gen import driver as example_gen_driver
from tfx.components.example_gen import utils as example_gen_utils
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ExecutionParameter

from components.example_gen.executor import (
    INPUT_SNAPSHOT_KEY,
    INPUT_WINDOW_KEY,
    PARQUET_EXAMPLES_KEY,
    SpanResolvingExecutor,
)
from components.example_gen.input_settings import input_config, input_window
from components.example_gen.spans import glob_root


class RootEscapingDriver(example_gen_driver.FileBasedDriver):
    """TFX's ExampleGen driver (it runs locally), handed the data root escaped as a glob.

    TFX joins the root and the pattern into one glob (tfx 1.16,
    components/example_gen/utils.py, `_create_matching_glob_and_regex` and
    `io_utils.generate_fingerprint`), so a root named `data[1]` would match
    `data1` and find no files. The fingerprint holds no path, so the cache key is
    the stock driver's.
    """

    def get_input_processor(self, splits, range_config=None, input_base_uri=None):
        return super().get_input_processor(
            splits, range_config, glob_root(input_base_uri) if input_base_uri else input_base_uri
        )


class ExampleGenSpec(standard_component_specs.FileBasedExampleGenSpec):
    """FileBasedExampleGen's spec plus the span window and the input snapshot, and the
    examples as Parquet beside the tf.Examples (`parquet_examples`)."""

    OUTPUTS: ClassVar[dict[str, ChannelParameter]] = {
        **standard_component_specs.FileBasedExampleGenSpec.OUTPUTS,
        PARQUET_EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
    }

    PARAMETERS: ClassVar[dict[str, ExecutionParameter]] = {
        **standard_component_specs.FileBasedExampleGenSpec.PARAMETERS,
        # {"pattern": raw input pattern or null, "spans": N}: see input_window().
        INPUT_WINDOW_KEY: ExecutionParameter(type=str, optional=True),
        # InputSnapshot's output on Kubeflow: what the data was when the run
        # started. Only its value matters: it is part of the step's cache key.
        INPUT_SNAPSHOT_KEY: ExecutionParameter(type=str, optional=True),
    }


class ExampleGen(example_gen_component.FileBasedExampleGen):
    """TFX's `FileBasedExampleGen` with `SpanResolvingExecutor` (see the module docstring).

    `input_pattern`: None reads every file under `input_base` (TFX's default);
    else a span pattern relative to it. `spans`: how many of the latest spans
    each run reads. `input_format`: the dataset spec's `input.format` (None:
    from the files' extension); `ignore`: its `ignore:` columns; `text_columns`:
    columns read as the text a CSV holds, never typed as numbers (scoring's keys);
    `skip_unsupported`: skip every column no feature can hold (scoring); `columns`: the
    only columns read (scoring: those the model and the keys use; None: every one not
    ignored). A column not read is never converted and never in the examples.
    """

    SPEC_CLASS = ExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(SpanResolvingExecutor)
    DRIVER_CLASS = RootEscapingDriver

    def __init__(
        self,
        *,
        input_base: Any,
        input_pattern: str | None = None,
        spans: int = 1,
        input_format: str | None = None,
        ignore: tuple[str, ...] = (),
        text_columns: tuple[str, ...] = (),
        skip_unsupported: bool = False,
        columns: tuple[str, ...] | None = None,
        input_snapshot: Any = None,
    ):
        config = input_config(input_pattern)
        spec = ExampleGenSpec(
            input_base=input_base,
            input_config=config,
            output_config=example_gen_utils.make_default_output_config(config),
            output_data_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
            output_file_format=example_gen_pb2.FORMAT_TFRECORDS_GZIP,
            input_window=input_window(
                input_pattern, spans, input_format, ignore, text_columns, skip_unsupported, columns
            ),
            input_snapshot=input_snapshot,
            examples=types.Channel(type=standard_artifacts.Examples),
            parquet_examples=types.Channel(type=standard_artifacts.Examples),
        )
        # FileBasedExampleGen.__init__ builds TFX's own spec; ours has two more fields.
        base_beam_component.BaseBeamComponent.__init__(self, spec=spec)
