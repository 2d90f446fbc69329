"""docs/ports.md, the register of ports of upstream code, held against the code it lists.

A module that ports upstream code says so with one line in its docstring
(`MARKER`); the register has a row per such module. Both directions are
checked, and each row's upstream file, version and conformance test, so that
a version bump can start from the table. The table is read once, here; the
list of ports lives only in the page and in the markers.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

REGISTER = Path("docs") / "ports.md"
MARKER = "Port register: docs/ports.md"
# The project's own code; kubeflow/standin_harness/ runs in the current-KFP-SDK environment, and
# the stand-ins under tests/ are registered in docs/tests.md.
CODE_DIRS = ("components", "pipeline", "trainer", "contract", "kubeflow")
NOT_CODE = (Path("kubeflow") / "standin_harness",)
REGISTER_HEADING = "## The register"
COLUMNS = (
    "upstream (project, files, version)",
    "our module",
    "why it exists",
    "conformance test",
    "what lets it go",
)
_MODULE = re.compile(r"`([\w/]+\.py)`")
_TEST = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")
_UPSTREAM_FILE = re.compile(r"`[^`]*\.(?:py|go|cc|h|thrift|proto|yaml)`")
_VERSION = re.compile(r"\d+\.\d+")


@dataclass(frozen=True)
class Port:
    """One row of the register, its cells as written."""

    upstream: str
    module: str
    reason: str
    test: str
    goes: str


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def read_register(text: str) -> list[Port]:
    """The rows of the table under REGISTER_HEADING; a table of other columns, or a row of
    another width, is an error naming it."""
    lines = text.splitlines()
    if REGISTER_HEADING not in lines:
        raise ValueError(f"no {REGISTER_HEADING!r} section")
    rows = iter(lines[lines.index(REGISTER_HEADING) + 1 :])
    header = next((line for line in rows if line.startswith("|")), None)
    if header is None or tuple(_cells(header)) != COLUMNS:
        raise ValueError(f"the register's columns are {header!r}, not {COLUMNS}")
    next(rows)  # the | --- | line
    ports = []
    for line in rows:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        if len(cells) != len(COLUMNS):
            raise ValueError(f"a row of {len(cells)} cells, not {len(COLUMNS)}: {line}")
        ports.append(Port(*cells))
    return ports


def marked_modules(root: Path) -> set[str]:
    """The project's modules whose docstring carries MARKER as a line of its own."""
    marked = set()
    for top in CODE_DIRS:
        for path in sorted((root / top).rglob("*.py")):
            relative = path.relative_to(root)
            if any(relative.is_relative_to(skip) for skip in NOT_CODE):
                continue
            docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
            if MARKER in (line.strip() for line in docstring.splitlines()):
                marked.add(relative.as_posix())
    return marked


def row_module(port: Port) -> str | None:
    match = _MODULE.search(port.module)
    return match.group(1) if match else None


def row_problems(port: Port, root: Path, marked: set[str]) -> list[str]:
    """What is wrong with one row, each problem naming it."""
    module = row_module(port) or port.module
    problems = []
    if not _UPSTREAM_FILE.search(port.upstream):
        problems.append(f"{module}: the upstream cell names no file in backticks")
    if not _VERSION.search(port.upstream):
        problems.append(f"{module}: the upstream cell names no version")
    if row_module(port) is None:
        problems.append(f"{port.module!r}: no module in backticks")
    elif not (root / module).is_file():
        problems.append(f"{module}: no such module")
    elif module not in marked:
        problems.append(f"{module}: its docstring lacks the line {MARKER!r}")
    if not port.reason or not port.goes:
        problems.append(f"{module}: why it exists or what lets it go is empty")
    test = _TEST.search(port.test)
    if test is None:
        problems.append(f"{module}: the conformance test is not `tests/FILE.py::test_NAME`")
    elif not (root / test.group(1)).is_file():
        problems.append(f"{module}: no test file {test.group(1)}")
    elif not re.search(
        rf"^def {test.group(2)}\(", (root / test.group(1)).read_text(), re.MULTILINE
    ):
        problems.append(f"{module}: {test.group(1)} has no test {test.group(2)}")
    return problems


def register_problems(root: Path) -> list[str]:
    """Every row's problems, a module in two rows, and every marked module without a row."""
    ports = read_register((root / REGISTER).read_text())
    marked = marked_modules(root)
    problems = [problem for port in ports for problem in row_problems(port, root, marked)]
    modules = [row_module(port) for port in ports]
    repeated = sorted({m for m in modules if m and modules.count(m) > 1})
    problems += [f"{m}: in {modules.count(m)} rows" for m in repeated]
    unregistered = sorted(marked - set(modules))
    problems += [f"{m}: marked as a port, with no row in {REGISTER}" for m in unregistered]
    return problems


def test_the_register_and_the_ports_in_the_code_agree():
    problems = register_problems(REPO_ROOT)
    assert not problems, "\n".join(problems)
    assert read_register((REPO_ROOT / REGISTER).read_text())  # the table was read, not missed


# --- The checks themselves, on a project of one port ------------------------------------

_ROW = (
    "| TFX 1.16.0: `tfx/utils/io_utils.py` L49-56 | `components/copy.py` | TFX's copy loads "
    "TensorFlow | `tests/test_copy.py::test_copies_as_tfx_copies` | TFX's copy without "
    "TensorFlow |"
)


def _project(tmp_path: Path, row: str = _ROW, docstring: str = f"A copy.\n\n{MARKER}\n") -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / REGISTER).write_text(
        f"# Ports\n\n{REGISTER_HEADING}\n\n| {' | '.join(COLUMNS)} |\n| --- | --- | --- | --- | "
        f"--- |\n{row}\n\nAfter the table.\n"
    )
    for top in CODE_DIRS:
        (tmp_path / top).mkdir()
    (tmp_path / "components" / "copy.py").write_text(f'"""{docstring}"""\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_copy.py").write_text("def test_copies_as_tfx_copies():\n    pass\n")
    return tmp_path


def test_a_project_whose_register_matches_its_code_has_no_problem(tmp_path):
    project = _project(tmp_path)
    assert register_problems(project) == []
    assert [row_module(p) for p in read_register((project / REGISTER).read_text())] == [
        "components/copy.py"
    ]


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("`tfx/utils/io_utils.py`", "io_utils", "names no file"),
        ("TFX 1.16.0", "TFX", "names no version"),
        ("`components/copy.py`", "`components/gone.py`", "components/gone.py: no such module"),
        ("`components/copy.py`", "copy.py", "no module in backticks"),
        ("test_copies_as_tfx_copies", "test_never_written", "has no test test_never_written"),
        ("tests/test_copy.py::", "tests/test_gone.py::", "no test file tests/test_gone.py"),
        ("`tests/test_copy.py::test_copies_as_tfx_copies`", "the copy test", "is not `tests/"),
        ("TFX's copy without TensorFlow", "", "what lets it go is empty"),
    ],
)
def test_a_row_missing_what_a_bump_needs_is_named(tmp_path, old, new, problem):
    project = _project(tmp_path, row=_ROW.replace(old, new))
    problems = register_problems(project)
    assert any(problem in p for p in problems), problems


def test_a_marked_module_without_a_row_is_named(tmp_path):
    project = _project(tmp_path)
    (project / "kubeflow" / "cron.py").write_text(f'"""Cron, ported.\n\n{MARKER}\n"""\n')
    assert register_problems(project) == [
        f"kubeflow/cron.py: marked as a port, with no row in {REGISTER}"
    ]


def test_a_row_whose_module_lacks_the_marker_is_named(tmp_path):
    # The marker in a comment, or inside another line, is not the docstring's line.
    project = _project(tmp_path, docstring=f"A copy; see {MARKER}.\n")
    (project / "components" / "copy.py").write_text(
        (project / "components" / "copy.py").read_text() + f"# {MARKER}\n"
    )
    assert register_problems(project) == [
        f"components/copy.py: its docstring lacks the line {MARKER!r}"
    ]


def test_the_standin_harness_is_not_the_projects_code(tmp_path):
    project = _project(tmp_path)
    harness = project / "kubeflow" / "standin_harness"
    harness.mkdir()
    (harness / "probe.py").write_text(f'"""A probe.\n\n{MARKER}\n"""\n')
    assert register_problems(project) == []


def test_a_module_in_two_rows_is_named(tmp_path):
    project = _project(tmp_path, row=f"{_ROW}\n{_ROW}")
    assert register_problems(project) == ["components/copy.py: in 2 rows"]


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ("# Ports\n\nNo table.\n", "no '## The register' section"),
        (f"{REGISTER_HEADING}\n\n| module | test |\n| --- | --- |\n", "the register's columns"),
        (
            f"{REGISTER_HEADING}\n\n| {' | '.join(COLUMNS)} |\n| --- |\n| a | b |\n",
            "a row of 2 cells, not 5",
        ),
    ],
)
def test_a_register_that_is_not_the_table_is_refused(page, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        read_register(page)
