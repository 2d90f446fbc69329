"""Plain values (a parsed dataset.yaml, the JSON a component's custom_config carries)
into a DatasetSpec, with errors that name the field; `load_spec` reads the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from contract.dataset.error import DatasetSpecError, check
from contract.dataset.names import model_names
from contract.dataset.sections import (
    DRIFT_MEASURE_MAXIMUM,
    FEATURE_SETTINGS,
    GATE_METRICS,
    DriftMeasure,
    DriftMode,
    DriftSpec,
    EvaluationSpec,
    FeatureDrift,
    FeatureKind,
    FeatureSpec,
    InputSpec,
    LabelSpec,
    Task,
)
from contract.dataset.span_grammar import (
    DATE_SPECS,
    SPAN_PLACEHOLDER,
    VERSION_PLACEHOLDER,
    unreadable,
)
from contract.dataset.spec import CUSTOM_CONFIG_KEY, PIPELINE_NAME_PATTERN, DatasetSpec
from contract.fields import field_names


def _parse_feature(name: str, values: object) -> FeatureSpec:
    where = f"features.{name}"
    values = check.mapping(values, where)
    kind = check.choice(values.get("kind"), FeatureKind, f"{where}.kind")
    settings = FEATURE_SETTINGS[kind]
    check.no_unknown(values, ["kind", *settings], where)
    if kind == "id" and values.get("num_values") is None:
        raise DatasetSpecError(
            f"{where}.num_values: required for kind id (ids are 0..num_values-1)"
        )
    return check.read(FeatureSpec, {**settings, **values}, where)


def _parse_label(values: object) -> LabelSpec:
    values = check.mapping(values, "label")
    check.no_unknown(values, field_names(LabelSpec), "label")
    task = check.choice(values.get("task"), Task, "label.task")
    column = values.get("column")
    derive = values.get("derive")
    if (column is None) == (derive is None):
        raise DatasetSpecError("label: give exactly one of `column` (a raw column) or `derive`")
    if column is not None:
        column = check.string(column, "label.column")
        if "columns" in values:
            raise DatasetSpecError("label.columns: only for a derived label (`derive`)")
    else:
        derive = check.string(derive, "label.derive")
        if not derive.isidentifier():
            raise DatasetSpecError(
                f"label.derive: {derive!r} is not a function name in trainer/custom.py"
            )
        if not values.get("columns"):
            raise DatasetSpecError("label.columns: a derived label names the raw columns it reads")
    label = check.read(LabelSpec, values, "label", task=task, column=column, derive=derive)
    classes = label.classes
    if task == "regression":
        if classes:
            raise DatasetSpecError("label.classes: a regression label has no classes")
        # Required for regression: None is refused, naming the field.
        check.number(label.mean, "label.mean")
        std = check.number(label.std, "label.std")
        if std <= 0:
            raise DatasetSpecError(f"label.std: must be > 0, got {std}")
    else:
        for key in ("mean", "std"):
            if key in values:
                raise DatasetSpecError(f"label.{key}: only for regression")
        wanted = "exactly 2" if task == "binary" else "at least 3"
        if (task == "binary" and len(classes) != 2) or (task == "multiclass" and len(classes) < 3):
            hint = (
                "; with 2 classes the task is binary"
                if task == "multiclass" and len(classes) == 2
                else ""
            )
            raise DatasetSpecError(
                f"label.classes: a {task} label needs {wanted} classes, got "
                f"{len(classes)} ({list(classes)}){hint}"
            )
        if len(set(classes)) != len(classes):
            raise DatasetSpecError(f"label.classes: duplicates in {list(classes)}")
    return label


def _parse_evaluation(values: object, task: str) -> EvaluationSpec:
    values = check.mapping(values, "evaluation")
    check.no_unknown(values, field_names(EvaluationSpec), "evaluation")
    metric, higher_is_better = GATE_METRICS[task]
    if values.get("metric", metric) != metric:
        raise DatasetSpecError(
            f"evaluation.metric: a {task} task is gated on {metric}, got {values['metric']!r}"
        )
    evaluation = check.read(EvaluationSpec, values, "evaluation", metric=metric)
    naive_value = evaluation.naive_value
    if higher_is_better and not 0.0 <= naive_value <= 1.0:
        raise DatasetSpecError(f"evaluation.naive_value: {metric} is in [0, 1], got {naive_value}")
    if not higher_is_better and naive_value <= 0:
        raise DatasetSpecError(f"evaluation.naive_value: an RMSE must be > 0, got {naive_value}")
    if not 0.0 <= evaluation.margin <= 1.0:
        raise DatasetSpecError(
            f"evaluation.margin: the share of the naive model's error to remove, in [0, 1]; "
            f"got {evaluation.margin}"
        )
    max_drop = evaluation.max_drop
    if max_drop < 0 or (higher_is_better and max_drop > 1):
        raise DatasetSpecError(
            f"evaluation.max_drop: must be >= 0{' and <= 1' if higher_is_better else ''}, "
            f"got {max_drop}"
        )
    return evaluation


def parse_input(values: object) -> InputSpec:
    """The `input:` section (None: a plain directory of CSV files); errors name the field."""
    if values is None:
        return InputSpec()
    data_input = check.read(InputSpec, values, "input")
    pattern, spans = data_input.pattern, data_input.spans
    if pattern is None:
        if spans != 1:
            raise DatasetSpecError(
                "input.spans: a window of spans needs input.pattern, e.g. span-{SPAN}/*.csv"
            )
        return InputSpec(format=data_input.format)
    if pattern.startswith("/") or "://" in pattern or ".." in pattern.split("/"):
        raise DatasetSpecError(
            f"input.pattern: {pattern!r} must be relative to the data root, "
            "e.g. span-{SPAN}/*.csv"
        )
    span_specs = SPAN_PLACEHOLDER.findall(pattern)
    dates = [pattern.count(d) for d in DATE_SPECS]
    if len(span_specs) > 1 or max(dates) > 1:
        raise DatasetSpecError(f"input.pattern: {pattern!r} names the span more than once")
    if span_specs and any(dates):
        raise DatasetSpecError(
            f"input.pattern: {pattern!r} has both {{SPAN}} and date placeholders; use one"
        )
    if any(dates) and not all(dates):
        raise DatasetSpecError(
            f"input.pattern: {pattern!r} needs all of {', '.join(DATE_SPECS)} for a date span"
        )
    if len(VERSION_PLACEHOLDER.findall(pattern)) > 1:
        raise DatasetSpecError(f"input.pattern: {pattern!r} has {{VERSION}} more than once")
    leftover = VERSION_PLACEHOLDER.sub("", SPAN_PLACEHOLDER.sub("", pattern))
    for date in DATE_SPECS:
        leftover = leftover.replace(date, "")
    if "{" in leftover or "}" in leftover:
        raise DatasetSpecError(
            f"input.pattern: {pattern!r} has a placeholder other than {{SPAN}}, {{SPAN:N}}, "
            "{VERSION}, {VERSION:N} (N a width of 1 or more), {YYYY}, {MM}, {DD}"
        )
    if not span_specs and not any(dates):
        raise DatasetSpecError(
            f"input.pattern: {pattern!r} has no span placeholder: add {{SPAN}} or "
            "{YYYY}-{MM}-{DD}, or leave input.pattern out to read every CSV under the data root"
        )
    problem = unreadable(pattern)
    if problem:
        raise DatasetSpecError(f"input.pattern: {pattern!r} reads no span: {problem}")
    return data_input


def _parse_drift(values: object, features: Mapping[str, FeatureSpec]) -> DriftSpec:
    if values is None:
        return DriftSpec(features={})
    values = check.mapping(values, "drift")
    check.no_unknown(values, ["mode", "features"], "drift")
    default_mode = check.choice(values.get("mode", "fail"), DriftMode, "drift.mode")
    measures = get_args(DriftMeasure)
    parsed = {}
    for name, entry in check.named(values.get("features") or {}, "drift.features").items():
        where = f"drift.features.{name}"
        if name not in features:
            raise DatasetSpecError(
                f"{where}: {name!r} is not under `features:`; drift is checked on features"
            )
        entry = check.mapping(entry, where)
        check.no_unknown(entry, [*measures, "mode"], where)
        given = [m for m in measures if m in entry]
        if len(given) != 1:
            raise DatasetSpecError(f"{where}: give exactly one of {', '.join(measures)}")
        threshold = check.number(entry[given[0]], f"{where}.{given[0]}")
        maximum = DRIFT_MEASURE_MAXIMUM[given[0]]
        if not 0.0 < threshold <= maximum:
            raise DatasetSpecError(
                f"{where}.{given[0]}: a threshold in (0, {maximum:g}], got {threshold}"
            )
        mode = check.choice(entry.get("mode", default_mode), DriftMode, f"{where}.mode")
        parsed[name] = FeatureDrift(measure=given[0], threshold=threshold, mode=mode)
    return DriftSpec(features=parsed)


def parse_spec(values: object) -> DatasetSpec:
    """A DatasetSpec from plain values (parsed YAML or JSON); errors name the field."""
    values = check.mapping(values, "dataset spec")
    check.no_unknown(values, field_names(DatasetSpec), "")
    name = check.string(values.get("name"), "name")
    if not PIPELINE_NAME_PATTERN.fullmatch(name):
        raise DatasetSpecError(
            f"name: {name!r} must match {PIPELINE_NAME_PATTERN.pattern} (it is the pipeline "
            "name, and Kubeflow Pipelines' rule applies locally too)"
        )
    label = _parse_label(values.get("label"))
    raw_features = check.named(values.get("features"), "features")
    if not raw_features:
        raise DatasetSpecError("features: the model needs at least one feature")
    features = {k: _parse_feature(k, v) for k, v in raw_features.items()}
    model_names(features)
    ignore = check.strings(values.get("ignore"), "ignore")
    slices = check.strings(values.get("slices"), "slices")
    if label.column in features:
        raise DatasetSpecError(f"features.{label.column}: the label cannot also be a feature")
    both = sorted(set(ignore) & (set(features) | set(label.source_columns)))
    if both:
        raise DatasetSpecError(f"ignore: {both} are also used as the label or a feature")
    evaluation = _parse_evaluation(values.get("evaluation"), label.task)
    keys = check.strings(values.get("keys"), "keys")
    for i, key in enumerate(keys):
        if key in features or key in label.source_columns:
            raise DatasetSpecError(
                f"keys[{i}]: {key!r} is {'a feature' if key in features else 'the label'}; "
                "a key is an id column the model never reads"
            )
        if keys.index(key) != i:
            raise DatasetSpecError(f"keys[{i}]: {key!r} is named twice")
    return DatasetSpec(
        name=name,
        label=label,
        features=features,
        evaluation=evaluation,
        ignore=ignore,
        slices=slices,
        keys=keys,
        input=parse_input(values.get("input")),
        drift=_parse_drift(values.get("drift"), features),
    )


def spec_from_custom_config(custom_config: Mapping[str, Any] | None) -> DatasetSpec:
    """The spec a component's `custom_config` carries (`DatasetSpec.to_custom_config`)."""
    if not custom_config or CUSTOM_CONFIG_KEY not in custom_config:
        raise DatasetSpecError(
            f"custom_config has no {CUSTOM_CONFIG_KEY!r}: the pipeline passes the "
            "dataset spec to Transform and Trainer; build it with create_pipeline()"
        )
    return parse_spec(json.loads(custom_config[CUSTOM_CONFIG_KEY]))


def load_spec(path: str | Path) -> DatasetSpec:
    """Reads and validates a dataset spec file; errors start with the file's path."""
    path = Path(path)
    if not path.is_file():
        raise DatasetSpecError(
            f"{path}: no dataset spec here; draft one with "
            "`python -m schemas.draft --data-root DIR --label COLUMN --output-dir SCHEMA_DIR`"
        )
    import yaml  # Here, not at the top: the model code imports this module on hosts without it.

    try:
        values = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise DatasetSpecError(f"{path}: not valid YAML: {err}") from None
    try:
        return parse_spec(values)
    except DatasetSpecError as err:
        raise DatasetSpecError(f"{path}: {err}") from None
