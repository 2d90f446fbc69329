"""The wheel: what it holds, compared with the tree, and an installed copy that runs.

The wheel is built offline from a copy of the checkout's files (pip, the environment's
setuptools, no index) and installed non-editable with `pip install --target`. The
installed copy runs in an environment that sees the project's dependencies but not the
checkout (the editable install's path entry is taken out), from a folder outside it:
a module missing from the wheel fails to import there instead of being found in the tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from benchmarks.step_startup import compiled_specs, executor_classes
from pipeline.fingerprint import first_party_modules
from tests.conftest import REPO_ROOT
from tests.harness import checkout_files

pytestmark = pytest.mark.slow

# Top-level folders of Python code that are not the program: they stay in the checkout.
NOT_THE_PROGRAM = ("tests", "benchmarks")
# A separate project with its own environment (the current kfp SDK), for the tests.
STANDIN_HARNESS_DIRS = ("kubeflow/standin_harness/", "kubeflow/kfp_sdk/")
PIP = (sys.executable, "-m", "pip")
# Nothing is fetched: no index, and the build uses the environment's setuptools.
OFFLINE = ("--no-index", "--quiet")
# The command lines beside the packages: a user's entrypoints, as the steps' are.
RUNNERS = ("local_runner", "score_runner", "tune_runner")


def should_ship(files: list[str]) -> set[str]:
    """The files of the tree the wheel must hold: every top-level module, and every file
    of a top-level folder of code (its modules and the files they read), except the
    tests' and benchmarks' folders, the reference project and copier's templates."""
    code_folders = {PurePosixPath(f).parts[0] for f in files if "/" in f and f.endswith(".py")}
    shipped = set()
    for name in files:
        parts = PurePosixPath(name).parts
        if len(parts) == 1:
            if name.endswith(".py"):
                shipped.add(name)
        elif parts[0] in code_folders and parts[0] not in NOT_THE_PROGRAM:
            copier_template = name.endswith(".jinja") or "{{" in name
            if not copier_template and not name.startswith(STANDIN_HARNESS_DIRS):
                shipped.add(name)
    return shipped


def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {n for n in archive.namelist() if ".dist-info/" not in n}


def top_level_names(wheel: Path) -> set[str]:
    """The top-level packages and modules the wheel installs (its top_level.txt)."""
    with zipfile.ZipFile(wheel) as archive:
        (listing,) = [n for n in archive.namelist() if n.endswith(".dist-info/top_level.txt")]
        return set(archive.read(listing).decode().split())


def build_wheel(work: Path, pyproject: str | None = None) -> Path:
    """The wheel of a copy of the checkout's files (`pyproject`: its pyproject.toml
    instead), built offline with the environment's setuptools."""
    source = work / "source"
    for name in checkout_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, source / name)
    if pyproject is not None:
        (source / "pyproject.toml").write_text(pyproject)
    out = work / "wheel"
    subprocess.run(
        [*PIP, "wheel", *OFFLINE, "--no-deps", "--no-build-isolation", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("*.whl")
    return wheel


@dataclass(frozen=True)
class Installed:
    """The wheel installed with pip --target into `site_packages`, and `python`, an
    environment that holds the project's dependencies and not the checkout."""

    wheel: Path
    site_packages: Path
    python: Path
    cwd: Path

    def run(self, *args: str, pythonpath: bool = True, timeout: int = 600):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        if pythonpath:
            env["PYTHONPATH"] = str(self.site_packages)
        return subprocess.run(
            [str(self.python), *args],
            cwd=self.cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def dependencies_only_environment(directory: Path) -> Path:
    """A virtual environment of the base interpreter whose one .pth file adds this
    environment's site-packages (their .pth files run: Google's namespace packages)
    and takes out the checkout that the editable install's .pth file puts on sys.path."""
    venv.EnvBuilder(with_pip=False).create(directory)
    (own_site,) = directory.glob("lib/python3.*/site-packages")
    (deps_site,) = (p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    checkout = str(REPO_ROOT.resolve())
    (own_site / "_project_dependencies.pth").write_text(
        f"import os, site, sys; site.addsitedir({deps_site!r}); "
        f"sys.path[:] = [p for p in sys.path if os.path.realpath(p) != {checkout!r}]\n"
    )
    return directory / "bin" / "python"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    work = tmp_path_factory.mktemp("packaging")
    assert not work.resolve().is_relative_to(REPO_ROOT.resolve())
    wheel = build_wheel(work)
    # A folder named as pip's is: the copy finds its own code inside site-packages
    # (pipeline/fingerprint.py).
    site_packages = work / "site-packages"
    subprocess.run(
        [*PIP, "install", *OFFLINE, "--no-deps", "--target", str(site_packages), str(wheel)],
        check=True,
        capture_output=True,
    )
    cwd = work / "elsewhere"
    cwd.mkdir()
    python = dependencies_only_environment(work / "env")
    return Installed(wheel, site_packages, python, cwd)


def test_the_wheel_holds_every_module_and_data_file_of_the_tree(installed):
    shipped = wheel_files(installed.wheel)
    expected = should_ship(checkout_files())
    assert sorted(expected - shipped) == []
    assert sorted(shipped - expected) == []
    # By name, so that the comparison above is not vacuous: what the hand-kept list left
    # out (kserve, tuning, two runners) and what the code reads beside itself.
    assert {
        "kubeflow/kserve/__init__.py",
        "kubeflow/tuning/__init__.py",
        "score_runner.py",
        "tune_runner.py",
        "kubeflow/pipeline.yaml",
        "schemas/chicago_taxi/schema.pbtxt",
        "schemas/chicago_taxi/dataset.yaml",
        "schemas/draft/dataset.yaml.j2",
        "components/report/report.html.j2",
    } <= shipped
    assert not any(
        n.startswith(("tests/", "benchmarks/", "data/", *STANDIN_HARNESS_DIRS)) for n in shipped
    )


def test_a_package_left_out_of_the_discovery_is_missing_from_the_comparison(tmp_path):
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    dropped = pyproject.replace(
        '    "*.__pycache__",\n', '    "*.__pycache__",\n    "kubeflow.kserve",\n'
    )
    assert dropped != pyproject
    missing = should_ship(checkout_files()) - wheel_files(build_wheel(tmp_path, dropped))
    assert missing and all(name.startswith("kubeflow/kserve/") for name in missing)


def test_the_environment_without_the_installed_copy_cannot_import_the_project(installed):
    proc = installed.run("-c", "import local_runner", pythonpath=False)
    assert proc.returncode == 1
    assert "No module named 'local_runner'" in proc.stderr


def test_the_installed_copy_runs_the_local_dag_on_the_embedded_sample(installed, tmp_path):
    output_dir = tmp_path / "out"
    proc = installed.run(
        "-m", "local_runner",
        "--data-root", str(REPO_ROOT / "data" / "chicago_taxi"),
        # The wheel's own copy of the embedded task.
        "--schema-dir", str(installed.site_packages / "schemas" / "chicago_taxi"),
        "--output-dir", str(output_dir),
        "--train-steps", "60", "--eval-steps", "5",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [p.name for p in (output_dir / "serving_model").iterdir()]  # pushed: blessed
    # The run report, from the wheel's template.
    assert (output_dir / "reports" / "latest.html").is_file()


@pytest.mark.parametrize(
    ("runner", "args", "message"),
    [
        ("local_runner", [], "the following arguments are required: --data-root, --output-dir"),
        (
            "local_runner",
            ["--data-root", "d", "--output-dir", "o", "--watch"],
            "--watch needs a checkout to watch",
        ),
        ("tune_runner", ["--data-root", "d", "--output-dir", "o"], "--schema-dir is required"),
        ("score_runner", ["--data-root", "d", "--output-dir", "o"], "required: --serving-dir"),
    ],
)
def test_an_installed_runner_asks_for_what_only_a_checkout_has(installed, runner, args, message):
    proc = installed.run("-m", runner, *args)
    assert proc.returncode == 2
    assert message in proc.stderr.strip().splitlines()[-1]


def step_entrypoints(tmp_path: Path) -> tuple[list[str], list[str]]:
    """The executor classes the compiled training, scoring and tuning packages name, and
    the modules their containers run with `python -m`."""
    specs = compiled_specs(tmp_path)
    classes = sorted({c for spec in specs.values() for c in executor_classes(spec)})
    modules = set()
    for spec in specs.values():
        for executor in spec["deploymentSpec"]["executors"].values():
            command = executor.get("container", {}).get("command", [])
            if command[:2] == ["python", "-m"]:
                modules.add(command[2])
    return classes, sorted(modules)


IMPORT_ENTRYPOINTS = """
import importlib, importlib.util, json, sys
classes, modules = json.loads(sys.argv[1])
files = {}
for path in classes:
    module, name = path.rsplit(".", 1)
    getattr(importlib.import_module(module), name)
    files[module] = sys.modules[module].__file__
for module in modules:
    files[module] = importlib.util.find_spec(module).origin
print(json.dumps(files))
"""


def test_every_step_entrypoint_imports_from_the_installed_copy(installed, tmp_path):
    classes, modules = step_entrypoints(tmp_path)
    assert "kubeflow.step_entrypoint" in modules
    assert "components.example_gen.executor.SpanResolvingExecutor" in classes
    assert any(c.startswith("kubeflow.tuning.") for c in classes)  # the tuning package's
    modules += RUNNERS
    proc = installed.run("-c", IMPORT_ENTRYPOINTS, json.dumps([classes, modules]))
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = json.loads(proc.stdout.strip().splitlines()[-1])
    own_names = top_level_names(installed.wheel)
    own = {m: f for m, f in files.items() if m.split(".")[0] in own_names}
    assert {"kubeflow.step_entrypoint", "components.example_gen.executor", *RUNNERS} <= own.keys()
    outside = {m: f for m, f in own.items() if not Path(f).is_relative_to(installed.site_packages)}
    assert outside == {}


def test_the_installed_copy_fingerprints_the_code_the_checkout_does(installed):
    """The Trainer's cache key holds the modules its run_fn imports (pipeline/fingerprint.py):
    installed in a site-packages folder, the same modules as in the checkout."""
    code = "import json; from pipeline.fingerprint import first_party_modules as f; "
    code += "print(json.dumps({m: str(p) for m, (p, _) in f('trainer.run').items()}))"
    proc = installed.run("-c", code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(found) == sorted(first_party_modules("trainer.run"))
    assert "trainer.model" in found
    assert all(Path(p).is_relative_to(installed.site_packages) for p in found.values())


def test_an_installed_release_asks_for_compiled_packages(installed, tmp_path):
    """Building the image and compiling read the checkout; an installed copy releases
    packages compiled before (--packages), from a deployment repository's settings."""
    deployment = tmp_path / "deployment"
    deployment.mkdir()
    shutil.copy(REPO_ROOT / "kubeflow" / "pipeline.yaml", deployment / "pipeline.yaml")
    git = ["git", "-C", str(deployment), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "pipeline.yaml"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "settings"], check=True)
    proc = installed.run(
        "-m", "kubeflow.release", "--host", "http://127.0.0.1:9",
        "--image", "registry.example/taxi@sha256:" + "0" * 64,
        "--config", str(deployment / "pipeline.yaml"),
    )  # fmt: skip
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines()[-1].startswith("error: --packages: this copy is installed")
    )
