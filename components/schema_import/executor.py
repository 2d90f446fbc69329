"""The SchemaImporter step's work without TFX: TFX 1.16's ImportSchemaGen executor, ported.

The training and scoring DAGs import the curated schema with TFX's own
ImportSchemaGen (pipeline/pipeline.py, pipeline/scoring_pipeline.py), and locally its
executor runs. On Kubeflow the step's pod runs `import_schema` through
kubeflow/light_step.py instead: the same copy (paths under
`site-packages/tfx/`, `components/schema_gen/import_schema_gen/executor.py`,
lines 48-62) without TFX's component package, TFMA or TensorFlow, its files
through components/store_files.py. tests/test_light_step.py runs TFX's
executor and this one on the same executor input and compares what they write.

Port register: docs/ports.md
"""

from __future__ import annotations

import os

from absl import logging
from tensorflow_metadata.proto.v0 import schema_pb2

from components import store_files

# The name of the schema in a Schema artifact (components/schema_gen/executor.py, line 31,
# DEFAULT_FILE_NAME).
SCHEMA_FILE = "schema.pbtxt"


def import_schema(schema_file: str, schema) -> None:
    """Copies the text-format Schema at `schema_file` into the `schema` artifact's directory,
    once it parsed as one (executor.py, lines 48-62)."""
    if not schema_file:  # Lines 50-51.
        raise ValueError("Schema file path is missing in exec_properties.")
    output = os.path.join(schema.uri, SCHEMA_FILE)  # Lines 52-55.
    # Line 58: the file must hold a Schema (text_format raises a ParseError naming the line).
    store_files.parse_pbtxt_file(schema_file, schema_pb2.Schema())
    # Line 60, `io_utils.copy_file` without overwrite (utils/io_utils.py, lines 49-56): the
    # directory made, and an existing file is an error (each attempt starts from empty
    # outputs, kubeflow/step_attempt.py).
    if store_files.exists(output):
        raise FileExistsError(f"{output} exists: not overwritten")
    with store_files.open(output, "wb") as f:
        f.write(store_files.read_bytes(schema_file))
    logging.info("Copied a schema file from %s to %s.", schema_file, output)  # Lines 61-62.
