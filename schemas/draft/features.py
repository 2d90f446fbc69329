"""Feature decisions: each column's kind (or why it is ignored), the slices, the drift measure.

Decided from the column's profile alone; the settings written for each kind
start from the dataset spec's declared defaults (contract/dataset/sections.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from contract.dataset.sections import FEATURE_SETTINGS, DriftMeasure
from schemas.draft.profiles import ColumnProfile, DraftError

# Int columns with at most this many values are categories (codes, levels).
MAX_INT_CATEGORIES = 10
# Up to this many distinct values a learned vocabulary; above, hash buckets.
MAX_VOCABULARY = 1000
# Columns whose values are (nearly) all distinct carry no signal to learn.
IDENTIFIER_UNIQUE_SHARE = 0.95
IDENTIFIER_MIN_ROWS = 50
# Slices: string columns with few values, up to this many columns.
MAX_SLICE_VALUES = 10
MAX_SLICES = 2
# Cells that mean "no value" in exports that do not leave them empty. A column of
# numbers with such cells is typed as strings; the spec reads it as numbers.
MISSING_MARKERS = ("NA", "N/A", "NaN", "nan", "NULL", "null", "None", "?", "-", ".")

# A column's decision: its feature settings (`kind` first), or None to ignore
# it; and the reason in words.
Decision = tuple[dict | None, str]


def decide_column(profile: ColumnProfile) -> Decision:
    """(feature settings or None to ignore, the reason in words)."""
    if profile.present == 0:
        return None, "always empty"
    if profile.distinct == 1:
        return None, f"one value only ({next(iter(profile.counts))!r})"
    looks_unique = (
        profile.present >= IDENTIFIER_MIN_ROWS
        and profile.distinct >= IDENTIFIER_UNIQUE_SHARE * profile.present
    )
    if profile.value_type == "float":
        return {"kind": "numeric"}, "float values"
    if profile.value_type == "int":
        if looks_unique:
            return None, "a different value in (nearly) every row: an identifier"
        if profile.distinct <= MAX_INT_CATEGORIES:
            return _categorical(profile), f"{profile.distinct} integer codes"
        return {"kind": "numeric"}, "integer quantity"
    markers = number_markers(profile)
    if markers:
        marked = sum(profile.counts[m] for m in markers)
        return {"kind": "numeric", "missing_markers": markers}, (
            f"numbers, with {', '.join(markers)} for missing ({marked} cells)"
        )
    if looks_unique:
        return None, "a different string in (nearly) every row: an identifier or free text"
    if profile.distinct <= MAX_VOCABULARY:
        return _categorical(profile), f"{profile.distinct} string values"
    buckets = 2 ** math.ceil(math.log2(profile.distinct))
    return {"kind": "hashed", "buckets": min(buckets, 1 << 16)}, (
        f"{profile.distinct} string values: hashed, no vocabulary"
    )


def number_markers(profile: ColumnProfile) -> list[str]:
    """The missing-value markers of a string column that otherwise holds numbers, else []."""
    markers, numbers = [], 0
    for value in profile.counts:
        try:
            float(value)
        except ValueError:
            if value not in MISSING_MARKERS:
                return []
            markers.append(value)
        else:
            numbers += 1
    return sorted(markers) if markers and numbers >= 2 else []


def _categorical(profile: ColumnProfile) -> dict:
    # Room for values the sample has not shown yet; unseen ones go to OOV buckets.
    max_values = min(MAX_VOCABULARY, max(10, 2 * profile.distinct))
    oov_buckets = FEATURE_SETTINGS["categorical"]["oov_buckets"]
    return {"kind": "categorical", "max_values": max_values, "oov_buckets": oov_buckets}


def close_columns(decisions: Mapping[str, Decision], closed: Sequence[str], label: str) -> None:
    """Marks the `closed` columns' settings `closed: true`; only a categorical one can be."""
    for column in closed:
        settings = decisions.get(column, (None, ""))[0]
        if settings is None or settings["kind"] != "categorical":
            kind = settings["kind"] if settings else "not a feature"
            raise DraftError(
                f"--closed {column!r}: only a categorical feature's domain can be closed; "
                f"the draft makes {column!r} {kind}"
                + ("" if column in decisions or column == label else " (no such column)")
            )
        settings["closed"] = True


def drift_measure(value_type: str) -> DriftMeasure:
    """The drift measure the draft writes for a column of `value_type`."""
    return "l_infinity" if value_type == "string" else "quantile_shift"


def choose_slices(
    decisions: Mapping[str, Decision], profiles: Mapping[str, ColumnProfile]
) -> list[str]:
    """Up to MAX_SLICES string features with 2 to MAX_SLICE_VALUES values, fewest first."""
    candidates = [
        profiles[c]
        for c, (settings, _) in decisions.items()
        if settings is not None
        and profiles[c].value_type == "string"
        and 2 <= profiles[c].distinct <= MAX_SLICE_VALUES
    ]
    candidates.sort(key=lambda p: (p.distinct, p.name))
    return [p.name for p in candidates[:MAX_SLICES]]
