"""What an Evaluator run evaluated, kept so that a later run can reuse its baseline's metrics.

The inner loop evaluates each candidate against the model being served. That
model was a candidate once, in the run that pushed it, and that run's
Evaluator scored it on its examples with its eval config; while those are
still the examples and the config, scoring it again yields the same metrics.

So the Evaluator writes `served_model.EVALUATED_FILE` beside its output:
what it evaluated (`record_of`: the candidate's `model_digest`, a digest of
the evaluated splits' files, the eval config and the code that computes the
metrics) and the candidate's per-slice sums (components/evaluator/batched_metrics.py).
The Pusher copies the file into the version it serves
(`served_model.SERVED_EVALUATION_FILE`). A
later Evaluator whose baseline is that version asks `why_not_reusable`; when
nothing differs it scores the candidate alone and takes the baseline's sums
from the record. Anything else scores both models, as before.

The record covers the code as well as the data: the sums are in the batched
metrics' own format and arithmetic, and a TFMA upgrade may change a
metric, so a change to either scores the baseline again. Slices whose
columns are a model's transformed features depend on the models (TFMA reads
each model's transformed features before the raw ones), so an evaluation
slicing on them is never reused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tfx import types
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from components.evaluator import batch_slices, batched_metrics
from components.evaluator import extractors as evaluation_extractors
from components.serving.baseline.component import signature_defs
from components.serving.serving_dir import add_directory, model_digest

FORMAT = 1
# The record's fields that must equal the current run's for its sums to be reused.
_SAME = ("format", "examples", "splits", "config", "evaluator")
# On the ModelEvaluation artifact and in the record: what happened to the baseline.
BASELINE_METRICS_PROPERTY = "baseline_metrics"
REUSED = "reused"
NO_BASELINE = "no baseline"
COMPUTED = "computed: "  # + why the record was not reused

# TFX Evaluator properties that change what is computed (the splits are recorded apart).
_METRIC_PROPERTIES = (
    standard_component_specs.EVAL_CONFIG_KEY,
    standard_component_specs.FAIRNESS_INDICATOR_THRESHOLDS_KEY,
    standard_component_specs.MODULE_FILE_KEY,
    standard_component_specs.MODULE_PATH_KEY,
)
# What TFMA calls when a model spec names no preprocessing function
# (extractors/transformed_features_extractor.py L28).
_DEFAULT_PREPROCESSING = ("transformed_features", "transformed_labels")


def examples_digest(
    examples: Sequence[types.Artifact], splits: Sequence[str], schema_uri: str | None = None
) -> str:
    """SHA-256 over the evaluated splits (each split's name, its files' names and bytes)
    and the schema the Evaluator parses them with, if it is given one."""
    digest = hashlib.sha256()
    for split in splits:
        for uri in artifact_utils.get_split_uris(list(examples), split):
            digest.update(split.encode() + b"\0")
            add_directory(digest, uri)
    if schema_uri is not None:
        digest.update(b"\0schema\0")
        add_directory(digest, schema_uri)
    return digest.hexdigest()


def config_digest(exec_properties: Mapping[str, Any]) -> str:
    """SHA-256 over the Evaluator properties that shape the metrics, normalized
    (the eval config parsed, so that formatting and field order do not count)."""
    normalized: dict[str, Any] = {}
    for key in _METRIC_PROPERTIES:
        value = exec_properties.get(key)
        if key == standard_component_specs.EVAL_CONFIG_KEY and value:
            config = proto_utils.json_to_proto(value, tfma.EvalConfig())
            value = json_format.MessageToDict(config, preserving_proto_field_name=True)
        elif key == standard_component_specs.FAIRNESS_INDICATOR_THRESHOLDS_KEY:
            value = json.loads(value) if isinstance(value, str) else value
        normalized[key] = value
    return hashlib.sha256(json.dumps(normalized, sort_keys=True).encode()).hexdigest()


def evaluator_digest() -> str:
    """SHA-256 over TFMA's version and the source of the batched metrics (their slicing
    too) and extractors."""
    digest = hashlib.sha256(tfma.__version__.encode() + b"\0")
    for module in (batched_metrics, batch_slices, evaluation_extractors):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


def slices_read_raw_features_only(eval_config: tfma.EvalConfig, model_dirs: Sequence[str]) -> bool:
    """Whether no slice column is an output of a model's preprocessing signatures, so
    that the slices are the same whichever models are scored. False where a
    preprocessing function is not a signature (its outputs are unknown here)."""
    try:
        columns = evaluation_extractors.slice_columns(eval_config)
    except ValueError:  # SQL slices: the batched path does not run them either
        return False
    if not columns:
        return True
    names = {n for spec in eval_config.model_specs for n in spec.preprocessing_function_names}
    for model_dir in model_dirs:
        signatures = signature_defs(model_dir)
        for name in names or _DEFAULT_PREPROCESSING:
            if name not in signatures or columns & set(signatures[name].outputs):
                return False
    return True


def record_of(
    *,
    candidate_dir: str,
    model_dirs: Sequence[str],
    examples: Sequence[types.Artifact],
    splits: Sequence[str],
    schema_uri: str | None,
    exec_properties: Mapping[str, Any],
    eval_config: tfma.EvalConfig,
) -> dict[str, Any]:
    """What this Evaluator run evaluates (the sums and the outcome are added later).

    `model_dirs`: the SavedModels it scores (the candidate's, and the baseline's if any).
    """
    return {
        "format": FORMAT,
        "candidate_model": model_digest(candidate_dir),
        "examples": examples_digest(examples, splits, schema_uri),
        "splits": list(splits),
        "config": config_digest(exec_properties),
        "evaluator": evaluator_digest(),
        "raw_feature_slices": slices_read_raw_features_only(eval_config, model_dirs),
    }


_DIFFERENCES = {
    "format": "its record is in another format",
    "examples": "the eval examples are not the ones its pushing run evaluated",
    "splits": "the eval splits are not the ones its pushing run evaluated",
    "config": "the eval config is not its pushing run's",
    "evaluator": "TFMA or the batched metrics code changed since its pushing run",
}


def why_not_reusable(
    stored: Mapping[str, Any] | None,
    record: Mapping[str, Any],
    baseline_digest: Callable[[], str],
) -> str | None:
    """Why a served version's record (`stored`, None if it has none) cannot stand in for
    scoring that version in the run described by `record`; None when it can.

    `baseline_digest` computes the served model's digest, last, as it reads the model.
    """
    if stored is None:
        return "the served version holds no evaluation record"
    for field in _SAME:
        if stored.get(field) != record[field]:
            return _DIFFERENCES[field]
    if "candidate_sums" not in stored:
        return "its pushing run's metrics came from TFMA's per-example evaluator"
    if not (stored.get("raw_feature_slices") and record["raw_feature_slices"]):
        return "slices read transformed features, which depend on the models scored"
    if baseline_digest() != stored.get("candidate_model"):
        return "the served model is not the one its record evaluated"
    return None


def write_record(path: str, record: Mapping[str, Any]) -> None:
    with fileio.open(path, "w") as f:
        f.write(json.dumps(record))
