"""Span directories of the real taxi data, and a schema dir that reads them.

Spans are consecutive slices of the sample in a fixed shuffled order, so two
spans are two samples of one distribution; `shifted` moves one feature's.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import yaml

from contract.dataset.spec import SPEC_FILE_NAME
from schemas import DEFAULT_SCHEMA_DIR
from tests.conftest import read_taxi_rows, write_csv

SPAN_PATTERN = "span-{SPAN}/*.csv"
# Enough rows that two samples of one distribution stay well within the
# thresholds (train split: 2/3 of them); few enough to keep each run short.
SPAN_ROWS = 1200
SHIFTED_FEATURE = "trip_miles"
DRIFT_FEATURES = {
    "trip_miles": {"jensen_shannon": 0.25},
    "fare": {"jensen_shannon": 0.25},
    "payment_type": {"l_infinity": 0.2},
    "company": {"l_infinity": 0.2},
}


def shuffled_taxi_rows() -> tuple[list[str], list[dict[str, str]]]:
    header, rows = read_taxi_rows()
    random.Random(0).shuffle(rows)
    return header, rows


def span_rows(span: int) -> list[dict[str, str]]:
    """The rows of span `span` (1-based): the span-th slice of the shuffled sample."""
    _, rows = shuffled_taxi_rows()
    return rows[(span - 1) * SPAN_ROWS : span * SPAN_ROWS]


def shifted(rows: list[dict[str, str]], column: str = SHIFTED_FEATURE) -> list[dict[str, str]]:
    """`rows` with `column` times 3 plus 2: the same trips, a different distribution."""
    return [{**r, column: str(float(r[column]) * 3 + 2) if r[column] else ""} for r in rows]


def write_span(data_root: Path, span: int, rows: list[dict[str, str]]) -> Path:
    header, _ = read_taxi_rows(limit=1)
    return write_csv(data_root / f"span-{span}" / "data.csv", header, rows)


def span_schema_dir(
    destination: Path, *, mode: str = "fail", spans: int = 1, pattern: str = SPAN_PATTERN
) -> Path:
    """The taxi schema dir, its spec reading `pattern` with a drift section in `mode`.

    Its blessing gate is one any trained model passes (accuracy >= 0.5): these
    runs are about which data is read and compared, and the first must serve a
    model whose statistics the next ones compare with.
    """
    shutil.copytree(DEFAULT_SCHEMA_DIR, destination)
    spec_file = destination / SPEC_FILE_NAME
    spec = yaml.safe_load(spec_file.read_text())
    spec["input"] = {"pattern": pattern, "spans": spans}
    spec["drift"] = {"mode": mode, "features": DRIFT_FEATURES}
    spec["evaluation"].update(naive_value=0.5, margin=0.0, max_drop=1.0)
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    return destination
