"""ruff (configured in pyproject.toml) is part of the suite, so CI enforces it."""

import subprocess
import sys

from tests.conftest import REPO_ROOT


def test_ruff_check_and_format():
    for args in (["check", "."], ["format", "--check", "."]):
        proc = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=REPO_ROOT, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
