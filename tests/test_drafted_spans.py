"""A drafted schema survives the next day's data, and still stops a real change.

The user's path of README "Bring your own data" then "Spans, fresh data and
drift", as a user types it: spans of disjoint random rows of the taxi sample,
a schema drafted from span 1 with `--input-pattern`, then one run per day
(`--sequential`: the same steps, cache and outcome in one process; the runner's
second process would import TensorFlow and TFX once more per run).

* Day 1 (span 1) trains and pushes.
* Day 2 (span 2, the same distribution) brings company names and a payment
  type span 1 never showed, in about 1% of its rows (most of them the ones a
  random sample brings): it trains and pushes.
  (Before, the drafted closed domains stopped it at the validation gate.)
* Day 3 (span 3) has 30% of `trip_miles` multiplied by ten: the drift gate
  stops it, naming the feature (TFDV's Jensen-Shannon divergence measured
  0.089 on such a shift, as much as between two samples of unchanged data).

The domain rules themselves are checked on the drafted schema with TFDV, as
ExampleValidator applies it: a large share of new values fails an open
domain, and one new value fails a domain drafted `--closed`.
"""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from schemas import read_schema
from schemas.draft import draft
from tests.conftest import REPO_ROOT, read_taxi_rows, write_csv

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

SPAN_ROWS = 2000
PATTERN = "span-{SPAN}/*.csv"
LABEL = "tips"
SHIFTED = "trip_miles"
RUN_TIMEOUT_S = 600


def spans_of_the_sample() -> tuple[list[str], list[list[dict[str, str]]]]:
    """Three disjoint random slices of the sample: three days of one distribution."""
    header, rows = read_taxi_rows()
    random.Random(32).shuffle(rows)
    return header, [rows[i * SPAN_ROWS : (i + 1) * SPAN_ROWS] for i in range(3)]


def with_new_categories(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Three rows with a company, and one with a payment type, never seen in the sample
    (beside the companies a random span brings that span 1 did not have)."""
    changed = [dict(r) for r in rows]
    for i in (10, 20, 30):
        changed[i]["company"] = f"New Cab Company {i}"
    changed[1]["payment_type"] = "Mobile Wallet"
    return changed


def with_shift(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """30% of the rows with `trip_miles` ten times larger."""
    shifted = [dict(r) for r in rows]
    for i, row in enumerate(shifted):
        if i % 10 < 3 and row[SHIFTED]:
            row[SHIFTED] = str(float(row[SHIFTED]) * 10)
    return shifted


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


@pytest.fixture(scope="module")
def days(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drafted_spans")
    header, (first, second, third) = spans_of_the_sample()
    data_root, schema_dir, output_dir = tmp / "data", tmp / "schema", tmp / "out"
    write_csv(data_root / "span-1" / "data.csv", header, first)
    drafted = run(
        "-m", "schemas.draft", "--data-root", str(data_root), "--label", LABEL,
        "--task", "regression", "--input-pattern", PATTERN, "--output-dir", str(schema_dir),
    )  # fmt: skip
    assert drafted.returncode == 0, drafted.stderr[-3000:]

    def day(span: int, rows: list[dict[str, str]]) -> subprocess.CompletedProcess:
        write_csv(data_root / f"span-{span}" / "data.csv", header, rows)
        return run(
            "local_runner.py", "--data-root", str(data_root), "--schema-dir", str(schema_dir),
            "--output-dir", str(output_dir), "--train-steps", "100", "--sequential",
        )  # fmt: skip

    return {
        "tmp": tmp,
        "header": header,
        "first": first,
        "schema_dir": schema_dir,
        "runs": [day(1, first), day(2, with_new_categories(second)), day(3, with_shift(third))],
        "served": sorted(p.name for p in (output_dir / "serving_model").iterdir()),
    }


def test_the_first_two_days_train_and_push(days):
    for span, ran in enumerate(days["runs"][:2], start=1):
        assert ran.returncode == 0, (span, ran.stdout[-2000:] + ran.stderr[-2000:])
        assert f"Input: span {span}" in ran.stdout
        assert "Pushed model:" in ran.stdout
    assert len(days["served"]) == 2


def test_a_real_shift_on_the_third_day_is_refused_by_the_drift_gate(days):
    ran = days["runs"][2]
    assert ran.returncode == 1
    error = ran.stderr.strip().splitlines()[-1]
    assert error.startswith("error: DataDriftError: data drift against the data that trained")
    assert f"feature '{SHIFTED}': quantile_shift" in error
    assert error.count("feature '") == 1, error  # nothing else drifted
    # The data itself is valid: only the drift gate stops the run.
    assert "DataValidationGate failed too" not in ran.stdout + ran.stderr
    assert len(days["served"]) == 2  # nothing pushed on day 3


def test_the_drafted_schema_explains_its_open_domains(days):
    text = (days["schema_dir"] / "schema.pbtxt").read_text()
    assert "lets that share of values fall outside the domain" in text
    schema = read_schema(days["schema_dir"] / "schema.pbtxt")
    masses = {
        f.name: f.distribution_constraints.min_domain_mass
        for f in schema.feature
        if f.distribution_constraints.HasField("min_domain_mass")
    }
    assert set(masses) == {"company", "payment_type"}
    assert all(0.8 <= mass <= 0.99 for mass in masses.values()), masses
    assert f"#       company: at least {masses['company']:g} in the domain" in text


def validate(schema, rows: list[dict[str, str]]) -> dict[str, str]:
    """Feature -> TFDV's anomaly description for `rows` against `schema`."""
    import pandas as pd
    import tensorflow_data_validation as tfdv

    frame = pd.DataFrame({"company": [r["company"] or None for r in rows]})
    frame["payment_type"] = [r["payment_type"] or None for r in rows]
    statistics = tfdv.generate_statistics_from_dataframe(frame)
    kept = [f for f in schema.feature if f.name in frame.columns]
    schema.ClearField("feature")
    schema.feature.extend(kept)
    anomalies = tfdv.validate_statistics(statistics, schema)
    return {name: info.description for name, info in anomalies.anomaly_info.items()}


def test_a_large_share_of_new_values_still_fails_an_open_domain(days):
    rows = [dict(r) for r in days["first"]]
    assert validate(read_schema(days["schema_dir"] / "schema.pbtxt"), rows) == {}
    for i in range(0, len(rows), 4):  # a quarter of the companies renamed
        rows[i]["company"] = f"Renamed {i}"
    anomalies = validate(read_schema(days["schema_dir"] / "schema.pbtxt"), rows)
    assert list(anomalies) == ["company"]
    assert "values missing from the schema" in anomalies["company"]


def test_a_domain_drafted_closed_fails_on_one_new_value(days, tmp_path):
    write_csv(tmp_path / "data" / "span-1" / "data.csv", days["header"], days["first"])
    draft(
        tmp_path / "data",
        LABEL,
        tmp_path / "closed",
        task="regression",
        input_pattern=PATTERN,
        closed=["payment_type"],
    )
    schema = read_schema(tmp_path / "closed" / "schema.pbtxt")
    payment_type = next(f for f in schema.feature if f.name == "payment_type")
    assert not payment_type.HasField("distribution_constraints")
    spec_lines = (tmp_path / "closed" / "dataset.yaml").read_text().splitlines()
    (line,) = [x for x in spec_lines if x.startswith("  payment_type: {kind: categorical")]
    assert "closed: true" in line
    anomalies = validate(schema, with_new_categories(days["first"]))
    assert list(anomalies) == ["payment_type"]
    assert "Mobile Wallet" in anomalies["payment_type"]
