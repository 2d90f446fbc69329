"""Which rows of a batch of extracts fall in each slice, as TFMA slices one example.

TFMA 0.47.1 slices each unbatched example: `slicer_lib.SingleSliceSpec.
generate_slices` (slicer/slicer_lib.py L175-243) yields its slice keys, a
column's values taken from the transformed features first, then the raw ones
(slice_accessor.py L38-96). `slice_masks` slices a whole batch with numpy
instead, into one row mask per slice key, and keys each slice as
`generate_slices` does, for the batched metrics (components/evaluator/
batched_metrics.py). tests/test_batched_metrics.py holds the two to the same
slices.

Port register: docs/ports.md
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from tensorflow_model_analysis import constants
from tensorflow_model_analysis.slicer import slicer_lib

# A slice as TFMA keys it: sorted (column, value) pairs; () for the whole data.
SliceKey = tuple[tuple[str, Any], ...]


def _rows_and_values(value: Any, batch_size: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(row, value) pairs of one feature of a batch; None where the batch has no such feature."""
    if value is None:
        return None
    if hasattr(value, "indices") and hasattr(value, "values"):  # VarLen or sparse: rows first
        return np.asarray(value.indices)[:, 0], np.asarray(value.values).ravel()
    if hasattr(value, "nested_row_splits"):  # ragged: map each value up to its row
        values = np.asarray(value.values)
        width = values[0].size if values.ndim > 1 and len(values) else 1
        rows = np.repeat(np.arange(len(values)), width)
        for splits in reversed(value.nested_row_splits):
            rows = np.repeat(np.arange(len(splits) - 1), np.diff(splits))[rows]
        return rows, values.ravel()
    if not isinstance(value, np.ndarray | list):
        raise ValueError(f"feature had unsupported type: {type(value).__name__}")
    array = np.asarray(value, dtype=object) if isinstance(value, list) else value
    if array.dtype != object or array.size == 0 or np.ndim(array.flat[0]) == 0:
        per_row = array.reshape(batch_size, -1)
        return np.repeat(np.arange(batch_size), per_row.shape[1]), per_row.ravel()
    # Rows of different lengths (an object array of arrays): one row at a time.
    flat = [np.asarray(row).ravel() for row in array]
    rows = np.repeat(np.arange(len(flat)), [f.size for f in flat])
    return rows, np.concatenate(flat) if flat else np.zeros(0)


def _column(
    features_dicts: Sequence[Mapping[str, Any]],
    default: Mapping[str, Any] | None,
    column: str,
    batch_size: int,
) -> tuple[np.ndarray, np.ndarray] | None:
    """A column's (row, value) pairs: transformed features first, then raw (SliceAccessor)."""
    found = [
        pairs
        for d in features_dicts
        if (pairs := _rows_and_values(d.get(column), batch_size)) is not None
    ]
    if not found and default is not None:
        pairs = _rows_and_values(default.get(column), batch_size)
        found = [pairs] if pairs is not None else []
    if not found:
        return None
    return np.concatenate([r for r, _ in found]), np.concatenate([v for _, v in found])


def _slice_value(value: Any, column: str) -> Any:
    """A slice key's value as `generate_slices` writes it: text for bytes, Python numbers."""
    value = value.tolist() if isinstance(value, np.generic) else value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f'Found non-UTF8 feature value {value!r} in column "{column}"') from e
    return value


def _matches(values: np.ndarray, wanted: Any) -> np.ndarray:
    """Which values equal a `feature_values` entry, with `generate_slices`' str/bytes rules."""
    candidates = [wanted]
    if isinstance(wanted, str):
        candidates.append(wanted.encode())
    else:
        candidates.append(str(wanted))
    return np.array([v in candidates for v in values.tolist()], dtype=bool)


def _spec_masks(
    spec: slicer_lib.SingleSliceSpec,
    lookup: Callable[[str], tuple[np.ndarray, np.ndarray] | None],
    batch_size: int,
) -> Iterator[tuple[SliceKey, np.ndarray]]:
    """(slice key, rows mask) for each slice of `spec` present in the batch."""
    selected = np.ones(batch_size, dtype=bool)
    fixed = []
    for column, wanted in spec._value_matches:  # sorted (column, value), slicer_lib.py L130-136
        pairs = lookup(column)
        if pairs is None:
            return
        rows, values = pairs
        mask = np.zeros(batch_size, dtype=bool)
        mask[rows[_matches(values, wanted)]] = True
        selected &= mask
        fixed.append((column, wanted))
    per_column = []
    for column in sorted(spec._columns):
        pairs = lookup(column)
        if pairs is None:
            return
        rows, values = pairs
        distinct, inverse = np.unique(values, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(distinct) + 1))
        masks = []
        for i, value in enumerate(distinct):
            mask = np.zeros(batch_size, dtype=bool)
            mask[rows[order[bounds[i] : bounds[i + 1]]]] = True
            masks.append(((column, _slice_value(value, column)), mask))
        per_column.append(masks)
    for combination in itertools.product(*per_column):
        mask = selected.copy()
        for _, column_mask in combination:
            mask &= column_mask
        if mask.any():
            yield tuple(sorted(fixed + [entry for entry, _ in combination])), mask


def slice_masks(
    extracts: Mapping[str, Any],
    specs: Sequence[slicer_lib.SingleSliceSpec],
    model_names: Sequence[str],
    batch_size: int,
) -> dict[SliceKey, np.ndarray]:
    """Rows of the batch in each slice; an example in a slice twice counts once (TFMA's set)."""
    transformed = extracts.get(constants.TRANSFORMED_FEATURES_KEY)
    features_dicts: list[Mapping[str, Any]] = []
    if transformed is not None:
        if len(model_names) == 1:
            features_dicts = [transformed]
        else:
            features_dicts = [transformed[n] for n in model_names if n in transformed]
    default = extracts.get(constants.FEATURES_KEY)
    cache: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}

    def lookup(column: str) -> tuple[np.ndarray, np.ndarray] | None:
        if column not in cache:
            cache[column] = _column(features_dicts, default, column, batch_size)
        return cache[column]

    result: dict[SliceKey, np.ndarray] = {}
    for spec in specs:
        for key, mask in _spec_masks(spec, lookup, batch_size):
            result[key] = result[key] | mask if key in result else mask
    return result
