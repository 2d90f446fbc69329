"""Code fingerprints: which edits change which component's cache key."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from types import SimpleNamespace

import pytest

from pipeline import fingerprint
from pipeline import steps as dag
from tests.harness import build
from trainer.preprocessing import preprocessing_fn
from trainer.run import run_fn

SOURCES = {
    "__init__.py": "",
    "feats.py": "KEYS = ('a', 'b')\n",
    "prep.py": "from fpdemo import feats\n\ndef fn(x):\n    return [x[k] for k in feats.KEYS]\n",
    "model.py": "from . import feats\nimport fpextra.layers\n\nUNITS = 8\n",
    "run.py": (
        "from fpdemo.model import UNITS\nfrom fpdemo import prep\n\ndef fn():\n    return UNITS\n"
    ),
}


# A second top-level package, as a fork adds one (say `features/`): nothing lists it.
EXTRA_SOURCES = {"__init__.py": "", "layers.py": "WIDTH = 4\n"}
# An installed package inside the project (a virtual environment there): not first-party.
INSTALLED_SOURCES = {"__init__.py": "VERSION = 1\n"}
DEMO_PACKAGES = ("fpdemo", "fpextra", "fpinstalled")


@pytest.fixture
def demo_package(tmp_path, monkeypatch):
    """First-party packages `fpdemo` and `fpextra` in a project at `tmp_path`, an installed
    one under its .venv, and a function to edit a file (`fpextra/layers.py`, ...)."""
    site_packages = tmp_path / ".venv" / "lib" / "python3.10" / "site-packages"
    for root, sources in (
        (tmp_path / "fpdemo", SOURCES),
        (tmp_path / "fpextra", EXTRA_SOURCES),
        (site_packages / "fpinstalled", INSTALLED_SOURCES),
    ):
        root.mkdir(parents=True)
        for name, text in sources.items():
            (root / name).write_text(text)
    monkeypatch.syspath_prepend(str(site_packages))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()

    def fp(module: str) -> str:
        fn = SimpleNamespace(__module__=f"fpdemo.{module}", __qualname__="fn")
        return fingerprint.code_fingerprint(fn, roots=(tmp_path,))

    def edit(name: str, text: str) -> None:
        path = tmp_path / name if "/" in name else tmp_path / "fpdemo" / name
        path.write_text(text)

    yield fp, edit
    for name in [m for m in sys.modules if m.split(".")[0] in DEMO_PACKAGES]:
        del sys.modules[name]


def test_sources_follow_first_party_imports_only(demo_package, tmp_path):
    names = set(fingerprint.first_party_modules("fpdemo.run", roots=(tmp_path,)))
    assert names == {
        "fpdemo",
        "fpdemo.run",
        "fpdemo.model",
        "fpdemo.prep",
        "fpdemo.feats",
        "fpextra",
        "fpextra.layers",
    }
    assert set(fingerprint.first_party_modules("fpdemo.prep", roots=(tmp_path,))) == {
        "fpdemo",
        "fpdemo.prep",
        "fpdemo.feats",
    }


def test_a_package_the_fork_adds_counts_without_being_listed(demo_package):
    """Editing a new top-level package that only the model imports re-keys training only."""
    fp, edit = demo_package
    before = fp("prep"), fp("run")
    edit("fpextra/layers.py", "WIDTH = 8\n")
    assert fp("prep") == before[0]
    assert fp("run") != before[1]


def test_an_environment_installed_inside_the_project_is_not_first_party(demo_package, tmp_path):
    fp, edit = demo_package
    edit("model.py", SOURCES["model.py"] + "import fpinstalled\n")
    assert "fpinstalled" not in fingerprint.first_party_modules("fpdemo.run", roots=(tmp_path,))
    before = fp("run")
    site = tmp_path / ".venv" / "lib" / "python3.10" / "site-packages" / "fpinstalled"
    (site / "__init__.py").write_text("VERSION = 2\n")
    assert fp("run") == before


def test_model_edit_changes_training_but_not_preprocessing(demo_package):
    fp, edit = demo_package
    before = fp("prep"), fp("run")
    edit("model.py", SOURCES["model.py"].replace("UNITS = 8", "UNITS = 16"))
    assert fp("prep") == before[0]
    assert fp("run") != before[1]


def test_shared_module_edit_changes_both(demo_package):
    fp, edit = demo_package
    before = fp("prep"), fp("run")
    edit("feats.py", "KEYS = ('a', 'b', 'c')\n")
    assert fp("prep") != before[0] and fp("run") != before[1]


def test_comments_and_formatting_do_not_count(demo_package):
    fp, edit = demo_package
    before = fp("run")
    edit(
        "model.py",
        "# a comment\nfrom . import feats\nimport fpextra.layers\n\n\nUNITS   =   8  # why 8\n",
    )
    assert fp("run") == before


def test_project_fingerprints_cover_the_right_modules():
    transform_code = set(fingerprint.first_party_modules(preprocessing_fn.__module__))
    trainer_code = set(fingerprint.first_party_modules(run_fn.__module__))
    # The custom hooks and the spec module are code Transform runs: editing them re-runs it.
    assert {
        "trainer.preprocessing",
        "trainer.custom",
        "contract.dataset.spec",
        "contract.fields",
    } <= transform_code
    assert "trainer.model" not in transform_code
    assert {"trainer.run", "trainer.model", "trainer.data", "trainer.export"} <= trainer_code


def test_transform_and_trainer_carry_their_fingerprints(fast_config, tmp_path):
    pipeline = build(tmp_path, fast_config)
    components = {c.id: c for c in pipeline.components}

    def custom_config(node_id: str) -> dict:
        return json.loads(components[node_id].exec_properties["custom_config"])

    key = fingerprint.CUSTOM_CONFIG_KEY
    assert custom_config(dag.TRANSFORM)[key] == fingerprint.code_fingerprint(preprocessing_fn)
    assert custom_config(dag.TRAINER)[key] == fingerprint.code_fingerprint(run_fn)
    assert custom_config(dag.TRANSFORM)[key] != custom_config(dag.TRAINER)[key]


def test_relative_import_resolution():
    tree = __import__("ast").parse(
        textwrap.dedent(
            """
            from . import a
            from .b import c
            from .. import d
            """
        )
    )
    names = fingerprint._imported_names(tree, "pkg.sub.mod", is_package=False)
    assert {"pkg.sub", "pkg.sub.a", "pkg.sub.b", "pkg.sub.b.c", "pkg", "pkg.d"} == names
