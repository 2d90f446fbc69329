"""The Evaluator's output, read as TFMA reads it, without importing TFMA.

TFMA's proto modules live inside its package (`tensorflow_model_analysis.proto`),
and importing any of them runs the package's `__init__`, which loads TensorFlow
and Beam. The protos themselves need neither: each generated module adds one
serialized `FileDescriptorProto` to protobuf's pool. This module reads those
bytes out of the installed TFMA's generated modules (as a literal, without
running them), builds the messages in a pool of its own, and reads the three
files `read_evaluation` needs the way TFMA 0.47.1 reads them:

- `metrics*.tfrecord` (else `metrics*`), TFRecords of `MetricsForSlice`
  (writers/metrics_plots_and_validations_writer.py, `load_and_deserialize_metrics`,
  lines 137-153, through `_raw_value_iterator`, lines 110-112);
- `validations*`, exactly one TFRecord of `ValidationResult` (the same file,
  `load_and_deserialize_validation_result`, lines 247-258; `load_validation_result`
  passes no file format, api/model_eval_lib.py, lines 264-270);
- `eval_config.json`, an `EvalRun` in JSON with a version
  (writers/eval_config_writer.py, `load_eval_run`, lines 73-81, and `_check_version`,
  lines 35-40).

The pool is private, so these messages never clash with TFMA's own when a
process (the Evaluator, a test) has imported both.

Port register: docs/ports.md
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from components import store_files
from components.tfrecords import read_records

_PACKAGE = "tensorflow_model_analysis"
# Generated modules in dependency order: validation_result.proto imports the other two.
_PROTO_MODULES = ("config_pb2.py", "metrics_for_slice_pb2.py", "validation_result_pb2.py")
_PROTO_PACKAGE = "tensorflow_model_analysis."
# TFMA's file names (constants.py, METRICS_KEY and VALIDATIONS_KEY, lines 95 and 100;
# eval_config_writer.py, EVAL_CONFIG_FILE and its format, lines 31-32).
METRICS_PREFIX = "metrics"
VALIDATIONS_PREFIX = "validations"
EVAL_CONFIG_FILE = "eval_config.json"
_TFRECORD_SUFFIX = ".tfrecord"


@dataclass(frozen=True)
class Protos:
    """TFMA's message classes and enums, from the private pool."""

    MetricsForSlice: Any
    ValidationResult: Any
    EvalRun: Any
    SlicingSpec: Any
    higher_is_better: int


def _serialized_descriptor(module_path: str) -> bytes:
    """The bytes a generated `_pb2.py` module passes to `AddSerializedFile`, read as a literal."""
    with open(module_path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), module_path)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AddSerializedFile"
            and node.args
        ):
            return ast.literal_eval(node.args[0])
    raise ValueError(f"{module_path}: no serialized file descriptor (AddSerializedFile) found")


@functools.cache
def protos() -> Protos:
    """TFMA's messages from the installed package's generated modules, without importing it."""
    from google.protobuf import descriptor_pool, message_factory, wrappers_pb2

    spec = importlib.util.find_spec(_PACKAGE)  # finds the package; does not run its __init__
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{_PACKAGE} is not installed: the evaluation cannot be read")
    proto_dir = os.path.join(next(iter(spec.submodule_search_locations)), "proto")
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    for module in _PROTO_MODULES:
        pool.AddSerializedFile(_serialized_descriptor(os.path.join(proto_dir, module)))
    factory = message_factory.MessageFactory(pool)

    def message(name: str):
        return factory.GetPrototype(pool.FindMessageTypeByName(_PROTO_PACKAGE + name))

    direction = pool.FindEnumTypeByName(_PROTO_PACKAGE + "MetricDirection")
    return Protos(
        MetricsForSlice=message("MetricsForSlice"),
        ValidationResult=message("ValidationResult"),
        EvalRun=message("EvalRun"),
        SlicingSpec=message("SlicingSpec"),
        higher_is_better=direction.values_by_name["HIGHER_IS_BETTER"].number,
    )


def _matching(evaluation_uri: str, prefix: str, suffix: str) -> list[str]:
    """TFMA's glob `<uri>/<prefix>*<suffix>` (`_match_all_files`, line 73); sorted, so the
    shards are read in their numbered order on a local path and on S3 alike."""
    return sorted(store_files.glob(os.path.join(evaluation_uri, prefix) + "*" + suffix))


def load_metrics(evaluation_uri: str) -> Iterator[Any]:
    """Every `MetricsForSlice` of an Evaluator output, as `tfma.load_metrics` yields them."""
    message = protos().MetricsForSlice
    paths = _matching(evaluation_uri, METRICS_PREFIX, _TFRECORD_SUFFIX) or _matching(
        evaluation_uri, METRICS_PREFIX, ""
    )
    for path in paths:
        for record in read_records(path):
            yield message.FromString(record)


def load_validation_result(evaluation_uri: str) -> Any:
    """The one `ValidationResult` of an Evaluator output, as `tfma.load_validation_result`."""
    message = protos().ValidationResult
    paths = _matching(evaluation_uri, VALIDATIONS_PREFIX, "")
    found = [message.FromString(r) for path in paths for r in read_records(path)]
    if len(found) != 1:
        raise ValueError(
            f"{evaluation_uri}: {len(found)} validation results in {VALIDATIONS_PREFIX}* "
            "(TFMA writes exactly one)"
        )
    return found[0]


def load_eval_config(evaluation_uri: str) -> Any:
    """The `EvalConfig` the Evaluator ran with (`eval_config.json`), as TFMA's `load_eval_run`."""
    from google.protobuf import json_format

    path = os.path.join(evaluation_uri, EVAL_CONFIG_FILE)
    run = json_format.Parse(store_files.read_text(path), protos().EvalRun())
    if not run.version:
        raise ValueError(f"{path}: no TFMA version in the evaluation's config")
    return run.eval_config
