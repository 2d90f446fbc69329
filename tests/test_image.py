"""The pipeline image as Docker would build it, checked without a Docker engine.

BuildKit's own parser reads the Dockerfile (the `dockerfile` package wraps
moby/buildkit's `parser.Parse`), the Docker client's own rules pick the build
context (docker-py's `exclude_paths`, which applies .dockerignore as `docker
build` does), and the COPY instructions lay that context out in a directory as
they would in the image. Then what the image's build runs, and the command of
every step in the compiled package, run against that layout with the locked
environment: a module that .dockerignore leaves out, a path the Dockerfile
still names after a rename, or a step command the image lacks fails here, as
it would fail `docker build` or a step's pod.

Not reproduced: the base images (CUDA, Beam's SDK image) and the `uv sync` of
the GPU extra, which need a registry; their versions are checked against the
lock and TensorFlow's build instead.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import dockerfile
import pytest
import tensorflow as tf
import yaml
from docker.utils.build import exclude_paths

from kubeflow.settings import PROJECT_ROOT_IN_IMAGE
from tests.conftest import REPO_ROOT

LOCK = (REPO_ROOT / "uv.lock").read_text()
# The Dockerfile's instructions, as BuildKit's parser reads them.
INSTRUCTIONS = tuple(dockerfile.parse_file(str(REPO_ROOT / "Dockerfile")))
GOLDEN_SPEC = REPO_ROOT / "tests" / "golden" / "kubeflow_pipeline.yaml"
# A first-party module the image's build imports, to leave out for the negative case.
REPORT_PLOTS = "components/report/plots.py"


def _only(cmd: str) -> dockerfile.Command:
    (found,) = [i for i in INSTRUCTIONS if i.cmd == cmd]
    return found


def _copies(*, from_image: bool) -> list[dockerfile.Command]:
    """The COPY instructions from another image (`--from=`), or from the build context."""
    return [i for i in INSTRUCTIONS if i.cmd == "COPY" and bool(i.flags) == from_image]


def _env() -> dict[str, str]:
    (env,) = [i for i in INSTRUCTIONS if i.cmd == "ENV"]
    return dict(zip(env.value[::2], env.value[1::2], strict=True))


def _locked_version(package: str) -> str:
    match = re.search(rf'name = "{re.escape(package)}"\nversion = "([^"]+)"', LOCK)
    assert match, f"{package} not in uv.lock"
    return match.group(1)


def build_context(extra_ignores: tuple[str, ...] = (), root: Path = REPO_ROOT) -> list[str]:
    """The files `docker build .` in `root` sends, as the Docker client picks them
    (`root`'s .dockerignore)."""
    patterns = [
        line.strip()
        for line in (root / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    included = exclude_paths(str(root), [*patterns, *extra_ignores])
    return sorted(p for p in included if (root / p).is_file())


def lay_out_image(root: Path, context: list[str]) -> Path:
    """The image's files under `root`, copied as the Dockerfile's COPY instructions
    (from the build context) copy them; returns where the image's WORKDIR lands."""
    workdir = Path("/")
    for instruction in INSTRUCTIONS:
        if instruction.cmd == "WORKDIR":
            workdir = workdir / instruction.value[0]
        elif instruction.cmd == "COPY" and not instruction.flags:  # from the build context
            *sources, dest = instruction.value
            target = root / (workdir / dest).relative_to("/")
            for source in sources:
                source = os.path.normpath(source)
                for relative in context:
                    if source == "." or relative == source:
                        into = relative if source == "." else os.path.basename(relative)
                    elif relative.startswith(source + "/"):
                        into = relative[len(source) + 1 :]
                    else:
                        continue
                    (target / into).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(REPO_ROOT / relative, target / into)
    return root / workdir.relative_to("/")


def _build_commands(instruction: dockerfile.Command) -> list[list[str]]:
    return [shlex.split(part) for part in instruction.value[0].split("&&")]


def run_in_image(workdir: Path, command: list[str]) -> subprocess.CompletedProcess:
    """`python -c CODE` as the image runs it in WORKDIR: the image's copy of the project
    on the path, never this checkout (which the editable install adds to sys.path)."""
    assert command[:2] == ["python", "-c"], command
    checkout = str(REPO_ROOT)
    code = (
        "import sys\n"
        f"checkout = {checkout!r}\n"
        "def ours(p):\n"
        "    inside = p == checkout or p.startswith(checkout + '/')\n"
        "    return inside and not p.startswith(sys.prefix + '/')  # .venv may sit inside\n"
        "sys.path[:] = ['', *(p for p in sys.path[1:] if not ours(p))]\n"
        f"exec(compile({command[2]!r}, '<string>', 'exec'), {{}})\n"
        "leaked = sorted(m.__file__ for m in list(sys.modules.values())\n"
        "                if ours(getattr(m, '__file__', None) or ''))\n"
        "sys.exit(f'imported from the checkout, not the image: {leaked}' if leaked else 0)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=workdir,
        env={**os.environ, "PYTHONPATH": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("image")
    return root, lay_out_image(root, build_context())


def _project_build_step() -> dockerfile.Command:
    """The RUN that installs the project and checks its imports (after `COPY . .`)."""
    runs = [i for i in INSTRUCTIONS if i.cmd == "RUN"]
    (step,) = [r for r in runs if "compileall" in r.value[0]]
    return step


@pytest.mark.slow
def test_the_images_own_build_checks_pass_on_the_files_it_copies(image):
    root, workdir = image
    assert workdir == root / PROJECT_ROOT_IN_IMAGE.lstrip("/")
    commands = [c for c in _build_commands(_project_build_step()) if c[0] == "python"]
    assert any(c[1:3] == ["-m", "compileall"] for c in commands)
    assert sum(c[1] == "-c" for c in commands) >= 2
    for command in commands:
        if command[1:3] == ["-m", "compileall"]:
            # The paths compileall is given exist in the image (a missing one fails the build).
            paths = [Path(str(p).replace(PROJECT_ROOT_IN_IMAGE, str(workdir), 1))
                     for p in command[3:] if p.startswith("/")]  # fmt: skip
            missing = [str(p) for p in paths if not p.exists()]
            assert paths and not missing, f"compileall names what the image lacks: {missing}"
            continue
        done = run_in_image(workdir, command)
        assert done.returncode == 0, f"{shlex.join(command)}:\n{done.stderr[-3000:]}"


def test_a_module_dockerignore_leaves_out_fails_the_images_import_check(tmp_path):
    """The negative case: the same check, with the report's plots left out of the context."""
    workdir = lay_out_image(tmp_path, build_context(extra_ignores=(REPORT_PLOTS,)))
    assert not (workdir / REPORT_PLOTS).exists()
    (plots_check,) = [
        c
        for c in _build_commands(_project_build_step())
        if c[-1] == "import components.report.plots"
    ]
    done = run_in_image(workdir, plots_check)
    assert done.returncode != 0
    assert "No module named 'components.report.plots'" in done.stderr


@pytest.mark.slow
def test_every_step_command_of_the_compiled_package_exists_in_the_image(image):
    _root, workdir = image
    spec = next(yaml.safe_load_all(GOLDEN_SPEC.read_text()))  # the pipeline spec, then platform
    commands = {
        tuple(executor["container"]["command"])
        for executor in spec["deploymentSpec"]["executors"].values()
    }
    assert ("python", "-m", "kubeflow.step_entrypoint") in commands
    for command in commands:
        assert command[:2] == ("python", "-m"), command
        probe = ["python", "-c", f"import importlib.util as u; assert u.find_spec({command[2]!r})"]
        done = run_in_image(workdir, probe)
        assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"


def git_ignored(paths: list[str], checkout: Path) -> list[str]:
    """Which of `paths` the checkout's .gitignore rules ignore, as git itself reads them."""
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=checkout,
        input="\n".join(paths),
        capture_output=True,
        text=True,
    )
    # 0: some path is ignored, 1: none is; anything else (128 outside a checkout)
    # is git failing, which an empty answer must not hide.
    assert done.returncode in (0, 1), f"git check-ignore failed: {done.stderr.strip()}"
    return done.stdout.split()


def test_the_build_context_holds_no_file_git_ignores():
    """A developer's caches and builds (mypy's, an egg-info) stay out of the image."""
    context = build_context()
    # A path git ignores, to show the check answers at all.
    probe = "pipeline/__pycache__/beam.cpython-310.pyc"
    assert git_ignored([*context, probe], REPO_ROOT) == [probe]
    assert "kubeflow/step_entrypoint.py" in context and "uv.lock" in context


def test_the_git_ignore_check_fails_outside_a_checkout(tmp_path):
    """The negative case: git failing is an error, not "nothing is ignored"."""
    with pytest.raises(AssertionError, match="git check-ignore failed: fatal: not a git"):
        git_ignored(["pipeline/beam.py"], tmp_path)


# Files a checkout may hold that must never reach the image: secrets, your own
# data, a run's output (the quick start's OUT/ holds the whole dataset as TFRecords).
PLANTED = (
    ".env",
    ".env.production",
    "pipeline/.env",
    "id_rsa",
    "kubeflow/id_ed25519",
    "deploy-key.pem",
    "trainer/tls.key",
    "kubeconfig",
    ".kube/config",
    "kubeflow/cluster.kubeconfig",
    ".aws/credentials",
    "components/gcp-credentials.json",
    "my_data/rides.csv",
    "schemas/chicago_taxi/sample.csv",
    "pipeline/local/export.parquet",
    "data/chicago_taxi/more.csv",
    "OUT/ExampleGen/examples/1/Split-train/data_tfrecord-00000-of-00001.gz",
    "trainer/examples.tfrecord",
    "outputs/run/metrics.json",
)


def test_the_build_context_is_an_allow_list(tmp_path):
    """Planted secrets, data and outputs are left out; the code, lock and schemas go in."""
    real = build_context()
    for relative in [*real, *PLANTED]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        if relative in real:
            shutil.copy2(REPO_ROOT / relative, tmp_path / relative)
        else:
            (tmp_path / relative).write_text("planted\n")
    context = build_context(root=tmp_path)
    assert [p for p in PLANTED if p in context] == []
    # The positive control: everything the image gets from this checkout still goes in.
    assert context == real
    needed = ["uv.lock", "pyproject.toml", "pipeline/beam.py", "kubeflow/step_entrypoint.py"]
    needed += ["schemas/chicago_taxi/schema.pbtxt", "components/report/report.html.j2"]
    assert [p for p in needed if p not in context] == []
    # The image reads its data from the run's data_root, never from the checkout.
    assert not [p for p in real if p.startswith(("data/", "tests/", "docs/"))]


def test_base_image_cuda_matches_tensorflow_build():
    (base,) = _only("FROM").value
    match = re.fullmatch(r"nvidia/cuda:(\d+\.\d+)\.\d+-base-ubuntu22\.04", base)
    assert match, base
    assert match.group(1) == tf.sysconfig.get_build_info()["cuda_version"]


def test_gpu_extra_pins_the_cudnn_tensorflow_was_built_with():
    syncs = [c for i in INSTRUCTIONS if i.cmd == "RUN" for c in _build_commands(i)]
    syncs = [c for c in syncs if c[:2] == ["uv", "sync"]]
    assert syncs and all({"--locked", "--no-dev"} <= set(c) for c in syncs)
    assert all(c[c.index("--extra") + 1] == "gpu" for c in syncs)
    cudnn_major = tf.sysconfig.get_build_info()["cudnn_version"].split(".")[0]
    assert _locked_version("nvidia-cudnn-cu12").split(".")[0] == cudnn_major
    assert _locked_version("tensorflow") == tf.__version__


def test_image_uses_the_uv_and_python_of_the_dev_environment():
    (dev_uv,) = re.findall(r'^UV_VERSION="([^"]+)"', (REPO_ROOT / "dev").read_text(), re.M)
    installs = [c for i in INSTRUCTIONS if i.cmd == "RUN" for c in _build_commands(i)]
    assert ["python3", "-m", "pip", "install", "--no-cache-dir", f"uv=={dev_uv}"] in installs
    settings = yaml.safe_load((REPO_ROOT / "kubeflow" / "pipeline.yaml").read_text())
    assert "project_root_in_image" not in settings  # the default is the image's layout
    assert _only("WORKDIR").value == (PROJECT_ROOT_IN_IMAGE,)
    # The dependency layer is built from the lock's inputs alone, so a code change
    # does not rebuild it: the first COPY brings exactly those.
    first_copy = _copies(from_image=False)[0]
    assert set(first_copy.value[:-1]) == {"pyproject.toml", "uv.lock", ".python-version"}
    assert (REPO_ROOT / ".python-version").read_text().strip() == "3.10"


def test_image_and_dev_environment_precompile_bytecode():
    # Each KFP step is a fresh container; without .pyc files every step would
    # compile TensorFlow, TFX and Beam from source before doing any work.
    assert _env()["UV_COMPILE_BYTECODE"] == "1"
    dev = (REPO_ROOT / "dev").read_text()
    assert "uv sync --locked --compile-bytecode" in dev
    assert re.search(r"^  ensure_bytecode$", dev, re.M)


def test_image_is_a_beam_sdk_harness_of_the_locked_beam_version():
    """Dataflow/Flink/Spark workers start the pipeline image through Beam's boot binary."""
    (copy,) = _copies(from_image=True)
    assert copy.flags == (f"--from=apache/beam_python3.10_sdk:{version('apache-beam')}",)
    assert copy.value == ("/opt/apache/beam", "/opt/apache/beam")
    entrypoint = _only("ENTRYPOINT")
    assert entrypoint.json and list(entrypoint.value) == ["/opt/apache/beam/boot"]


def test_image_holds_both_s3_clients():
    """TensorFlow reads s3:// through tensorflow-io, Beam through its boto3 filesystem."""
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    # tensorflow-io releases pair with TensorFlow minors: 0.37 is the one for TF 2.16.
    assert tf.__version__.startswith("2.16.")
    assert _locked_version("tensorflow-io").startswith("0.37.")
    assert re.search(r'^    "tensorflow-io==0\.37\.\d+",$', pyproject, re.M)
    assert re.search(r'^    "apache-beam\[[a-z,]*aws[a-z,]*\]==', pyproject, re.M)
    checks = [c[-1] for c in _build_commands(_project_build_step()) if c[:2] == ["python", "-c"]]
    assert any("apache_beam.io.aws.s3filesystem" in c and "pipeline.s3_plugin" in c for c in checks)
