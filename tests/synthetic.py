"""Small CSV datasets with signal, one per task kind, for the bring-your-own-data tests.

Each has numeric and categorical columns with missing values, an integer
quantity, a row id (which the draft must ignore) and a label that depends on
the features, so a model can beat the naive one and get blessed. The
multiclass one is written like a public export (the Palmer penguins CSV):
"NA" for missing numbers, and a header with spaces and parentheses.
"""

from __future__ import annotations

import csv
from pathlib import Path

TASK_LABELS = {"binary": "churned", "multiclass": "species", "regression": "price"}
WEIGHT_COLUMNS = {"binary": "weight", "multiclass": "Body Mass (g)", "regression": "weight"}


def write_dataset(root: Path, task: str, *, rows: int = 400, seed: int = 7) -> Path:
    """Writes ROOT/data.csv for `task` ("binary", "multiclass" or "regression"); returns ROOT."""
    import numpy as np

    rng = np.random.default_rng(seed)
    size = rng.normal(0.0, 1.0, rows)
    weight = rng.normal(50.0, 10.0, rows)
    color = rng.choice(["red", "green", "blue"], rows)
    visits = rng.integers(0, 60, rows)
    noise = rng.normal(0.0, 0.3, rows)
    if task == "binary":
        score = 1.8 * size + 1.5 * (color == "red") - 0.02 * (weight - 50) + noise
        label = np.where(score > 0.5, "yes", "no")
    elif task == "multiclass":
        scores = np.stack(
            [2.0 * size, -2.0 * size, 2.5 * (color == "blue") + 0.03 * (weight - 50)], axis=1
        )
        label = np.array(["adelie", "chinstrap", "gentoo"])[np.argmax(scores + noise[:, None], 1)]
    elif task == "regression":
        label = 20.0 + 6.0 * size + 4.0 * (color == "green") + 0.1 * visits + noise
        label = np.round(label, 2)
    else:
        raise ValueError(f"unknown task {task!r}")
    # Missing values in a numeric and a categorical column, after the label is fixed.
    size_cells = [f"{v:.4f}" for v in size]
    weight_cells = [f"{v:.2f}" for v in weight]
    color_cells = list(color)
    for i in rng.choice(rows, rows // 20, replace=False):
        size_cells[i] = ""
    for i in rng.choice(rows, rows // 20, replace=False):
        color_cells[i] = ""
    if task == "multiclass":
        for i in rng.choice(rows, rows // 25, replace=False):
            weight_cells[i] = "NA"
    root.mkdir(parents=True, exist_ok=True)
    with (root / "data.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["row_id", "size", WEIGHT_COLUMNS[task], "color", "visits", TASK_LABELS[task]]
        )
        for i in range(rows):
            writer.writerow(
                [1000 + i, size_cells[i], weight_cells[i], color_cells[i], visits[i], label[i]]
            )
    return root
