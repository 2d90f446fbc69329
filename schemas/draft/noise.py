"""Drift noise: each feature's drift threshold, from the data's own noise.

Each feature's measure is taken between the two halves of NOISE_REPEATS random
splits of (at most NOISE_ROWS of) the rows, by the drift gate's own code; the
threshold is the largest value times NOISE_MULTIPLE, and never below the
measure's floor. Halves are smaller than the training splits a run compares,
so noisier: the margin errs against false alarms.
"""

from __future__ import annotations

import math

from contract.dataset.sections import DRIFT_MEASURE_MAXIMUM, DriftMeasure, DriftSpec, FeatureDrift
from schemas.draft.profiles import DataRead

NOISE_ROWS = 50_000
NOISE_REPEATS = 5
NOISE_MULTIPLE = 3.0
DRIFT_FLOORS = {"l_infinity": 0.03, "quantile_shift": 0.1}
# A numeric threshold lets a decile move this many of the column's smallest steps
# (a day of the week, a tenth of a mile) without alarm.
ONE_STEP_MARGIN = 1.5


def drift_thresholds(
    data: DataRead, types: dict[str, str], schema, measures: dict[str, DriftMeasure]
) -> dict[str, tuple[DriftMeasure, float, float]]:
    """Feature -> (measure, threshold, noise): the noise is the largest value the
    measure takes between two random halves of the rows (the drift gate's own code
    measures it), the threshold NOISE_MULTIPLE times that, above the measure's floor."""
    import numpy as np
    import tensorflow_data_validation as tfdv

    from components.gates.drift.executor import compare

    frame = sample_frame(data, {c: types[c] for c in measures})
    spec = DriftSpec(features={c: FeatureDrift(m, 1.0, "warn") for c, m in measures.items()})
    noise = dict.fromkeys(measures, 0.0)
    random = np.random.default_rng(0)  # The same draft from the same data.
    for _ in range(NOISE_REPEATS):
        order = random.permutation(len(frame))
        half = len(order) // 2
        first = tfdv.generate_statistics_from_dataframe(frame.iloc[order[:half]])
        second = tfdv.generate_statistics_from_dataframe(frame.iloc[order[half:]])
        for comparison in compare(first, second, schema, spec):
            if comparison.value is not None and math.isfinite(comparison.value):
                noise[comparison.feature] = max(noise[comparison.feature], comparison.value)
    thresholds = {}
    for column, measure in measures.items():
        lowest = DRIFT_FLOORS[measure]
        if measure == "quantile_shift":
            # A decile of rounded or integer values moves a whole step at a time: one
            # step is noise that 5 splits may not show, two are a shift.
            lowest = max(lowest, ONE_STEP_MARGIN * _step_share(frame[column]))
        threshold = _round_up(max(lowest, NOISE_MULTIPLE * noise[column]))
        threshold = min(DRIFT_MEASURE_MAXIMUM[measure], threshold)
        thresholds[column] = (measure, threshold, noise[column])
    return thresholds


def _step_share(values) -> float:
    """The smallest gap between two distinct values, over the 10th-to-90th percentile
    range: how far one step moves a decile in quantile_shift's units (0 if no spread)."""
    import numpy as np

    present = np.asarray(values.dropna(), dtype=float)
    if present.size < 2:
        return 0.0
    low, high = np.quantile(present, [0.1, 0.9])
    distinct = np.unique(present)
    if high <= low or distinct.size < 2:
        return 0.0
    return float(np.min(np.diff(distinct)) / (high - low))


def _round_up(value: float) -> float:
    """`value` rounded up to two significant digits (0.0291 -> 0.03, 0.4217 -> 0.43)."""
    if value <= 0:
        return 0.0
    digits = 1 - math.floor(math.log10(value))
    step = 10.0**-digits
    return round(math.ceil(round(value / step, 9)) * step, digits)


def sample_frame(data: DataRead, types: dict[str, str]):
    """The pass's sample of rows, `types`' columns as a DataFrame: numbers as floats
    (NaN where missing), strings as text (None where missing; a Parquet `""` is text)."""
    import pandas as pd

    at = {name: data.columns.index(name) for name in types}
    columns: dict[str, list] = {name: [] for name in types}
    for values in data.sample:
        for name, value_type in types.items():
            value = values[at[name]]
            if value is None or value == data.missing_cell:
                columns[name].append(None if value_type == "string" else math.nan)
            else:
                columns[name].append(value if value_type == "string" else float(value))
    return pd.DataFrame(columns)
