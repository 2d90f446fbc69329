"""What a release uploads, made and checked before any call to KFP.

The image pinned by digest (or built and pushed, `--build`); each package
compiled with that image in the project's own environment (or read, `--packages`)
and checked to run nothing else; the version's name, from the commit and the
digest; and the checkout the release comes from: its commit, whether its tree
differs, the project it names in the schedules it makes, and whether the commit
descends from the released one. kubeflow/release.py makes the calls.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from kubeflow.kfp_api import package_spec
from kubeflow.settings import KubeflowSettings

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# An image pinned by digest: REPO[:TAG]@sha256:64 hex digits.
DIGEST_IMAGE = re.compile(
    r"^(?P<repo>[a-z0-9][^@\s:]*(?::\d+)?[^@\s:]*)(?::[\w][\w.-]*)?"
    r"@sha256:(?P<digest>[0-9a-f]{64})$"
)
# What KFP 2.15 and 2.16 accept as a pipeline name; they answer others with a bare 500.
PIPELINE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
# The longest version name the server stores.
VERSION_NAME_MAX = 127
# Each package's flags to `python -m kubeflow.compile`.
COMPILE_FLAGS = {"training": [], "scoring": ["--scoring"], "tuning": ["--tuning"]}
# The tuning package's pipeline: its spec carries the training DAG's name.
TUNING_SUFFIX = "-tuning"


class ReleaseError(Exception):
    """A release refused: one line saying why, nothing changed by the refusal."""


@dataclass(frozen=True)
class Package:
    kind: str  # training, scoring or tuning
    path: Path
    spec: dict

    @property
    def pipeline_name(self) -> str:
        """The KFP pipeline its versions go to: the package's own name, and for the
        tuning package, which TFX names as the training DAG, that name + TUNING_SUFFIX."""
        name = self.spec["pipelineInfo"]["name"]
        if self.kind == "tuning" and not name.endswith(TUNING_SUFFIX):
            name += TUNING_SUFFIX
        return name

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def digest_image(image: str) -> str:
    """`image` if it is pinned by digest; else a one-line refusal saying how to pin it."""
    return pinned(image).string


def pinned(image: str) -> re.Match[str]:
    """`image`'s repository and digest, or the refusal."""
    match = DIGEST_IMAGE.match(image)
    if match is not None:
        return match
    raise ReleaseError(
        f"--image: {image!r} has no digest; a tag can move under a schedule. Give "
        "REPO@sha256:DIGEST: `docker buildx build --push --metadata-file build/image.json` "
        "writes it as containerimage.digest, `docker inspect --format "
        "'{{index .RepoDigests 0}}' IMAGE` shows a pushed one; or pass --build"
    )


def build_image(repository: str, commit: str) -> str:
    """`docker buildx build --push` of the project, tagged with the commit: the digest
    it pushed, as REPO@sha256:DIGEST."""
    repository = repository.split("@")[0]
    if ":" in repository.rsplit("/", 1)[-1]:
        repository = repository.rsplit(":", 1)[0]
    if shutil.which("docker") is None:
        raise ReleaseError("--build: docker is not installed; build and push, then give --image")
    with tempfile.TemporaryDirectory() as tmp:
        metadata = Path(tmp) / "metadata.json"
        command = ["docker", "buildx", "build", "--push", "--metadata-file", str(metadata)]
        command += ["--tag", f"{repository}:{commit[:12]}", str(PROJECT_ROOT)]
        if subprocess.run(command).returncode != 0:
            raise ReleaseError(f"--build: {' '.join(command)} failed")
        digest = json.loads(metadata.read_text()).get("containerimage.digest", "")
    return digest_image(f"{repository}@{digest}")


def git_state(directory: Path) -> tuple[str, bool]:
    """The commit checked out where the settings file is, and whether the tree differs."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ReleaseError(f"{directory} is not in a git checkout: a release names its commit")
        return proc.stdout.strip()

    return git("rev-parse", "HEAD"), bool(git("status", "--porcelain"))


def compile_packages(config: Path, image: str, kinds: list[str], out: Path) -> list[Package]:
    """Each package compiled with `image`, in the project's own environment (TFX)."""
    uv = PROJECT_ROOT / ".tools" / "bin" / "uv"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    packages = []
    for kind in kinds:
        path = out / f"{kind}.yaml"
        command = [str(uv) if uv.exists() else "uv", "run", "--project", str(PROJECT_ROOT)]
        command += ["--locked", "python", "-m", "kubeflow.compile", "--config", str(config)]
        command += ["--image", image, "--output", str(path), *COMPILE_FLAGS[kind]]
        if subprocess.run(command, env=env, cwd=PROJECT_ROOT).returncode != 0:
            raise ReleaseError(f"compiling the {kind} package failed (above)")
        packages.append(Package(kind, path, package_spec(path)))
    return packages


def read_packages(directory: Path, kinds: list[str]) -> list[Package]:
    """Packages compiled before (--packages DIR: DIR/training.yaml, scoring.yaml, tuning.yaml)."""
    packages = []
    for kind in kinds:
        path = directory / f"{kind}.yaml"
        if not path.exists():
            raise ReleaseError(f"--packages: {path} does not exist")
        packages.append(Package(kind, path, package_spec(path)))
    return packages


def check_package(package: Package, image: str) -> None:
    """Every container runs `image`, and nothing in the package names its repository
    otherwise (Beam's sdk_container_image, a TFJob's pods); the pipeline's name is one
    the server takes."""
    name = package.pipeline_name
    if not PIPELINE_NAME.match(name):
        raise ReleaseError(
            f"{package.path}: pipeline name {name!r} must match {PIPELINE_NAME.pattern} "
            "(KFP 2.15 and 2.16 answer another with a bare 500): rename the dataset"
        )
    executors = package.spec.get("deploymentSpec", {}).get("executors", {})
    for executor, body in executors.items():
        container_image = body.get("container", {}).get("image")
        if container_image is not None and container_image != image:
            raise ReleaseError(
                f"{package.path}: executor {executor} runs {container_image}, not {image}"
            )
    # The package's text, JSON-encoded values (a TFJob's spec, Beam's options) included.
    repository = pinned(image)["repo"]
    for found in re.findall(re.escape(repository) + r"[^\s\"',\\]*", package.path.read_text()):
        if found != image:
            raise ReleaseError(f"{package.path}: {found} is not {image}")


def version_name(commit: str, image: str, dirty: bool, package_sha: str) -> str:
    """The version's name: the commit and the digest; a dirty tree's, its package too."""
    digest = pinned(image)["digest"]
    name = f"{commit[:12]}-{digest[:12]}"
    if dirty:
        name += f"-dirty-{package_sha[:12]}"
    assert len(name) <= VERSION_NAME_MAX
    return name


def hyperparameters_record(root: Path, settings: KubeflowSettings) -> dict | None:
    """The frozen hyperparameters the package compiled in (trainer/hyperparameters.py)."""
    path = root / settings.schema_dir / "hyperparameters.yaml"
    if not path.exists():
        return None
    values = yaml.safe_load(path.read_text()) or {}
    return {
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "model": values.get("model"),
    }


def project_name(root_dir: Path) -> str:
    """What a release calls its project in the schedules it makes: the checkout's origin
    URL, else its folder's name. Schedules of another project in the namespace are never
    touched; the project's own are, whatever their dataset or experiment is called now."""
    proc = subprocess.run(
        ["git", "-C", str(root_dir), "remote", "get-url", "origin"], capture_output=True, text=True
    )
    url = proc.stdout.strip()
    if proc.returncode == 0 and url:
        return project_of_url(url)
    return root_dir.name


def project_of_url(url: str) -> str:
    """host/path of a remote, however it is spelled: https://host/path.git,
    ssh://git@host/path, git@host:path (scp-like) all name one project."""
    url = re.sub(r"^[a-z][a-z0-9+.-]*://([^@/]*@)?", "", url)
    url = re.sub(r"^[^@/:]+@([^:/]+):", r"\1/", url)
    return re.sub(r"(\.git)?/*$", "", url)


def check_descends(root_dir: Path, released: str | None, commit: str) -> None:
    """A release moves forward: `commit` descends from the released one (or is it)."""
    if released is None or released == commit:
        return
    proc = subprocess.run(
        ["git", "-C", str(root_dir), "merge-base", "--is-ancestor", released, commit],
        capture_output=True,
        text=True,
    )
    if proc.returncode == 0:
        return
    if proc.returncode == 1:
        raise ReleaseError(
            f"commit {commit[:12]} does not descend from the released {released[:12]}: "
            "an older or diverged commit would replace a newer one. Release a descendant, "
            "go back with --rollback VERSION, or pass --force"
        )
    raise ReleaseError(
        f"the released commit {released[:12]} is not in this checkout's history (a shallow "
        "clone? fetch it: git fetch --unshallow, or actions/checkout's fetch-depth: 0), so "
        "it cannot be checked that this release moves forward; or pass --force"
    )


def checkout_root(config: Path) -> Path:
    proc = subprocess.run(
        ["git", "-C", str(config.resolve().parent), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
    )
    return Path(proc.stdout.strip()) if proc.returncode == 0 else config.resolve().parent
