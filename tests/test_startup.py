"""Start-up stays lean: the runner's imports avoid TFX's Google Cloud extensions.

`from tfx import v1` imports google.cloud.aiplatform (about 7 s here) for
extensions this template never uses; the project imports TFX modules directly.
"""

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT


def last_line_printed_by(code: str) -> str:
    """Runs `code` in a fresh interpreter at the repository root."""
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.slow  # imports the whole stack in a fresh process
def test_pipeline_modules_do_not_import_google_cloud_aiplatform():
    code = (
        "import sys, local_runner, pipeline.pipeline, pipeline.local.scheduler, "
        "pipeline.local.run_summary, "
        "components.gates.data_validation.component, components.serving.baseline.component, "
        "components.evaluator.executor, trainer.run; "
        "heavy = ('google.cloud.aiplatform', 'tfx.v1'); "
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))"
    )
    assert last_line_printed_by(code) == "[]"


def test_the_node_process_module_imports_nothing_heavy():
    # The runner starts its second process before its own heavy imports.
    code = (
        "import sys, pipeline.local.node_process; "
        "print(sorted(m for m in ('tensorflow', 'tfx', 'apache_beam') if m in sys.modules))"
    )
    assert last_line_printed_by(code) == "[]"


def test_dev_run_and_exec_keep_the_callers_directory(tmp_path):
    # `./dev exec python -m schemas.draft --data-root data/x ...` from anywhere:
    # relative paths are the caller's, the environment is the project's.
    code = "import os, schemas; print(os.getcwd()); print(schemas.__file__)"
    proc = subprocess.run(
        [str(REPO_ROOT / "dev"), "exec", "python", "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cwd, module = proc.stdout.strip().splitlines()[-2:]
    assert cwd == str(tmp_path)
    assert module == str(REPO_ROOT / "schemas" / "__init__.py")
