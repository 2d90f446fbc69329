"""The layering is a contract the suite checks (import-linter, configured in pyproject.toml).

Kubeflow and the local runner on top, then dataset directories (`schemas`),
the DAG (`pipeline`), `components`, `trainer`, and `contract` (what a user's
files declare and how they are read) at the bottom; nothing imports the local
runner, and no package's modules import each other in a circle. Every import is
declared (deptry), and the annotations hold (mypy).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PACKAGES = ("kubeflow", "schemas", "pipeline", "components", "trainer", "contract", "benchmarks")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
DEPTRY = Path(sys.executable).parent / "deptry"
MYPY = Path(sys.executable).parent / "mypy"


def copy_project(project: Path) -> Path:
    """The packages, the runner and pyproject.toml, copied to break on purpose.

    kubeflow/standin_harness/ and kubeflow/kfp_sdk/ are left out: the harness runs in an
    environment of its own, which kfp_sdk/ is.
    """
    for package in PACKAGES:
        shutil.copytree(
            REPO_ROOT / package,
            project / package,
            ignore=shutil.ignore_patterns(".venv", "__pycache__", "standin_harness", "kfp_sdk"),
        )
    for name in ("local_runner.py", "pyproject.toml"):
        shutil.copy(REPO_ROOT / name, project / name)
    return project


def run_checker(
    project: Path, *command: str, env: dict[str, str] | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    """One of the project's checkers, run in `project` as a user runs it."""
    return subprocess.run(
        list(command), cwd=project, env=env, capture_output=True, text=True, timeout=timeout
    )


# lint-imports with only `project` on the path for the project's packages. `kubeflow` is a
# namespace package (docs/layout.md), so Python joins every `kubeflow/` on sys.path into
# one package, this checkout's among them (the environment's editable install puts it
# there); grimp then finds a copy's module and the checkout's under one name and keeps
# either, and a break made in the copy's kubeflow/ was seen in about half the runs.
_LINT_ONLY = (
    "import sys; from importlinter.cli import lint_imports_command; "
    "checkout = sys.argv.pop(1); "
    "sys.path[:] = [p for p in sys.path if p.rstrip('/') != checkout]; "
    "sys.exit(lint_imports_command())"
)


def lint_imports(project: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(project)}
    if project.resolve() == REPO_ROOT.resolve():
        return run_checker(project, str(LINT_IMPORTS), "--no-cache", env=env)
    command = [sys.executable, "-c", _LINT_ONLY, str(REPO_ROOT), "--no-cache"]
    return run_checker(project, *command, env=env)


def test_the_project_keeps_its_import_contracts():
    proc = lint_imports(REPO_ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "10 kept, 0 broken" in proc.stdout


def test_an_upward_import_a_runner_import_a_cycle_a_heavy_light_step_or_draft_each_break_a_contract(
    tmp_path,
):
    project = copy_project(tmp_path / "project")
    (project / "trainer" / "upward.py").write_text("import pipeline.pipeline\n")
    (project / "contract" / "upward.py").write_text("import trainer.config\n")
    (project / "pipeline" / "runner_import.py").write_text("import local_runner\n")
    (project / "pipeline" / "kubeflow_import.py").write_text("import kubeflow.pipeline_steps\n")
    (project / "components" / "circle_a.py").write_text("from components import circle_b\n")
    (project / "components" / "circle_b.py").write_text("from components import circle_a\n")
    # docs/kubeflow.md, "What a step loads": the served model's reader needs
    # ExampleGen's property names, not its module; the scorer reads no evaluation.
    served = project / "components" / "serving" / "baseline" / "component.py"
    served.write_text(
        served.read_text() + "\nfrom components.example_gen.component import ExampleGen  # noqa\n"
    )
    scorer = project / "components" / "scoring" / "component.py"
    scorer.write_text(scorer.read_text() + "\nimport tensorflow_model_analysis  # noqa\n")
    # A light step's pod (kubeflow/light_step.py) would load TensorFlow at start.
    status = project / "kubeflow" / "steps" / "run_status" / "executor.py"
    status.write_text(status.read_text() + "\nimport tensorflow  # noqa\n")
    # The draft would load TFX's component package, and TFMA, to read the files.
    draft = project / "schemas" / "draft" / "statistics.py"
    draft.write_text(
        draft.read_text() + "\nfrom components.example_gen.component import ExampleGen  # noqa\n"
    )
    # The machinery reading a fork file outside trainer/fork/ (tests/test_fork_boundary.py).
    scoring = project / "components" / "scoring" / "executor.py"
    scoring.write_text(scoring.read_text() + "\nfrom trainer.model import build_model  # noqa\n")
    # docs/layout.md's rooms: serving would import a gate above it, and ExampleGen a
    # room it must not use.
    serving_dir = project / "components" / "serving" / "serving_dir.py"
    serving_dir.write_text(
        serving_dir.read_text() + "\nfrom components.gates.drift import result  # noqa\n"
    )
    spans = project / "components" / "example_gen" / "spans.py"
    spans.write_text(spans.read_text() + "\nfrom components.serving import serving_dir  # noqa\n")
    proc = lint_imports(project)
    assert proc.returncode != 0
    report = proc.stdout
    assert "0 kept, 10 broken" in report
    assert "components.serving.serving_dir -> components.gates.drift.result" in report
    assert "components.example_gen.spans -> components.serving.serving_dir" in report
    assert "components.scoring.executor -> trainer.model" in report
    assert "trainer.upward -> pipeline.pipeline" in report
    assert "contract.upward -> trainer.config" in report
    assert "pipeline.runner_import -> local_runner" in report
    assert "pipeline.kubeflow_import -> kubeflow.pipeline_steps" in report
    assert "circle_a" in report and "circle_b" in report
    assert "components.serving.baseline.component -> components.example_gen.component" in report
    assert "components.scoring.component -> tensorflow_model_analysis" in report
    assert "kubeflow.steps.run_status.executor -> tensorflow" in report
    assert "schemas.draft.statistics -> components.example_gen.component" in report


def deptry(project: Path) -> subprocess.CompletedProcess:
    return run_checker(project, str(DEPTRY), ".", env={**os.environ, "NO_COLOR": "1"})


def test_every_package_the_code_imports_is_declared():
    proc = deptry(REPO_ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def test_an_undeclared_import_is_named(tmp_path):
    project = copy_project(tmp_path / "project")
    # colorama is installed (mkdocs brings it) but not declared.
    (project / "pipeline" / "undeclared.py").write_text("import colorama\n")
    proc = deptry(project)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "pipeline/undeclared.py" in output and "'colorama'" in output


def mypy(project: Path) -> subprocess.CompletedProcess:
    """mypy as pyproject.toml configures it ([tool.mypy]: which files, what is ignored)."""
    return run_checker(project, str(MYPY), "--no-incremental", "--no-color-output", timeout=600)


@pytest.mark.slow  # mypy over the whole project, in a process of its own
def test_the_annotations_hold():
    proc = mypy(REPO_ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout


@pytest.mark.slow  # mypy over a copy of the project
def test_a_call_against_the_annotations_is_named(tmp_path):
    project = copy_project(tmp_path / "project")
    (project / "kubeflow" / "settings" / "miscall.py").write_text(
        "from kubeflow.settings.retries import duration_seconds\n\nduration_seconds(30)\n"
    )
    proc = mypy(project)
    assert proc.returncode != 0
    assert "kubeflow/settings/miscall.py:3: error" in proc.stdout
    assert '"duration_seconds" has incompatible type "int"' in proc.stdout


def imported_test_modules(source: str) -> list[str]:
    """The `tests.test_*` modules a source imports, at module level or inside a function."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "tests":
                names = [f"tests.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [name for name in names if name.startswith("tests.test_")]
    return found


def test_test_modules_import_helpers_from_the_harness_not_from_each_other():
    """Shared helpers live in tests/harness.py: no test module imports another."""
    imports = {
        path.name: imported_test_modules(path.read_text())
        for path in sorted((REPO_ROOT / "tests").glob("*.py"))
    }
    assert {name: found for name, found in imports.items() if found} == {}
    # The scanner finds such an import, at module level and inside a function.
    # (Spelled with {t}, so that a grep for such imports passes over this file.)
    source = (
        "from tests.{t}pipeline import build\n"
        "import tests.{t}run_report\n"
        "from tests import {t}kubeflow_sdk_check, harness\n"
        "def helper():\n"
        "    from tests.{t}example_gen import split_records\n"
        "from tests.harness import parse\n"
    ).format(t="test_")
    assert sorted(imported_test_modules(source)) == [
        "tests.test_example_gen",
        "tests.test_kubeflow_sdk_check",
        "tests.test_pipeline",
        "tests.test_run_report",
    ]
