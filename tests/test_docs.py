"""The README decides and starts, the docs site explains: both checked as a reader meets them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
MAX_README_LINES = 300
# [text](target): relative targets only (the README links into docs/ and the root files).
_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def build_site(project: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=project,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_docs_site_builds_strict(tmp_path):
    proc = build_site(REPO_ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # The changelog and the contributing guide are included from the root, not copied.
    changelog = (tmp_path / "site" / "changelog" / "index.html").read_text()
    assert "Unreleased" in changelog


def test_a_broken_link_fails_the_build(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("mkdocs.yml", "CHANGELOG.md", "CONTRIBUTING.md"):
        shutil.copy(REPO_ROOT / name, project / name)
    shutil.copytree(REPO_ROOT / "docs", project / "docs")
    page = project / "docs" / "tests.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    proc = build_site(project, tmp_path / "site")
    assert proc.returncode != 0
    assert "no-such-page.md" in proc.stdout + proc.stderr


def test_the_readme_is_short_and_its_links_resolve():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"
    targets = {m.group(1) for m in _LINK.finditer(README.read_text())}
    assert targets, "the README links into the docs"
    missing = sorted(
        t for t in targets if not t.startswith("http") and not (REPO_ROOT / t).exists()
    )
    assert missing == []


def where_to_change_rows() -> list[list[str]]:
    text = README.read_text()
    section = text[text.index("## Where to change what") :]
    section = section[: section.index("\n## ", 4)]
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith(("| to change", "| ---"))
    ]


def test_where_to_change_what_names_files_that_exist():
    rows = where_to_change_rows()
    assert len(rows) >= 15
    for change, files, _ in rows:
        paths = re.findall(r"`([^`]+)`", files)
        assert paths, change
        for path in paths:
            if path.startswith("--") or path.isupper():
                continue  # a runner flag, a repository variable
            concrete = path.replace("<dataset>", "chicago_taxi")
            assert (REPO_ROOT / concrete).exists(), (change, path)


def test_every_test_the_docs_name_exists():
    """The conformance tables and pages cite tests and test modules by name (`test_x`,
    `file.py::test_x`): a renamed or deleted test must not leave a behaviour covered on
    paper only."""
    modules = list((REPO_ROOT / "tests").glob("test_*.py"))
    defined = {path.stem for path in modules} | {
        name
        for path in modules
        for name in re.findall(r"^def (test_[a-z0-9_]+)", path.read_text(), re.MULTILINE)
    }
    cited = {
        (page.relative_to(REPO_ROOT).as_posix(), name)
        for page in (REPO_ROOT / "docs").rglob("*.md")
        for name in re.findall(r"(?:`|::)(test_[a-z0-9_]+)", page.read_text())
    }
    assert len(cited) > 20  # the tables are read, not skipped
    assert sorted((page, name) for page, name in cited if name not in defined) == []


def test_the_ten_slowest_tests_modules_are_scheduled_first():
    """xdist hands out modules in LONGEST_MODULES' order (tests/conftest.py): a module
    that enters the tests page's ten slowest but not that list would start late and
    could run alone at the end, as the longest module did before the list."""
    from tests.conftest import LONGEST_MODULES

    page = (REPO_ROOT / "docs" / "tests.md").read_text()
    table = page.split("## The ten slowest", 1)[1].split("\n## ", 1)[0]
    slowest = re.findall(r"^\| \d+ \| `(test_[a-z0-9_]+)\.py", table, re.MULTILINE)
    assert len(slowest) == 10
    assert sorted({f"tests.{m}" for m in slowest} - set(LONGEST_MODULES)) == []


@pytest.mark.parametrize(
    ("markexpr", "limit"), [("not slow", 10.0), ("not slow and e2e", 10.0), ("", 20.0)]
)
def test_the_fast_tier_time_limit_is_strict_only_when_the_fast_tier_runs_alone(markexpr, limit):
    """The guard's 10 s is measured as `./dev test --fast` runs; in a whole-suite run
    the fast tests share the cores with training, and only twice that fails them."""
    import types

    from tests.conftest import fast_test_limit

    config = types.SimpleNamespace(getoption=lambda name: markexpr if name == "markexpr" else None)
    assert fast_test_limit(config) == limit


# The pages that hold measured figures (docs/benchmarks.md#load): each table of
# them with a measured column says, in its header or in the prose just before it,
# the load average it was taken at, or that it was not recorded.
FIGURE_PAGES = ("benchmarks.md", "tests.md", "where-the-time-goes.md", "scale.md")
_MEASURED_COLUMN = re.compile(
    r"\bseconds\b|\bwall\b|\bCPU s\b|\bwall s\b|examples/s|\bpeak\b|\bmedian\b", re.IGNORECASE
)
_LOAD_NAMED = re.compile(
    r"\bload (average|not recorded|of \d|before|\d)|\bloaded\b|\bload\b[^.|]*\bnot recorded\b",
    re.IGNORECASE,
)


def figure_tables(text: str) -> list[tuple[str, str]]:
    """(header row, the prose since the previous heading or table) of each table whose
    header names a measured quantity."""
    tables, prose, in_table = [], [], False
    for line in text.splitlines():
        if line.startswith("|"):
            if not in_table and _MEASURED_COLUMN.search(line):
                tables.append((line, "\n".join(prose)))
            in_table = True
            continue
        if in_table or line.startswith("#"):
            prose = []
        in_table = False
        prose.append(line)
    return tables


def test_every_figure_table_names_the_load_it_was_taken_at():
    tables = [
        (page, header, before)
        for page in FIGURE_PAGES
        for header, before in figure_tables((REPO_ROOT / "docs" / page).read_text())
    ]
    assert len(tables) >= 10  # the tables are found, not skipped
    missing = [
        f"{page}: {header[:80]}"
        for page, header, before in tables
        if not (_LOAD_NAMED.search(before) or "load" in header.lower())
    ]
    assert missing == [], "name the load average (or 'load not recorded') before: " + str(missing)
