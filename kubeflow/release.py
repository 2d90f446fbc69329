"""Releases a commit to Kubeflow Pipelines: a pipeline version per package, one schedule each.

    ./dev release --host https://kfp.example.com --image REPO@sha256:DIGEST
        [--build] [--tuning] [--allow-dirty] [--namespace NS] [--config kubeflow/pipeline.yaml]
    ./dev release --host URL --rollback [VERSION]
    ./dev release --host URL --status

Runs in the current-KFP-SDK environment (kubeflow/reference/), as
`kubeflow.submit` does, and connects as it does (kubeflow/kfp_api.py: the
backend's release checked, kfp's own authentication). The walk-through, the
two GitHub workflows and the KFP facts behind each rule are in
docs/from-merge-to-production.md.

A release compiles the training package, the scoring package where the
settings have `scoring_schedule:`, and with --tuning the tuning package, all
with `--image` (python -m kubeflow.compile in the project's environment), and
refuses a package with a container that runs anything else. Each package is a
new version of its own pipeline (named as the package's pipeline), named from
the commit and the digest, recording the commit, the image, the package's
sha256, the dataset directory and the frozen hyperparameters. A version of
that name already there with the same package is reused; with another package,
refused. Then each scheduled package's one schedule is pointed at the new
version: create it disabled, disable the old, enable the new, remove the old
(ORPHAN on 2.16 and later; on 2.15 it stays disabled until a later release
finds its runs ended). The release recognises its schedules by the marker it
writes in their description, never by name. The tuning package is never
scheduled (scheduled runs never tune).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubeflow import backend
from kubeflow.kfp_api import connect, package_spec, pipeline_root
from kubeflow.settings import DEFAULT_SETTINGS_FILE, KubeflowSettings, load_settings
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.schedule import Schedule
from kubeflow.step_ids import settings_step_ids

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MARKER = "kubeflow.release"
# An image pinned by digest: REPO[:TAG]@sha256:64 hex digits.
DIGEST_IMAGE = re.compile(
    r"^(?P<repo>[a-z0-9][^@\s:]*(?::\d+)?[^@\s:]*)(?::[\w][\w.-]*)?"
    r"@sha256:(?P<digest>[0-9a-f]{64})$"
)
# What KFP 2.15 and 2.16 accept as a pipeline name; they answer others with a bare 500.
PIPELINE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
# The longest version name the server stores.
VERSION_NAME_MAX = 127
# ORPHAN first came with 2.16.0 (kubeflow/pipelines 2.16.0,
# backend/src/apiserver/resource/resource_manager.go L1270, DeleteJob's propagationPolicy).
ORPHAN_FROM = (2, 16, 0)
# A run in one of these states has ended (backend/api/v2beta1/run.proto, RuntimeState).
ENDED = {"SUCCEEDED", "SKIPPED", "FAILED", "CANCELED"}
# Packages in release order; only these two are ever scheduled.
SCHEDULED = ("training", "scoring")
COMPILE_FLAGS = {"training": [], "scoring": ["--scoring"], "tuning": ["--tuning"]}
# What a release writes in the description of a pipeline it creates.
PIPELINE_DESCRIPTION = f"Released by {MARKER}: a version per commit and image"
# The tuning package's pipeline: its spec carries the training DAG's name.
TUNING_SUFFIX = "-tuning"
# The page size asked for on every list; every page is read.
PAGE_SIZE = 100


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


# --- before any call ------------------------------------------------------


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


# --- the KFP calls ---------------------------------------------------------


def every_page(list_call, key: str, **kwargs) -> list:
    """Every item of a list call, page after page (the client asks for 10 a page unless told)."""
    items: list[Any] = []
    token = ""
    while True:
        response = list_call(page_token=token, page_size=PAGE_SIZE, **kwargs)
        items += getattr(response, key) or []
        token = response.next_page_token
        if not token:
            return items


def find_pipeline(client, name: str, namespace: str | None):
    predicate = {"operation": "EQUALS", "key": "display_name", "stringValue": name}
    found = every_page(
        client._pipelines_api.pipeline_service_list_pipelines,
        "pipelines",
        filter=json.dumps({"predicates": [predicate]}),
        **({"namespace": namespace} if namespace else {}),
    )
    return found[0] if found else None


def versions(client, pipeline_id: str, newest_first: bool = False) -> list:
    """The pipeline's versions, oldest first (the server's default order) unless told."""
    return every_page(
        client.list_pipeline_versions,
        "pipeline_versions",
        pipeline_id=pipeline_id,
        sort_by="created_at desc" if newest_first else "",
    )


def record_of(item) -> dict | None:
    """What the release wrote in a version's or a schedule's description; None if not ours."""
    try:
        record = json.loads(item.description or "")
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get("released_by") == MARKER else None


def schedules(client, experiment_id: str) -> list:
    return every_page(client.list_recurring_runs, "recurring_runs", experiment_id=experiment_id)


def ours(jobs: list, pipeline_id: str) -> list:
    return [j for j in jobs if (record_of(j) or {}).get("pipeline_id") == pipeline_id]


def version_of(job) -> str | None:
    reference = job.pipeline_version_reference
    return reference.pipeline_version_id if reference else None


def runs_in_progress(client, experiment_id: str, job_id: str) -> list:
    runs = every_page(client.list_runs, "runs", experiment_id=experiment_id)
    return [r for r in runs if r.recurring_run_id == job_id and r.state not in ENDED]


def point_schedule(
    client,
    tag: str | None,
    pipeline,
    version,
    schedule: Schedule,
    experiment_id: str,
    root: str,
    out,
) -> None:
    """The package's one schedule runs `version`: create it disabled, disable the old,
    enable the new, remove the old. Safe to stop anywhere and run again."""
    pipeline_id = pipeline.pipeline_id
    found = ours(schedules(client, experiment_id), pipeline_id)
    disabled_before = {j.recurring_run_id for j in found if j.status != "ENABLED"}
    current = [j for j in found if version_of(j) == version.pipeline_version_id]
    current.sort(key=lambda j: j.status != "ENABLED")
    if current:
        new_id = current[0].recurring_run_id
    else:
        record = {
            "released_by": MARKER,
            "pipeline_id": pipeline_id,
            "version": version.display_name,
        }
        new_id = client.create_recurring_run(
            experiment_id=experiment_id,
            job_name=pipeline.display_name,
            description=json.dumps(record, sort_keys=True),
            cron_expression=schedule.cron,
            max_concurrency=schedule.max_concurrency,
            no_catchup=not schedule.catchup,
            pipeline_id=pipeline_id,
            version_id=version.pipeline_version_id,
            enabled=False,
            pipeline_root=root,
        ).recurring_run_id
        print(f"{pipeline.display_name}: schedule {new_id} created, disabled", file=out)
    old = [j for j in found if j.recurring_run_id != new_id]
    for job in old:
        if job.status == "ENABLED":
            client.disable_recurring_run(job.recurring_run_id)
            print(f"{pipeline.display_name}: schedule {job.recurring_run_id} disabled", file=out)
    if not current or current[0].status != "ENABLED":
        client.enable_recurring_run(new_id)
    print(f"{pipeline.display_name}: schedule {new_id} runs {version.display_name}", file=out)
    release = backend.parse_release(tag)
    for job in old:
        job_id = job.recurring_run_id
        if release is not None and release >= ORPHAN_FROM:
            # ORPHAN: the Workflows it started are left to finish.
            client._recurring_run_api.recurring_run_service_delete_recurring_run(
                recurring_run_id=job_id, propagation_policy="ORPHAN"
            )
            print(f"{pipeline.display_name}: schedule {job_id} deleted (ORPHAN)", file=out)
        elif job_id in disabled_before and not runs_in_progress(client, experiment_id, job_id):
            # 2.15 (or a release it cannot read): deleting would delete the runs it
            # started; it goes once disabled before this release and with no run left.
            client.delete_recurring_run(job_id)
            print(f"{pipeline.display_name}: schedule {job_id} deleted (no run left)", file=out)
        else:
            print(
                f"{pipeline.display_name}: schedule {job_id} left disabled until its runs "
                "end (no ORPHAN before KFP 2.16)",
                file=out,
            )


def ensure_pipeline(client, package: Package, namespace: str | None):
    pipeline = find_pipeline(client, package.pipeline_name, namespace)
    if pipeline is None:
        client.upload_pipeline(
            str(package.path),
            pipeline_name=package.pipeline_name,
            description=PIPELINE_DESCRIPTION,
            namespace=namespace,
        )
        pipeline = find_pipeline(client, package.pipeline_name, namespace)
    return pipeline


def ensure_version(client, pipeline, package: Package, name: str, record: dict, out):
    """The version `name` of `pipeline`: uploaded (multipart) unless there with this package."""
    for version in versions(client, pipeline.pipeline_id):
        if version.display_name == name:
            there = (record_of(version) or {}).get("package_sha256")
            if there != record["package_sha256"]:
                raise ReleaseError(
                    f"{pipeline.display_name}: version {name} exists with another package "
                    f"(sha256 {there}, this one {record['package_sha256']}); a release never "
                    "replaces a version"
                )
            print(f"{pipeline.display_name}: version {name} already released", file=out)
            return version
    version = client.upload_pipeline_version(
        str(package.path),
        pipeline_version_name=name,
        pipeline_id=pipeline.pipeline_id,
        description=json.dumps(record, sort_keys=True),
    )
    print(f"{pipeline.display_name}: version {name} uploaded", file=out)
    return version


# --- the commands ----------------------------------------------------------


def schedule_for(settings: KubeflowSettings, kind: str) -> Schedule | None:
    return settings.schedule if kind == "training" else settings.scoring_schedule


def release(client, tag, settings, packages, image, commit, dirty, root_dir, namespace, out):
    hyperparameters = hyperparameters_record(root_dir, settings)
    for package in packages:
        record = {
            "released_by": MARKER,
            "commit": commit,
            "dirty": dirty,
            "image": image,
            "package": package.kind,
            "package_sha256": package.sha256,
            "dataset_dir": settings.schema_dir,
            "hyperparameters": hyperparameters,
            "pipeline_root": pipeline_root(package.spec, None, None, package.path),
        }
        name = version_name(commit, image, dirty, record["package_sha256"])
        pipeline = ensure_pipeline(client, package, namespace)
        version = ensure_version(client, pipeline, package, name, record, out)
        schedule = schedule_for(settings, package.kind) if package.kind in SCHEDULED else None
        if schedule is None:
            print(f"{pipeline.display_name}: not scheduled (runs are started by hand)", file=out)
            continue
        experiment = client.create_experiment(schedule.experiment, namespace=namespace)
        point_schedule(
            client,
            tag,
            pipeline,
            version,
            schedule,
            experiment.experiment_id,
            record["pipeline_root"],
            out,
        )


def released_pipelines(client, namespace: str | None) -> dict[str, Any]:
    """The pipelines a release made (by the description it gives them), by the package
    kind their versions record."""
    found: dict[str, Any] = {}
    for pipeline in every_page(
        client._pipelines_api.pipeline_service_list_pipelines,
        "pipelines",
        **({"namespace": namespace} if namespace else {}),
    ):
        if pipeline.description != PIPELINE_DESCRIPTION:
            continue
        for version in versions(client, pipeline.pipeline_id):
            record = record_of(version)
            if record:
                found.setdefault(record["package"], pipeline)
    return found


def existing_experiment(client, name: str, namespace: str | None):
    """The experiment named `name`, or None: --status creates nothing."""
    try:
        return client.get_experiment(experiment_name=name, namespace=namespace)
    except ValueError:
        return None


def rollback(client, tag, settings, wanted: str | None, namespace, out) -> None:
    released = released_pipelines(client, namespace)
    scheduled = [k for k in SCHEDULED if k in released and schedule_for(settings, k)]
    if not scheduled:
        raise ReleaseError("--rollback: nothing released and scheduled here yet")
    plans = []
    for kind in scheduled:
        pipeline = released[kind]
        schedule = schedule_for(settings, kind)
        assert schedule is not None  # `scheduled` holds only the scheduled kinds.
        experiment = client.create_experiment(schedule.experiment, namespace=namespace)
        recorded = [v for v in versions(client, pipeline.pipeline_id) if record_of(v)]
        if wanted is not None:
            target = next((v for v in recorded if v.display_name == wanted), None)
            if target is None:
                names = ", ".join(v.display_name for v in recorded) or "none"
                raise ReleaseError(
                    f"--rollback: {pipeline.display_name} has no version {wanted!r} "
                    f"(released: {names})"
                )
        else:
            enabled = [
                j
                for j in ours(schedules(client, experiment.experiment_id), pipeline.pipeline_id)
                if j.status == "ENABLED"
            ]
            ids = [v.pipeline_version_id for v in recorded]
            if len(enabled) != 1 or version_of(enabled[0]) not in ids:
                raise ReleaseError(
                    f"--rollback: {pipeline.display_name} has {len(enabled)} enabled released "
                    "schedules; name the version to go back to (--status lists them)"
                )
            index = ids.index(version_of(enabled[0]))
            if index == 0:
                raise ReleaseError(
                    f"--rollback: {pipeline.display_name} runs its first release; there is "
                    "no earlier one"
                )
            target = recorded[index - 1]
        plans.append((pipeline, target, schedule, experiment.experiment_id))
    for pipeline, target, schedule, experiment_id in plans:
        root = (record_of(target) or {})["pipeline_root"]
        point_schedule(client, tag, pipeline, target, schedule, experiment_id, root, out)


def status(client, settings, namespace, out) -> None:
    released = released_pipelines(client, namespace)
    if not released:
        print("nothing released yet", file=out)
    for kind in ("training", "scoring", "tuning"):
        if kind not in released:
            continue
        pipeline = released[kind]
        print(f"{kind}: pipeline {pipeline.display_name} ({pipeline.pipeline_id})", file=out)
        names = {}
        for version in versions(client, pipeline.pipeline_id, newest_first=True):
            record = record_of(version)
            if record is None:
                continue
            names[version.pipeline_version_id] = version.display_name
            dirty = " DIRTY" if record["dirty"] else ""
            print(
                f"  version {version.display_name}: commit {record['commit']}, image "
                f"{record['image']}, {version.created_at}{dirty}",
                file=out,
            )
        schedule = schedule_for(settings, kind) if kind in SCHEDULED else None
        if schedule is None:
            print("  not scheduled", file=out)
            continue
        experiment = existing_experiment(client, schedule.experiment, namespace)
        found = schedules(client, experiment.experiment_id) if experiment else []
        jobs = [j for j in found if j.display_name == pipeline.display_name]
        mine = ours(jobs, pipeline.pipeline_id)
        enabled = [j for j in mine if j.status == "ENABLED"]
        for job in mine:
            flag = "  DUPLICATE" if len(enabled) > 1 and job in enabled else ""
            version = names.get(version_of(job), version_of(job))
            print(
                f"  schedule {job.recurring_run_id} ({job.status}) runs {version}{flag}", file=out
            )
        for job in jobs:
            if job not in mine:
                print(
                    f"  schedule {job.recurring_run_id} ({job.status}) FOREIGN: same name, "
                    "not made by a release; left alone",
                    file=out,
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Release a commit to Kubeflow Pipelines.")
    parser.add_argument("--host", required=True, help="KFP API endpoint")
    parser.add_argument("--image", help="REPO@sha256:DIGEST (with --build: the repository)")
    parser.add_argument("--build", action="store_true", help="docker buildx build --push first")
    parser.add_argument("--tuning", action="store_true", help="also release the tuning package")
    parser.add_argument("--allow-dirty", action="store_true", help="release uncommitted changes")
    parser.add_argument(
        "--rollback",
        nargs="?",
        const="",
        metavar="VERSION",
        help="schedules back to the previous release, or to VERSION",
    )
    parser.add_argument("--status", action="store_true", help="versions and schedules")
    parser.add_argument("--packages", type=Path, help="compiled packages (DIR/training.yaml...)")
    parser.add_argument("--output-dir", type=Path, default=PROJECT_ROOT / "build" / "release")
    parser.add_argument("--config", type=Path, default=DEFAULT_SETTINGS_FILE)
    parser.add_argument("--namespace", help="Kubeflow profile namespace (multi-user clusters)")
    args = parser.parse_args(argv)
    out = sys.stdout
    try:
        settings = load_settings(args.config, settings_step_ids())
        if args.status or args.rollback is not None:
            connection = connect(args.host, args.namespace)
            if connection is None:
                return 2
            client, tag = connection
            if args.status:
                status(client, settings, args.namespace, out)
            else:
                rollback(client, tag, settings, args.rollback or None, args.namespace, out)
            return 0
        if args.image is None:
            raise ReleaseError(
                "--image: required (REPO@sha256:DIGEST, or a repository with --build)"
            )
        commit, dirty = git_state(args.config.resolve().parent)
        if dirty and not args.allow_dirty:
            raise ReleaseError(
                "the working tree has uncommitted changes: a version must name the code it "
                "runs; commit them, or pass --allow-dirty (the version is marked dirty)"
            )
        image = build_image(args.image, commit) if args.build else digest_image(args.image)
        kinds = ["training"] + ["scoring"] * bool(settings.scoring_schedule)
        kinds += ["tuning"] * args.tuning
        if args.packages is not None:
            packages = read_packages(args.packages, kinds)
        else:
            packages = compile_packages(args.config, image, kinds, args.output_dir)
        for package in packages:
            check_package(package, image)
        root_dir = Path(
            subprocess.run(
                ["git", "-C", str(args.config.resolve().parent), "rev-parse", "--show-toplevel"],
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
        connection = connect(args.host, args.namespace)
        if connection is None:
            return 2
        client, tag = connection
        release(
            client, tag, settings, packages, image, commit, dirty, root_dir, args.namespace, out
        )
    except (ReleaseError, SettingsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
