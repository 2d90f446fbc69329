"""The suite's profile (tests/suite_profile.py), run on a small suite of its own as
`./dev test --suite-profile DIR` runs it on the real one: under xdist, and in one process."""

from __future__ import annotations

import csv
import itertools
import os
import subprocess
import sys
from pathlib import Path

from tests import suite_profile
from tests.conftest import REPO_ROOT

# A fixture with a known set-up and teardown, a test with a known call, and a
# second module, so that two workers each run one.
SUITE = {
    "conftest.py": 'pytest_plugins = ("tests.suite_profile",)\n',
    "test_a.py": (
        "import time\n"
        "import pytest\n\n"
        "@pytest.fixture(scope='module')\n"
        "def slow_fixture():\n"
        "    time.sleep(0.5)\n"
        "    yield\n"
        "    time.sleep(0.3)\n\n"
        "def test_one(slow_fixture):\n"
        "    time.sleep(0.4)\n\n"
        "def test_two(slow_fixture):\n"
        "    pass\n"
    ),
    "test_b.py": "import time\n\ndef test_three():\n    time.sleep(0.2)\n",
    # What tests/harness.py's `execute` reports: run_compiled.py's summary of one execution.
    "test_steps.py": (
        "from tests import suite_profile\n\n"
        "def test_executes_a_package():\n"
        "    suite_profile.record_execution('first', {'seconds': 10.0, 'steps': {\n"
        "        'ExampleGen': {'status': 'SUCCESS', 'seconds': 6.0, 'startup_seconds': 4.5},\n"
        "        'Pusher': {'status': 'CACHED', 'seconds': 1.0, 'startup_seconds': None}}})\n"
    ),
    "test_off.py": (
        "def test_no_recorder_without_the_option(request):\n"
        "    assert request.config.pluginmanager.get_plugin('suite_profile_recorder') is None\n"
    ),
}


def run_suite(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    for name, text in SUITE.items():
        (project / name).write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def read_profile(directory: Path) -> list[dict[str, str]]:
    with (directory / "profile.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def only(rows: list[dict[str, str]], kind: str, name: str) -> dict[str, str]:
    [row] = [r for r in rows if r["kind"] == kind and r["name"] == name]
    return row


def test_the_profile_times_fixtures_and_phases_and_shows_each_workers_share(tmp_path):
    out = tmp_path / "profile"
    proc = run_suite(
        tmp_path,
        "-n",
        "2",
        "--dist",
        "loadscope",
        "--suite-profile",
        str(out),
        "test_a.py",
        "test_b.py",
        "test_steps.py",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"suite profile: {out / 'profile.md'}" in proc.stdout
    rows = read_profile(out)

    fixture = only(rows, "fixture", "slow_fixture")
    assert (fixture["test"], fixture["scope"]) == ("test_a.py::test_one", "module")
    assert float(fixture["seconds"]) >= 0.5
    assert float(only(rows, "call", "test_a.py::test_one")["seconds"]) >= 0.4
    # The module fixture's teardown runs after the module's last test.
    assert float(only(rows, "teardown", "test_a.py::test_two")["seconds"]) >= 0.3
    assert float(only(rows, "call", "test_b.py::test_three")["seconds"]) >= 0.2

    workers = {
        module: {r["worker"] for r in rows if r["test"].startswith(module)}
        for module in ("test_a.py", "test_b.py")
    }
    assert [len(w) for w in workers.values()] == [1, 1]
    assert workers["test_a.py"] | workers["test_b.py"] == {"gw0", "gw1"}
    for row in rows:
        assert 0 <= float(row["start_s"]) <= float(row["end_s"]), row
    # Each worker's test phases follow one another, in the order it ran them.
    for worker in ("gw0", "gw1"):
        phases = [r for r in rows if r["worker"] == worker and r["kind"] != "fixture"]
        assert phases
        for before, after in itertools.pairwise(phases):
            assert float(before["end_s"]) <= float(after["start_s"]) + 0.01, (before, after)

    page = (out / "profile.md").read_text()
    assert "load average (1 min)" in page
    workers_table = page.split("## Workers")[1].split("##")[0]
    assert {line.split("|")[1].strip() for line in workers_table.splitlines()[4:] if line} == {
        "gw0",
        "gw1",
    }
    for module in ("test_a.py", "test_b.py"):
        assert f"| {workers[module].pop()} | `{module}` |" in page
    assert "| `slow_fixture` | `test_a.py::test_one` | module |" in page

    # An executed package's steps, charged to the test that executed it, on its worker.
    with (out / "steps.csv").open(newline="") as f:
        steps = {r["step"]: r for r in csv.DictReader(f)}
    assert set(steps) == {"ExampleGen", "Pusher", suite_profile.OTHER}
    assert {r["test"] for r in steps.values()} == {"test_steps.py::test_executes_a_package"}
    assert steps["ExampleGen"]["worker"] in ("gw0", "gw1")
    assert (
        float(steps["ExampleGen"]["seconds"]),
        float(steps["ExampleGen"]["startup_seconds"]),
    ) == (6.0, 4.5)
    assert float(steps[suite_profile.OTHER]["seconds"]) == 3.0
    worker = steps["ExampleGen"]["worker"]
    # steps 2 (one cached), 10 s in all, 4.5 s starting, 3 s other
    assert f"| `test_steps.py` | first | {worker} | 2 | 1 | 10 | 4 | 3 |" in page


def test_without_xdist_the_one_process_writes_the_profile(tmp_path):
    out = tmp_path / "profile"
    # A pytest that an xdist worker's test starts inherits the worker's variable.
    proc = run_suite(
        tmp_path, "-p", "no:xdist", "--suite-profile", str(out), "test_b.py",
        PYTEST_XDIST_WORKER="gw7",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    call = only(read_profile(out), "call", "test_b.py::test_three")
    assert call["worker"] == "main"
    assert float(call["seconds"]) >= 0.2


def test_without_the_option_nothing_is_recorded_or_written(tmp_path):
    proc = run_suite(tmp_path, "-p", "no:xdist", "test_off.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "suite profile" not in proc.stdout
    assert not list(tmp_path.rglob("profile.*"))


def test_a_file_in_the_profiles_place_is_named(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("")
    proc = run_suite(tmp_path, "-p", "no:xdist", "--suite-profile", str(taken), "test_b.py")
    assert proc.returncode != 0
    assert f"--suite-profile: {taken} exists and is not a directory" in proc.stderr
