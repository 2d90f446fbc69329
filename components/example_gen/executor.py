"""ExampleGen: TFX's file-based ExampleGen, reading CSV or Parquet, resolving spans itself
and reading a window of them.

TFX resolves `{SPAN}`, date and `{VERSION}` placeholders in ExampleGen's
driver: it picks the latest span, fills in the pattern and fingerprints the
files, and the fingerprint keys the cache. Locally the driver runs. On
open-source Kubeflow Pipelines it does not: TFX compiles it into a
`lifecycle.preCacheCheck` hook that only Vertex runs, so the executor gets the
raw pattern ("does not match any files") and the step's cache key holds no
trace of the data.

`SpanResolvingExecutor` does the driver's work when no driver did, with the
driver's own code (`FileBasedInputProcessor`), and records span, version and
fingerprint on the examples artifact as the driver would. When the driver
has run, that is left as it is. Either way it then reads the last
`spans` spans (the window, from the dataset spec's `input.spans`) into one
Examples artifact, each span in its latest version.

Only reading differs between formats: components/example_gen/read_examples.py holds the read
(`ReadExamples`, shared with the draft), where a reader per format (`READERS`:
components/example_gen/csv_to_examples.py, components/example_gen/parquet_to_examples.py) turns the
files into Arrow record batches of typed columns;
components/example_gen/encoding.py encodes them (the stock CSV executor's
examples, byte for byte) and components/example_gen/blocks.py splits and writes
them in TFX's splits. The same rows go, split alike, into a second output,
`parquet_examples`: the columns tfx_bsl decodes the examples to, as Parquet
(components/example_gen/parquet_examples.py), which StatisticsGen and Transform read.
Which files are read, and in which format, is components/example_gen/input_files.py's:
writers' leftovers are skipped, the format is the dataset spec's
`input.format` or the files' extension.

That resolution is a function of its own, `resolve_input`
(components/example_gen/span_resolution.py, TFX's ported without TFX): the `InputSnapshot` step
(kubeflow/steps/input_snapshot/component.py) runs it before ExampleGen on Kubeflow, so the
data's fingerprint enters ExampleGen's cache key there too.
"""

from __future__ import annotations

import json
import re
from typing import Any

import apache_beam as beam
from absl import logging
from tfx import types
from tfx.components.example_gen import base_example_gen_executor, write_split
from tfx.components.example_gen import driver as example_gen_driver
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from components.artifact_names import (
    FINGERPRINT_PROPERTY,
    LEFT_OUT_PROPERTY,
    SPAN_PROPERTY,
    SPANS_PROPERTY,
    VERSION_PROPERTY,
)
from components.example_gen.blocks import (
    WriteExampleBlocks,
    check_rows_written,
    partition_blocks,
)
from components.example_gen.csv_to_examples import CsvError
from components.example_gen.input_files import left_out_line
from components.example_gen.parquet_files import ParquetError
from components.example_gen.read_examples import ReadExamples, ReadExamplesWithColumns
from components.example_gen.span_resolution import ResolvedInput, SpanRead, resolve_input

# Our own execution properties (see ExampleGenSpec).
INPUT_WINDOW_KEY = "input_window"
INPUT_SNAPSHOT_KEY = "input_snapshot"
# Our second output: the same splits and rows as Parquet
# (components/example_gen/parquet_examples.py).
PARQUET_EXAMPLES_KEY = "parquet_examples"


# Handed from Do to the read transform: latest span's pattern -> the window's patterns.
_WINDOW_PATTERNS = "_window_patterns"


def _split_configs(
    exec_properties: dict[str, Any],
) -> tuple[example_gen_pb2.Input, example_gen_pb2.Output, list[str]]:
    """ExampleGen's input and output configs and its output split names, as TFX derives them."""
    input_config = proto_utils.json_to_proto(
        exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input()
    )
    output_config = proto_utils.json_to_proto(
        exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], example_gen_pb2.Output()
    )
    split_names = example_gen_utils.generate_output_split_names(input_config, output_config)
    return input_config, output_config, split_names


# Beam appends the step to an error a DoFn raised (apache_beam 2.74.0,
# runners/common.py `_reraise_augmented`, lines 1590-1595: the same type, its first
# argument plus " [while running '<step>']"). A data error's line names the file and
# the fix; the step is noise in it.
_BEAM_STEP = re.compile(r" \[while running '.*'\]$", re.DOTALL)


def _read_arguments(exec_properties: dict[str, Any], split_pattern: str) -> tuple:
    """What the window's read takes: the data root, the patterns of every span read for
    `split_pattern` (the latest span's, as `Do` resolved it), and the window."""
    return (
        exec_properties[standard_component_specs.INPUT_BASE_KEY],
        json.loads(exec_properties[_WINDOW_PATTERNS])[split_pattern],
        json.loads(exec_properties.get(INPUT_WINDOW_KEY) or "{}"),
    )


class SpanResolvingExecutor(base_example_gen_executor.BaseExampleGenExecutor):
    """ExampleGen's executor that resolves spans itself where no driver did (module doc)."""

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        exec_properties = dict(exec_properties)
        input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        input_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input()
        )
        window = json.loads(exec_properties.get(INPUT_WINDOW_KEY) or "{}")
        driver_resolved = None
        if exec_properties.get(SPAN_PROPERTY) is not None:
            # TFX's driver ran (locally): input_config already names the latest span.
            driver_resolved = SpanRead(
                span=exec_properties[SPAN_PROPERTY],
                version=exec_properties.get(VERSION_PROPERTY),
                patterns={s.name: s.pattern for s in input_config.splits},
                fingerprint=exec_properties.get(FINGERPRINT_PROPERTY) or "",
            )
        resolved = resolve_input(input_base, input_config, window, driver_resolved)
        snapshot = exec_properties.get(INPUT_SNAPSHOT_KEY)
        if snapshot and ResolvedInput.from_json(snapshot) != resolved:
            logging.warning(
                "The data under %s changed after this run's InputSnapshot step; reading what "
                "is there now: %s",
                input_base,
                [(s.span, s.version) for s in resolved.spans],
            )
        latest = resolved.latest
        for split in input_config.splits:
            split.pattern = latest.patterns[split.name]
        exec_properties[standard_component_specs.INPUT_CONFIG_KEY] = proto_utils.proto_to_json(
            input_config
        )
        exec_properties[SPAN_PROPERTY] = latest.span
        exec_properties[VERSION_PROPERTY] = latest.version
        exec_properties[FINGERPRINT_PROPERTY] = resolved.fingerprint
        exec_properties[_WINDOW_PATTERNS] = json.dumps(
            {
                latest.patterns[split.name]: [s.patterns[split.name] for s in resolved.spans]
                for split in input_config.splits
            }
        )
        examples = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.EXAMPLES_KEY]
        )
        parquet_examples = artifact_utils.get_single_instance(output_dict[PARQUET_EXAMPLES_KEY])
        line = left_out_line(input_base, resolved.left_out) if resolved.left_out else None
        if line:
            logging.warning("%s", line)
        for artifact in (examples, parquet_examples):
            # As TFX's driver records them (span = the latest read; 0 without a span
            # pattern), plus every span read where there is a pattern.
            example_gen_driver.update_output_artifact(exec_properties, artifact.mlmd_artifact)
            if window.get("pattern"):
                artifact.set_string_custom_property(
                    SPANS_PROPERTY, ",".join(str(s.span) for s in resolved.spans)
                )
            if line:
                artifact.set_string_custom_property(LEFT_OUT_PROPERTY, line)
        logging.info(
            "Reading span(s) %s under %s.",
            ", ".join(
                f"{s.span}" + (f" (version {s.version})" if s.version is not None else "")
                for s in resolved.spans
            ),
            input_base,
        )
        self._write_examples(examples, parquet_examples, exec_properties)

    def GenerateExamplesByBeam(
        self, pipeline: beam.Pipeline, exec_properties: dict[str, Any]
    ) -> dict[str, tuple[beam.PCollection, beam.PCollection]]:
        """TFX's method, over blocks: split name -> (blocks of (serialized examples, their
        feature columns), the columns' schema: components/example_gen/parquet_examples.py)."""
        input_config, output_config, split_names = _split_configs(exec_properties)
        read = self._read_with_columns
        if output_config.split_config.splits:
            (only,) = input_config.splits  # TFX's rule: output splits need one input split
            blocks, schema = pipeline | "InputToRecord" >> read(exec_properties, only.pattern)
            return {
                name: (split_blocks, schema)
                for name, split_blocks in partition_blocks(
                    blocks, split_names, output_config.split_config
                ).items()
            }
        return {
            name: pipeline | f"InputToRecord[{split.name}]" >> read(exec_properties, split.pattern)
            for name, split in zip(split_names, input_config.splits, strict=True)
        }

    def _write_examples(
        self,
        examples: types.Artifact,
        parquet_examples: types.Artifact,
        exec_properties: dict[str, Any],
    ) -> None:
        """TFX's ExampleGen `Do` (split names, files, payload and file format), over blocks;
        the same splits and rows into `parquet_examples` as Parquet."""
        split_names = artifact_utils.encode_split_names(_split_configs(exec_properties)[2])
        examples.split_names = split_names
        parquet_examples.split_names = split_names
        try:
            with self._make_beam_pipeline() as pipeline:
                for name, (blocks, schema) in self.GenerateExamplesByBeam(
                    pipeline, exec_properties
                ).items():
                    _ = blocks | f"WriteSplit[{name}]" >> WriteExampleBlocks(
                        artifact_utils.get_split_uri([examples], name),
                        artifact_utils.get_split_uri([parquet_examples], name),
                        schema,
                    )
        except (CsvError, ParquetError) as err:  # a value the checks before it cannot see
            message = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
            raise type(err)(_BEAM_STEP.sub("", message)) from None
        rows = check_rows_written(pipeline.result)
        examples_utils.set_payload_format(
            examples, exec_properties[standard_component_specs.OUTPUT_DATA_FORMAT_KEY]
        )
        examples_utils.set_file_format(
            examples,
            write_split.to_file_format_str(
                exec_properties[standard_component_specs.OUTPUT_FILE_FORMAT_KEY]
            ),
        )
        # What TFX's executors read Parquet by (tfx 1.16, components/util/tfxio_utils.py,
        # lines 316-320 and 417-421): StatisticsGen and Transform then read no tf.Example.
        # (write_split.to_file_format_str knows only TFRecords.)
        examples_utils.set_payload_format(parquet_examples, example_gen_pb2.FORMAT_PARQUET)
        examples_utils.set_file_format(
            parquet_examples, example_gen_pb2.FileFormat.Name(example_gen_pb2.FILE_FORMAT_PARQUET)
        )
        logging.info("Examples generated: %d rows, as tf.Examples and as Parquet.", rows)

    @staticmethod
    def _read_with_columns(exec_properties: dict[str, Any], split_pattern: str) -> Any:
        """Every span of the window, read as one, with each block's feature columns."""
        return ReadExamplesWithColumns(*_read_arguments(exec_properties, split_pattern))

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:
        @beam.ptransform_fn
        def read_window(pipeline, exec_properties: dict[str, Any], split_pattern: str):
            """Every span of the window, read as one
            (components/example_gen/input_files.py's files), as
            tf.Examples only: TFX's API; `_write_examples` reads them with their columns."""
            return pipeline | ReadExamples(*_read_arguments(exec_properties, split_pattern))

        return read_window
