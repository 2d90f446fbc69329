"""The report's fields that come from a run's output artifacts, wherever they were found.

Three readers find them, each by the step and output key that fill a report
field (the step registry's report roles, pipeline/steps.py). Locally, the
run's summary reads them from ML Metadata (pipeline/local/run_summary.py).
On Kubeflow, the RunReport step, last in the DAG, gets the artifacts as its
inputs (properties from KFP's metadata store); the RunStatus exit handler,
which runs even after a failure, finds them in the steps' own records (the
metadata each step's executor output carried). Each hands this module the
artifacts' URIs and properties as plain values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from components.artifact_names import (
    ALREADY_SERVED_PROPERTY,
    FINGERPRINT_PROPERTY,
    HAS_MODEL_PROPERTY,
    LEFT_OUT_PROPERTY,
    PUSHED_DESTINATION_PROPERTY,
    PUSHED_PROPERTY,
    SERVED_PATH_PROPERTY,
    SPAN_PROPERTY,
    SPANS_PROPERTY,
    VERSION_PROPERTY,
)
from components.report.contents import ArtifactUris, InputData, read_artifacts
from components.serving.serving_dir import serving_signatures

Properties = Mapping[str, object]
# TFX's V2 entrypoint writes a custom property that shares a type property's
# name (Examples' `span`, `version`) with this prefix.
CUSTOM_PREFIX = "custom:"
_EXAMPLE_PROPERTIES = (
    SPAN_PROPERTY,
    VERSION_PROPERTY,
    SPANS_PROPERTY,
    FINGERPRINT_PROPERTY,
    LEFT_OUT_PROPERTY,
)
# What TFX's Evaluator records on its ModelBlessing.
BLESSED_PROPERTY = "blessed"


@dataclass(frozen=True)
class RunOutputs:
    """What the run's steps produced: the URIs the report reads, and the properties it shows."""

    uris: ArtifactUris = field(default_factory=ArtifactUris)
    examples: Properties | None = None  # ExampleGen's examples
    blessing: Properties | None = None
    baseline: Properties | None = None
    pushed: Properties | None = None

    @classmethod
    def from_artifacts(cls, found: Mapping[str, tuple[str, Properties]]) -> RunOutputs:
        """From report field -> (URI, properties) of the artifact that fills it.

        A field of ArtifactUris takes the URI, a field of this class the
        properties; any other field (the Deploy step's outcome, which the
        RunReport step reads itself) is not this class's.
        """
        uris = {
            f.name: found[f.name][0] for f in dataclasses.fields(ArtifactUris) if f.name in found
        }
        properties = {
            f.name: dict(found[f.name][1])
            for f in dataclasses.fields(cls)
            if f.name != "uris" and f.name in found
        }
        return cls(uris=ArtifactUris(**uris), **properties)


def property_value(properties: Properties, name: str) -> object:
    """A property by name, under TFX's `custom:` prefix where the entrypoint put it there."""
    value = properties.get(CUSTOM_PREFIX + name)
    return properties.get(name) if value is None else value


def _int(properties: Properties | None, name: str) -> int | None:
    value = property_value(properties, name) if properties is not None else None
    return None if value is None else int(value)  # type: ignore[call-overload]


def _str(properties: Properties | None, name: str) -> str | None:
    value = property_value(properties, name) if properties is not None else None
    return None if value is None else str(value)


def report_fields(outputs: RunOutputs) -> dict[str, Any]:
    """`RunReport(**...)` fields: input, outcome, baseline, push, and the artifacts' sections."""
    fields = read_artifacts(outputs.uris)
    if outputs.examples is not None:
        raw = {name: property_value(outputs.examples, name) for name in _EXAMPLE_PROPERTIES}
        version = raw[VERSION_PROPERTY]
        fields["input"] = InputData.from_properties(
            {**raw, VERSION_PROPERTY: None if version is None else int(version)}  # type: ignore[call-overload]
        )
    blessed = _int(outputs.blessing, BLESSED_PROPERTY)
    fields["blessed"] = None if blessed is None else blessed == 1
    if outputs.baseline is not None and _int(outputs.baseline, HAS_MODEL_PROPERTY) != 0:
        fields["baseline_path"] = _str(outputs.baseline, SERVED_PATH_PROPERTY)
    if _int(outputs.pushed, PUSHED_PROPERTY) == 1:
        fields["pushed_destination"] = _str(outputs.pushed, PUSHED_DESTINATION_PROPERTY)
        if fields["pushed_destination"]:
            fields["signatures"] = serving_signatures(fields["pushed_destination"])
    fields["already_served_path"] = _str(outputs.pushed, ALREADY_SERVED_PROPERTY)
    return fields
