"""The docs' field reference: a table of the spec's declared fields, made from the
declarations themselves (docs/dataset-spec.md holds it; a test keeps the two equal).
"""

from __future__ import annotations

from contract.dataset.sections import EvaluationSpec, FeatureSpec, InputSpec, LabelSpec
from contract.dataset.spec import DatasetSpec
from contract.fields import REFERENCE_HEADER, reference_rows


def field_reference() -> str:
    """The docs' table of the spec's declared fields (docs/dataset-spec.md holds it)."""
    sections = (
        ("", DatasetSpec),
        ("label", LabelSpec),
        ("features.<column>", FeatureSpec),
        ("evaluation", EvaluationSpec),
        ("input", InputSpec),
    )
    rows = [row for where, cls in sections for row in reference_rows(cls, where)]
    return "\n".join([*REFERENCE_HEADER, *rows]) + "\n"
