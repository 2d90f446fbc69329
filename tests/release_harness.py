"""What the release tests share: packages with a digest, a small git checkout holding the
settings file, and `kubeflow.release` run as a user runs it (a process of its own) or
many in one process (ReleaseSession), against the KFP stand-in."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE, golden_path
from tests.harness import KFP_SDK_PROJECT, uv_binary
from tests.kfp_standin import KfpStandIn

TAGGED = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())["image"]
REPOSITORY = TAGGED.rsplit(":", 1)[0]
TRAINING = "taxi-big-tipper"
SCORING = "taxi-big-tipper-scoring"


def digest(n: int) -> str:
    return f"{REPOSITORY}@sha256:{f'{n:02x}' * 32}"


def short(n: int) -> str:
    """The first 12 digits of digest(n): what a version's name carries."""
    return f"{n:02x}" * 6


def write_packages(directory: Path, image: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for kind, golden in (
        ("training", "kubeflow_pipeline.yaml"),
        ("scoring", "kubeflow_scoring_pipeline.yaml"),
    ):
        text = golden_path(golden).read_text()
        assert TAGGED in text
        (directory / f"{kind}.yaml").write_text(text.replace(TAGGED, image))
    return directory


class Checkout:
    """A git checkout holding kubeflow/pipeline.yaml; `commit()` makes a new commit."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "kubeflow").mkdir(parents=True)
        shutil.copy(TEMPLATE_SETTINGS_FILE, root / "kubeflow" / "pipeline.yaml")
        self.git("init", "-q")
        self.commit()

    def git(self, *args: str) -> str:
        command = [
            "git",
            "-C",
            str(self.root),
            "-c",
            "user.email=t@example.com",
            "-c",
            "user.name=t",
            *args,
        ]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout

    def commit(self) -> str:
        with (self.root / "changes.txt").open("a") as f:
            f.write("change\n")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "change")
        return self.git("rev-parse", "HEAD").strip()

    @property
    def config(self) -> Path:
        return self.root / "kubeflow" / "pipeline.yaml"


@pytest.fixture
def checkout(tmp_path) -> Checkout:
    return Checkout(tmp_path / "fork")


def release_arguments(
    kfp: KfpStandIn,
    checkout: Checkout,
    *args: str,
    image: str | None = None,
    packages: Path | None = None,
) -> list[str]:
    arguments = ["--host", kfp.host, "--config", str(checkout.config), *args]
    if image is not None:
        packages = packages or write_packages(checkout.root.parent / image[-8:], image)
        arguments += ["--image", image, "--packages", str(packages)]
    return arguments


def in_reference_env(*python_args: str) -> tuple[list[str], dict[str, str]]:
    """The command running `python PYTHON_ARGS` in the current-kfp environment, and its
    environment: the tests' own VIRTUAL_ENV is the project's, and uv would warn on stderr."""
    command = [uv_binary(), "run", "--project", str(KFP_SDK_PROJECT), "--locked", "python"]
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    return [*command, *python_args], env


def release(
    kfp: KfpStandIn, checkout: Checkout, *args: str, **options
) -> subprocess.CompletedProcess:
    """`python -m kubeflow.release ...` in a process of its own, as a user runs it."""
    command, env = in_reference_env("-m", "kubeflow.release")
    command += release_arguments(kfp, checkout, *args, **options)
    return subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


# Reads a release's arguments (a JSON list) a line at a time, and answers each with a line
# RESULT_MARK + JSON [exit code, stdout, stderr]: what `python -m kubeflow.release` would
# have exited with and printed (`sys.exit(main())`; an uncaught exception's traceback and 1).
SESSION = """
import contextlib, io, json, sys, traceback
from kubeflow.release import main
answers = sys.stdout
for line in sys.stdin:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(json.loads(line))
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except Exception:
            traceback.print_exc()
            code = 1
    print(MARK + json.dumps([code, out.getvalue(), err.getvalue()]), file=answers, flush=True)
"""
RESULT_MARK = "release-session: "


class ReleaseSession:
    """Releases, each `kubeflow.release.main(arguments)` as its `python -m` runs it, one after
    another in one process of the current-kfp environment: a loop of releases pays the
    interpreter's and kfp's start-up once. Each release still makes its own client and reads
    the checkout and the stand-in afresh; `release` runs the command in a process of its own."""

    def __enter__(self) -> ReleaseSession:
        command, env = in_reference_env("-c", f"MARK = {RESULT_MARK!r}\n{SESSION}")
        self.errors = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.errors, text=True,
        )  # fmt: skip
        self.answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.startswith(RESULT_MARK):
                self.answers.put(line[len(RESULT_MARK) :])
        self.answers.put(None)  # The process has ended.

    def __call__(
        self, kfp: KfpStandIn, checkout: Checkout, *args: str, **options
    ) -> subprocess.CompletedProcess:
        arguments = release_arguments(kfp, checkout, *args, **options)
        self.process.stdin.write(json.dumps(arguments) + "\n")
        self.process.stdin.flush()
        answer = self.answers.get(timeout=120)
        if answer is None:
            self.errors.seek(0)
            raise AssertionError(f"the release session ended: {self.errors.read()[-3000:]}")
        code, out, err = json.loads(answer)
        return subprocess.CompletedProcess(arguments, code, out, err)

    def __exit__(self, *exc) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.errors.close()


def released_schedules(kfp: KfpStandIn, name: str) -> list[dict]:
    return [
        job
        for job in kfp.recurring_runs.values()
        if job["display_name"] == name and "kubeflow.release" in job.get("description", "")
    ]


def enabled_schedules(kfp: KfpStandIn, name: str) -> list[dict]:
    return [j for j in released_schedules(kfp, name) if j["status"] == "ENABLED"]


def recorded_versions(kfp: KfpStandIn, name: str) -> list[dict]:
    (pipeline,) = [p for p in kfp.pipelines.values() if p["name"] == name]
    return [
        v
        for v in kfp.versions.values()
        if v["pipeline_id"] == pipeline["pipeline_id"] and v["description"].startswith("{")
    ]


def changes(kfp: KfpStandIn) -> list[str]:
    """The changing calls (experiments, the release lock's among them, aside), in order."""
    return [
        path
        for method, path, _ in kfp.requests
        if method in ("POST", "DELETE") and "/experiments" not in path
    ]
