"""Issue 61's defects on files a new user's exporter wrote (pandas 3 and a current pyarrow,
tests/data/exports/make_exports.py): the draft, the runner's check, ExampleGen and
scoring, each on the fewest rows that show the defect.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.inputs import InputDataError, check_data_root
from schemas.draft import DraftError, draft
from tests.conftest import REPO_ROOT

EXPORTS = REPO_ROOT / "tests" / "data" / "exports"
HIVE_PATTERN = "dt={YYYY}-{MM}-{DD}/*.parquet"
LABEL = "species"


def exported(tmp_path: Path, name: str) -> Path:
    """A copy of one exported folder (the draft and the runs write nothing into it)."""
    return shutil.copytree(EXPORTS / name, tmp_path / name)


def one_line(text: str) -> str:
    assert "\n" not in text and "Traceback" not in text, text
    return text


# --- D7: an empty newest span -------------------------------------------------


def test_an_empty_newest_span_stops_the_run_naming_it(tmp_path):
    """A 0-row file with _SUCCESS in the newest partition: the window would be one span
    short. The runner's check (training, tuning, scoring, the draft) stops, naming it."""
    root = exported(tmp_path, "empty_newest")
    with pytest.raises(InputDataError) as raised:
        check_data_root(root, HIVE_PATTERN, 2)
    message = one_line(str(raised.value))
    assert "span 19724 (dt=2024-01-02) holds no rows" in message
    assert "remove the empty partition" in message
    # The older span alone reads: the check is about the span, not the layout.
    (root / "dt=2024-01-02" / "part-0.parquet").unlink()
    assert [s.span for s in check_data_root(root, HIVE_PATTERN, 2).spans] == [19723]


def test_scoring_an_empty_newest_span_says_the_same(tmp_path):
    """Scoring reads the newest span alone (spans=1): the same line, not a split's."""
    root = exported(tmp_path, "empty_newest")
    with pytest.raises(InputDataError, match=r"span 19724 \(dt=2024-01-02\) holds no rows"):
        check_data_root(root, HIVE_PATTERN, 1)


@pytest.mark.slow  # imports TFX
def test_examplegen_stops_on_an_empty_span_where_no_runner_checked(tmp_path):
    """On Kubeflow no runner's check runs before ExampleGen: its read stops on the span."""
    import apache_beam as beam

    from components.example_gen import InputPatternError, ReadExamples

    root = exported(tmp_path, "empty_newest")
    patterns = ["dt=2024-01-01/*.parquet", "dt=2024-01-02/*.parquet"]
    with pytest.raises(InputPatternError, match=r"dt=2024-01-02/\*\.parquet holds no rows"):
        _ = beam.Pipeline() | ReadExamples(str(root), patterns, {})


# --- D4: every draft refusal is one line --------------------------------------


@pytest.mark.parametrize(
    ("folder", "message"),
    [
        ("empty_newest/dt=2024-01-02", r"data root .* holds no rows: .*part-0.parquet has 0 rows"),
        ("refuse_ns_timestamp", r"column 'seen_at'.* would lose data"),
        ("refuse_uint64", r"column 'counter'.*9223372036854775808 not in range"),
        ("refuse_decimal", r"column 'account'.*out of bounds"),
    ],
)
def test_every_draft_refusal_is_one_line(tmp_path, folder, message):
    root = exported(tmp_path, folder.split("/")[0]) / "/".join(folder.split("/")[1:])
    with pytest.raises(DraftError, match=message) as raised:
        draft(root, LABEL, tmp_path / "schema")
    one_line(str(raised.value))
