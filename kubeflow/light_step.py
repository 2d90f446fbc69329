"""The steps whose pod runs without TFX's container entrypoint: TensorFlow and TFMA stay unloaded.

Every compiled step names a TFX executor class (`--executor_class_path`), and
TFX's V2 entrypoint imports the Evaluator, TFX's component package and TFMA
before it reads a flag (docs/kubeflow.md, "What a step loads").
kubeflow/step_entrypoint.py hands the steps named in LIGHT_STEPS here
instead, before it imports TFX: the compiled package is unchanged, and local
runs and TFX's compiler keep the TFX class, whose body calls the same function.

What this module does is what TFX 1.16's entrypoint does for a
function-based component (paths under `site-packages/tfx/orchestration/
kubeflow/v2/container/`, `kubeflow_v2_run_executor.py` `_run_executor` and
`kubeflow_v2_entrypoint_utils.py`), for the artifacts the light steps take;
each rule cites its line. tests/test_light_step.py runs TFX's entrypoint and
this one on the same executor input and compares the executor output files.

Port register: docs/ports.md
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from components import store_files

# Executor class the compiled package names -> the function its pod runs, with
# the step's parameters and artifacts as keyword arguments.
LIGHT_STEPS: Mapping[str, str] = {
    "kubeflow.steps.run_status.component.RunStatus_Executor": (
        "kubeflow.steps.run_status.executor.write_status_report"
    ),
    "kubeflow.steps.deploy.component.Deploy_Executor": "kubeflow.steps.deploy.executor.deploy",
    "kubeflow.steps.scoring_report.component.ScoringReport_Executor": (
        "kubeflow.steps.scoring_report.executor.write_scoring_run_report"
    ),
    "kubeflow.steps.input_snapshot.component.InputSnapshot_Executor": (
        "kubeflow.steps.input_snapshot.executor.take_snapshot"
    ),
    "components.gates.data_validation.component.DataValidationGate_Executor": (
        "components.gates.data_validation.executor.validate_examples"
    ),
    "components.gates.drift.component.DataDriftGate_Executor": (
        "components.gates.drift.executor.check_drift_gate"
    ),
    "components.gates.serving_data.component.ServingDataGate_Executor": (
        "components.gates.serving_data.executor.check_serving_data"
    ),
    # TFX's own executor (the SchemaImporter step), ported: components/schema_import/executor.py.
    "tfx.components.schema_gen.import_schema_gen.executor.Executor": (
        "components.schema_import.executor.import_schema"
    ),
    "components.serving.baseline.component.LatestServedModel_Executor": (
        "components.serving.baseline.executor.copy_latest_served"
    ),
    "kubeflow.steps.run_report.component.RunReport_Executor": (
        "kubeflow.steps.run_report.executor.write_run_report"
    ),
    # Our Pusher's executor, TFX's ported with what ours adds: components/serving/push/executor.py.
    "components.serving.push.component.NoDuplicatePushExecutor": (
        "components.serving.push.executor.push_model"
    ),
}
# kubeflow_v2_entrypoint_utils.py, line 34 and lines 144-146: a parameter by
# this name reaches the executor as `input_base` (standard_component_specs.INPUT_BASE_KEY).
_OLD_INPUT_BASE_PROPERTY_NAME = "input_base_uri"
_INPUT_BASE_KEY = "input_base"
# tfx/orchestration/portable/outputs_utils.py, lines 351-355 (artifact_utils.py's key).
TFX_VERSION_PROPERTY = "tfx_version"
# pipeline_spec.proto's ParameterType for an int parameter (kfp-pipeline-spec).
_NUMBER_INTEGER = "NUMBER_INTEGER"
# tfx/types/value_artifact.py, line 27: the custom property `ValueArtifact.write` sets
# (lines 65-73), 0 for a value, 1 for None.
_IS_NULL_KEY = "__is_null__"
# The value artifact a returned string becomes (tfx/types/standard_artifacts.py, `String`,
# lines 347-363: UTF-8), by its schema title in the executor input.
_STRING_TITLE = "tfx.String"
# The value artifact a returned int becomes (standard_artifacts.py, `Integer`, lines
# 384-399: the decimal string, UTF-8).
_INTEGER_TITLE = "tfx.Integer"
# The values the light runner writes: the type each value artifact takes.
_VALUE_TYPES: Mapping[str, type] = {_STRING_TITLE: str, _INTEGER_TITLE: int}
# The property ExampleStatistics and ExampleAnomalies list their splits in
# (standard_artifacts.py, `ExampleStatistics.PROPERTIES`, `SPLIT_NAMES_PROPERTY`).
_SPLIT_NAMES_PROPERTY = "split_names"
# The properties (not custom properties) of the artifact types a light step takes, by
# schema title: tfx/types/standard_artifacts.py, lines 35-37 (their types), 111-114
# (Examples), 153-155 (ExampleAnomalies), 192-194 (ExampleStatistics); every other type a
# light step takes declares none (our DataDrift and Deployment, TFX's Model, ModelRun,
# ModelEvaluation, ModelBlessing and PushedModel).
_INT, _STRING = "INT", "STRING"
TYPE_PROPERTIES: Mapping[str, Mapping[str, str]] = {
    "tfx.Examples": {"span": _INT, "version": _INT, "split_names": _STRING},
    "tfx.ExampleAnomalies": {"span": _INT, "split_names": _STRING},
    "tfx.ExampleStatistics": {"span": _INT, "split_names": _STRING},
}
# tfx/types/artifact.py, line 82: the prefix of a custom property that shares a property's name.
_CUSTOM_PREFIX = "custom:"
# kubeflow/steps/kfp_artifacts.py, `Metrics` (the class TFX's entrypoint gives this title):
# no `tfx_version` custom property, which the KFP UI would chart as a metric.
_UNTAGGED_TITLES = frozenset({"system.Metrics"})


class LightStepError(ValueError):
    """The executor input cannot be run by the light runner."""


@dataclass
class StepArtifact:
    """An input or output artifact of a light step: what TFX's artifact would carry."""

    uri: str
    name: str = ""
    # The schema title of the artifact's type (`title: tfx.String`), where it has one.
    title: str = ""
    # TFX's metadata mapping (kubeflow_v2_entrypoint_utils.py, lines 213-227):
    # every property and custom property as a JSON value.
    metadata: dict[str, Any] = field(default_factory=dict)
    # An input's custom properties as TFX's artifact holds them (`custom_properties_of`).
    custom_properties: dict[str, Any] = field(default_factory=dict)

    def set_string_custom_property(self, key: str, value: str) -> None:
        self.metadata[key] = value

    def set_int_custom_property(self, key: str, value: int) -> None:
        # An MLMD int goes out as a float (kubeflow_v2_entrypoint_utils.py, lines 199-200).
        self.metadata[key] = float(value)

    def set_float_custom_property(self, key: str, value: float) -> None:
        # An MLMD double goes out as it is (kubeflow_v2_entrypoint_utils.py, lines 201-202).
        self.metadata[key] = float(value)

    def has_custom_property(self, key: str) -> bool:
        return key in self.metadata

    def get_custom_property(self, key: str) -> Any:
        return self.metadata.get(key)

    @property
    def split_names(self) -> str:
        """The JSON list of the artifact's splits, as TFX's artifact property reads it: the
        entrypoint takes it from the metadata Struct (kubeflow_v2_entrypoint_utils.py,
        lines 304-317); "" where there is none."""
        return str(self.metadata.get(_SPLIT_NAMES_PROPERTY, ""))

    def to_runtime_artifact(self) -> dict[str, Any]:
        """kubeflow_v2_entrypoint_utils.py, `to_runtime_artifact` (lines 230-249): the URI,
        the metadata, and the name when the executor input gave one."""
        found: dict[str, Any] = {"uri": self.uri, "metadata": dict(self.metadata)}
        if self.name:
            found = {"name": self.name, **found}
        return found


def step_function(class_path: str) -> Callable[..., Any]:
    module, _, name = LIGHT_STEPS[class_path].rpartition(".")
    return getattr(importlib.import_module(module), name)


def _artifacts(
    artifact_lists: Mapping[str, Any], *, inputs: bool = False
) -> dict[str, StepArtifact]:
    """`parse_raw_artifact_dict` (lines 40-65, `_parse_raw_artifact` lines 270-338): each
    artifact's URI, name, properties, custom properties and metadata. A light step takes
    one artifact per input and output, as a function-based component does; an input
    without one is left out, so the function's default (an optional input's None) holds
    (decorators.py, `_extract_func_args`, lines 59-68)."""
    found = {}
    for key, artifact_list in artifact_lists.items():
        artifacts = artifact_list.get("artifacts", [])
        if inputs and not artifacts:
            continue
        if len(artifacts) != 1:
            raise LightStepError(f"artifact {key!r}: {len(artifacts)} artifacts, not one")
        raw = artifacts[0]
        metadata: dict[str, Any] = {}
        # Lines 296-301: properties and custom properties, KFP's Value protos
        # (intValue, doubleValue, stringValue) to MLMD values; out again as JSON
        # values, an int as a float (lines 199-200).
        for kind in ("properties", "customProperties"):
            for name, value in raw.get(kind, {}).items():
                metadata[name] = _pipeline_value(value)
        # Lines 305-332: the metadata Struct, as it is.
        metadata.update(raw.get("metadata", {}))
        title = _schema_title(raw.get("type", {}))
        found[key] = StepArtifact(
            uri=raw.get("uri", ""),
            name=raw.get("name", ""),
            title=title,
            metadata=metadata,
            custom_properties=custom_properties_of(raw, title),
        )
    return found


def _json_number(value: Any) -> Any:
    """A JSON number as a Struct holds it, a double (json_format.ParseDict, MessageToDict)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def custom_properties_of(raw: Mapping[str, Any], title: str) -> dict[str, Any]:
    """The custom properties TFX's artifact of type `title` has after `_parse_raw_artifact`
    (kubeflow_v2_entrypoint_utils.py, lines 296-332), as `get_custom_property` reads them:
    `customProperties` (KFP Values, an int as an int: lines 299-301, compiler_utils.py
    `get_mlmd_value`, lines 348-361), then each metadata entry (lines 305-332) that is no
    property of the type or whose value does not fit its type (those become properties,
    lines 307-321), with `custom:` dropped where it was added for a property's name (lines
    327-330), as a JSON value (a Struct's: a number is a double)."""
    declared = TYPE_PROPERTIES.get(title, {})
    found: dict[str, Any] = {}
    for name, value in raw.get("customProperties", {}).items():
        found[name] = int(value["intValue"]) if "intValue" in value else _pipeline_value(value)
    for name, value in raw.get("metadata", {}).items():
        value = _json_number(value)
        kind = declared.get(name)
        if (kind == _INT and isinstance(value, float)) or (
            kind == _STRING and isinstance(value, str)
        ):
            continue
        if name.startswith(_CUSTOM_PREFIX) and name[len(_CUSTOM_PREFIX) :] in declared:
            name = name[len(_CUSTOM_PREFIX) :]
        found[name] = value
    return found


def _schema_title(artifact_type: Mapping[str, Any]) -> str:
    """kubeflow_v2_entrypoint_utils.py, `_retrieve_class_path` (lines 252-267): the type's
    `schemaTitle`, or the `title` of its `instanceSchema` YAML (`tfx.Artifact` without one)."""
    if artifact_type.get("schemaTitle"):
        return artifact_type["schemaTitle"]
    if artifact_type.get("instanceSchema"):
        import yaml

        return (yaml.safe_load(artifact_type["instanceSchema"]) or {}).get("title", "tfx.Artifact")
    return ""


def _pipeline_value(value: Mapping[str, Any]) -> Any:
    """KFP's deprecated `Value` proto (intValue, doubleValue, stringValue) as a plain value."""
    if "intValue" in value:
        return float(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "stringValue" in value:
        return value["stringValue"]
    raise LightStepError(f"unrecognized value {value!r}")


def parameters(executor_input: Mapping[str, Any], inputs_spec: Mapping[str, Any] | None) -> dict:
    """`parse_execution_properties` (kubeflow_v2_entrypoint_utils.py, lines 116-168): the
    step's parameters, from `parameterValues` when the inputs spec is given, else from
    the deprecated `parameters`."""
    inputs = executor_input.get("inputs", {})
    declared = (inputs_spec or {}).get("parameters", {})
    raw = inputs.get("parameterValues", {}) if inputs_spec else inputs.get("parameters", {})
    found = {}
    for key, value in raw.items():
        if key == _OLD_INPUT_BASE_PROPERTY_NAME:  # Lines 144-146.
            key = _INPUT_BASE_KEY
        if not inputs_spec:
            found[key] = _pipeline_value(value)  # Lines 158-159.
            continue
        if value is None:  # Lines 162-166.
            raise LightStepError(f"parameter {key!r} has no value")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # A struct Value's number is a double (line 149); an int parameter is cast (155-157).
            value = float(value)
            if declared.get(key, {}).get("parameterType") == _NUMBER_INTEGER:
                value = int(value)
        found[key] = value
    return found


def _driver_parameters(output_file: str) -> dict[str, dict[str, Any]]:
    """kubeflow_v2_run_executor.py, lines 84-97: what a driver wrote in the output file
    before the executor ran, `parameterValues` and (deprecated) `parameters`, each
    overwriting the executor input's field of the same name."""
    if not output_file or not store_files.exists(output_file):
        return {}
    with store_files.open(output_file, "r") as f:
        written = json.load(f)
    return {key: written[key] for key in ("parameterValues", "parameters") if written.get(key)}


def run(class_path: str, executor_input: Mapping[str, Any], inputs_spec: Mapping | None) -> None:
    """Runs the light step `class_path` names and writes its executor output file."""
    from absl import flags, logging

    # absl's own log format, as absl's app.run (TFX's main) installs it: the step's log
    # reads as any other step's, and run_compiled.py finds "Starting executor" in it.
    flags.FLAGS.mark_as_parsed()  # This runner takes no absl flags: none to parse.
    logging.use_absl_handler()
    logging.set_verbosity(logging.INFO)  # kubeflow_v2_run_executor.py, line 56.
    output_file = executor_input.get("outputs", {}).get("outputFile", "")
    overrides = _driver_parameters(output_file)
    if overrides:
        copied = json.loads(json.dumps(executor_input))
        for key, values in overrides.items():
            copied.setdefault("inputs", {}).setdefault(key, {}).update(values)
        executor_input = copied
    inputs = _artifacts(executor_input.get("inputs", {}).get("artifacts", {}), inputs=True)
    outputs = _artifacts(executor_input.get("outputs", {}).get("artifacts", {}))
    exec_properties = parameters(executor_input, inputs_spec)
    output_parameters = executor_input.get("outputs", {}).get("parameters", {})
    logging.info(
        "Executor %s do (light): inputs: %s, outputs: %s, exec_properties: %s",
        class_path,
        inputs,
        outputs,
        exec_properties,
    )
    logging.info("Starting executor")  # Line 134, right before the executor's Do.
    function = step_function(class_path)
    # TFX's function executor hands the function what its signature names, and nothing
    # else (decorators.py, `_extract_func_args`, lines 45-106, from `_FunctionExecutor.Do`,
    # lines 242-263): an output it does not take is a value it returns, and a parameter
    # it does not take (a driver's, from the output file of an earlier attempt) is left.
    taken = inspect.signature(function).parameters
    arguments = {**exec_properties, **inputs, **outputs}
    returned = function(**{k: v for k, v in arguments.items() if k in taken})
    _write_returned_values(class_path, returned or {}, outputs)
    # outputs_utils.tag_output_artifacts_with_version (line 137 of the entrypoint).
    from tfx.version import __version__ as tfx_version

    for artifact in outputs.values():
        if artifact.title in _UNTAGGED_TITLES:
            continue
        if not artifact.has_custom_property(TFX_VERSION_PROPERTY):
            artifact.set_string_custom_property(TFX_VERSION_PROPERTY, tfx_version)
    # Lines 139-142 and 168-170: `translate_executor_output`, one artifact per output,
    # written as JSON (json_format.MessageToJson's two-space indent).
    executor_output: dict[str, Any] = {
        "artifacts": {
            key: {"artifacts": [artifact.to_runtime_artifact()]}
            for key, artifact in outputs.items()
        }
    }
    if output_parameters:
        executor_output["parameterValues"] = _parameter_values(
            class_path, output_parameters, outputs, returned or {}
        )
    if output_file:  # Lines 168-170; the parent directory is made as fileio.makedirs does.
        store_files.write_text(output_file, json.dumps(executor_output, indent=2))


def _write_returned_values(
    class_path: str, returned: Mapping[str, Any], outputs: Mapping[str, StepArtifact]
) -> None:
    """What TFX's function executor does with the dict a component returns
    (tfx/dsl/component/experimental/decorators.py, `_assign_returned_values`, lines
    109-147): each value goes to the output artifact of its name, a value artifact,
    written by `ValueArtifact.write` (tfx/types/value_artifact.py, lines 65-73): the
    encoded value at the artifact's URI and `__is_null__` 0."""
    for key, value in returned.items():
        artifact = outputs.get(key)
        if artifact is None:
            raise LightStepError(f"{class_path} returned {key!r}, which is no output of the step")
        value_type = _VALUE_TYPES.get(artifact.title)
        if value_type is None or type(value) is not value_type:
            raise LightStepError(
                f"{class_path}: output {key!r} ({artifact.title or 'untyped'}, "
                f"{type(value).__name__}): the light runner writes strings to {_STRING_TITLE} "
                f"and ints to {_INTEGER_TITLE} only"
            )
        artifact.set_int_custom_property(_IS_NULL_KEY, 0)
        with store_files.open(artifact.uri, "wb") as f:
            f.write(str(value).encode("utf-8"))


def _parameter_values(
    class_path: str,
    output_parameters: Mapping[str, Any],
    outputs: Mapping[str, StepArtifact],
    returned: Mapping[str, Any],
) -> dict[str, Any]:
    """kubeflow_v2_run_executor.py, lines 156-174: each output parameter is the value of
    the output artifact of its name, a String's as `string_value`, an Integer's as
    `number_value` (a double)."""
    found = {}
    for key in output_parameters:
        if key not in outputs:  # Lines 157-159.
            raise LightStepError(
                f"{class_path}: output parameter {key!r} has no output artifact of its name"
            )
        if key not in returned:
            raise LightStepError(f"{class_path} returned no value for output {key!r}")
        value = returned[key]
        found[key] = float(value) if isinstance(value, int) else value
    return found
