"""The fast tier's time limit: listed on every run, failing only where asked to.

A correct test must never fail on load alone (a busy machine doubles its time),
so `./dev test` lists the fast-tier tests over the limit, and only a run given
--enforce-fast-limit (benchmarks/fast_tier.py, on an idle machine) fails them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
PROBE = """
import time

def test_a_fast_tier_test_that_takes_too_long():
    time.sleep(0.6)

def test_a_quick_one():
    pass
"""


@pytest.fixture
def probe_module():
    # Inside tests/ so that tests/conftest.py applies; a name the suite never collects.
    path = TESTS_DIR / f"_limit_probe_{uuid.uuid4().hex[:8]}.py"
    path.write_text(PROBE)
    yield path
    path.unlink()


def run_probe(path: Path, *flags: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, FAST_TEST_LIMIT_S="0.3")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-o",
            f"python_files={path.name}",
            "-m",
            "not slow",
            "-q",
            str(path),
            *flags,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=TESTS_DIR.parent,
        timeout=120,
    )


def test_a_slow_fast_tier_test_is_listed_but_passes_by_default(probe_module):
    result = run_probe(probe_module)
    assert result.returncode == 0, result.stdout[-2000:]
    assert "fast-tier tests over their limit" in result.stdout
    listed = [line for line in result.stdout.splitlines() if "(limit 0.3s)" in line]
    assert len(listed) == 1 and "test_a_fast_tier_test_that_takes_too_long" in listed[0]
    assert "2 passed" in result.stdout


def test_enforce_fast_limit_fails_it_and_names_the_fix(probe_module):
    result = run_probe(probe_module, "--enforce-fast-limit")
    assert result.returncode == 1, result.stdout[-2000:]
    assert "1 failed, 1 passed" in result.stdout
    assert "mark it @pytest.mark.slow" in result.stdout
