"""Rendering: the drafted dataset spec, written from one template (dataset.yaml.j2).

The template holds the file's layout and its comments; this module gives it
the decisions, and the values the spec's declarations default (each feature
kind's settings, the evaluation's margin and max_drop).
"""

from __future__ import annotations

import datetime
import math
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

import jinja2
import yaml

from contract.dataset.sections import (
    FEATURE_SETTINGS,
    GATE_METRICS,
    EvaluationSpec,
    InputSpec,
    Task,
)
from contract.fields import declared_fields, one_line
from schemas.draft.features import Decision
from schemas.draft.noise import DRIFT_FLOORS, NOISE_MULTIPLE, NOISE_REPEATS, ONE_STEP_MARGIN
from schemas.draft.profiles import ColumnProfile, number
from schemas.draft.task import class_names, naive_value

TEMPLATE = "dataset.yaml.j2"
# YAML's limit on an implicit (`key: value`) key; a longer one must be explicit (`? key`).
# YAML 1.2 spec, 7.4.2 "Flow Mappings": implicit keys are "restricted to ... at
# most 1024 Unicode characters"; PyYAML's scanner forgets a simple key after 1024.
IMPLICIT_KEY_LIMIT = 1024


def _dumped(value: Any, style: str | None = None) -> str:
    # An infinite width: PyYAML folds a long scalar over lines at spaces otherwise.
    text = yaml.safe_dump(value, default_flow_style=True, width=math.inf, default_style=style)
    return text.strip().removesuffix("\n...").strip()


def yaml_scalar(value: Any) -> str:
    """`value` as one line of YAML (a scalar, or a flow list), quoted where YAML needs it:
    `no`, `2024` and `2024-06-01` as text stay text, and a line break is an escape."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_scalar(v) for v in value) + "]"
    text = _dumped(value)
    if "\n" in text:
        # PyYAML writes a string holding a line break as a quoted scalar over several
        # lines, which reads back only at the right indentation; one escaped line does.
        text = _dumped(value, style='"')
    return text


def yaml_key(value: Any, indent: int) -> str:
    """`value` as a block mapping's key at `indent` spaces, before its `: value`: implicit,
    or explicit (`? key` and the `:` on the next line) beyond YAML's implicit-key limit."""
    text = yaml_scalar(value)
    if len(text) <= IMPLICIT_KEY_LIMIT:
        return text
    return f"? {text}\n{' ' * indent}"


def flow(settings: Mapping[str, Any]) -> str:
    """A feature's settings as a YAML flow mapping, in their order."""
    return "{" + ", ".join(f"{k}: {yaml_scalar(v)}" for k, v in settings.items()) + "}"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("schemas.draft", "."),
        autoescape=False,  # YAML, not HTML: values are quoted by the `yaml` filter.
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["yaml"] = yaml_scalar
    env.filters["key"] = yaml_key
    env.filters["comment"] = one_line
    env.filters["flow"] = flow
    env.filters["number"] = number
    env.filters["g"] = lambda value: f"{value:g}"
    return env


def full_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A decision's settings (`kind` first) with its kind's declared defaults written out,
    so a user sees them; optional lists (missing_markers) and settings with no
    default only where the decision set them."""
    full = dict(settings)
    for key, default in FEATURE_SETTINGS[settings["kind"]].items():
        if default not in ((), None):
            full.setdefault(key, default)
    return full


def drafted_evaluation(task: str, naive: float) -> EvaluationSpec:
    """The gate the draft writes: the declared margin and max_drop (for a regression,
    max_drop in the label's units: that share of its standard deviation)."""
    metric, higher_is_better = GATE_METRICS[task]
    defaults = {f.name: f.default for f in declared_fields(EvaluationSpec) if not f.required}
    max_drop = defaults["max_drop"]
    if not higher_is_better:
        max_drop = float(number(max_drop * naive))
    return EvaluationSpec(
        metric=metric, naive_value=naive, margin=defaults["margin"], max_drop=max_drop
    )


def render_spec(
    *,
    name: str,
    data_root: Path,
    label: ColumnProfile,
    task: str,
    decisions: Mapping[str, Decision],
    slices: list[str],
    profiles: Mapping[str, ColumnProfile],
    drift_thresholds: Mapping[str, tuple[str, float, float]],
    data_input: InputSpec | None = None,
) -> str:
    """The dataset spec's text. `drift_thresholds`: feature -> (measure, threshold, the
    noise it was derived from)."""
    naive, naive_model = naive_value(label, task)
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            data_root=data_root,
            date=datetime.date.today().isoformat(),
            name=name,
            tasks=get_args(Task),
            task=task,
            label=label,
            mean=statistics.fmean(label.numbers()) if task == "regression" else None,
            naive_value=naive,
            naive_model=naive_model,
            classes=class_names(label) if task != "regression" else [],
            data_input=data_input or InputSpec(),
            features=[
                {
                    "column": column,
                    "settings": full_settings(settings),
                    "profile": profiles[column],
                    "reason": reason,
                }
                for column, (settings, reason) in decisions.items()
                if settings is not None
            ],
            ignored=[
                (column, reason)
                for column, (settings, reason) in decisions.items()
                if settings is None
            ],
            slices=slices,
            evaluation=drafted_evaluation(task, naive),
            drift_thresholds=drift_thresholds,
            noise_multiple=NOISE_MULTIPLE,
            noise_repeats=NOISE_REPEATS,
            drift_floors=DRIFT_FLOORS,
            one_step_margin=ONE_STEP_MARGIN,
        )
    )
