"""Releases a commit to Kubeflow Pipelines: a pipeline version per package, one schedule each.

    ./dev release --host https://kfp.example.com --image REPO@sha256:DIGEST
        [--build] [--tuning] [--allow-dirty] [--namespace NS] [--config kubeflow/pipeline.yaml]
    ./dev release --host URL --rollback [VERSION]
    ./dev release --host URL --status

Runs in the current-KFP-SDK environment (kubeflow/kfp_sdk/), as
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

What it uploads, and the checkout it comes from, are made and checked before any
call (kubeflow/release_packages.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kubeflow.kfp_api import Connection, api_refusal, connect, pipeline_root
from kubeflow.release_lock import Lock, LockError, acquire
from kubeflow.release_packages import (
    PROJECT_ROOT,
    Package,
    ReleaseError,
    build_image,
    check_descends,
    check_package,
    checkout_root,
    compile_packages,
    digest_image,
    git_state,
    hyperparameters_record,
    project_name,
    read_packages,
    version_name,
)
from kubeflow.schedules import (
    MARKER,
    Target,
    all_schedules,
    every_page,
    is_project_schedule,
    ours,
    point_schedule,
    record_of,
    sweep,
    version_of,
)
from kubeflow.settings import DEFAULT_SETTINGS_FILE, KubeflowSettings, load_settings
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.schedule import Schedule
from kubeflow.step_ids import settings_step_ids
from pipeline.fingerprint import IN_CHECKOUT

# Packages in release order; only these two are ever scheduled.
SCHEDULED = ("training", "scoring")
# What a release writes in the description of a pipeline it creates.
PIPELINE_DESCRIPTION = f"Released by {MARKER}: a version per commit and image"
# How long a release waits for another one's lock before it refuses (seconds).
LOCK_WAIT = 300


def pipeline_scope(connection: Connection, settings: KubeflowSettings) -> str | None:
    """The namespace the release's pipelines live in: the profile's, or None (shared,
    and always on a single-user server)."""
    if connection.namespace and settings.kfp.pipelines == "namespaced":
        return connection.namespace
    return None


def is_released(pipeline) -> bool:
    """The one rule every lookup uses: a pipeline a release made carries its description."""
    return pipeline.description == PIPELINE_DESCRIPTION


def list_pipelines(client, scope: str | None, name: str | None = None) -> list:
    kwargs: dict[str, Any] = {"namespace": scope} if scope else {}
    if name is not None:
        predicate = {"operation": "EQUALS", "key": "display_name", "stringValue": name}
        kwargs["filter"] = json.dumps({"predicates": [predicate]})
    return every_page(client._pipelines_api.pipeline_service_list_pipelines, "pipelines", **kwargs)


def versions(client, pipeline_id: str, newest_first: bool = False) -> list:
    """The pipeline's versions, oldest first (the server's default order) unless told."""
    return every_page(
        client.list_pipeline_versions,
        "pipeline_versions",
        pipeline_id=pipeline_id,
        **({"sort_by": "created_at desc"} if newest_first else {}),
    )


def ensure_pipeline(client, package: Package, scope: str | None):
    """The released pipeline of the package's name in `scope`, uploaded if there is none."""
    name = package.pipeline_name
    found = list_pipelines(client, scope, name)
    foreign = [p for p in found if not is_released(p)]
    if foreign:
        where = f"namespace {scope}" if scope else "the shared pipelines"
        raise ReleaseError(
            f"pipeline {name!r} in {where} ({foreign[0].pipeline_id}) was not made by a "
            "release (its description is not the release's): rename or delete it, or "
            "release the dataset under another name"
        )
    if not found:
        client.upload_pipeline(
            str(package.path),
            pipeline_name=name,
            description=PIPELINE_DESCRIPTION,
            namespace=scope,
        )
        found = list_pipelines(client, scope, name)
    return found[0]


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


def schedule_for(settings: KubeflowSettings, kind: str) -> Schedule | None:
    return settings.schedule if kind == "training" else settings.scoring_schedule


def experiment_id(client, name: str, namespace: str | None) -> str:
    """The experiment `name` in the namespace, created if missing. Another release may
    create it at the same moment: the name is unique, and the loser reads the winner's."""
    try:
        return client.create_experiment(name, namespace=namespace).experiment_id
    except Exception as err:
        if getattr(err, "status", None) != 409:
            raise
        return client.get_experiment(experiment_name=name, namespace=namespace).experiment_id


def released_pipelines(client, scope: str | None) -> dict[str, Any]:
    """The pipelines a release made in `scope`, by the package kind their versions record."""
    found: dict[str, Any] = {}
    for pipeline in list_pipelines(client, scope):
        if not is_released(pipeline):
            continue
        for version in versions(client, pipeline.pipeline_id):
            record = record_of(version)
            if record:
                found.setdefault(record["package"], pipeline)
    return found


def released_commit(client, pipelines: dict[str, Any], found: list) -> str | None:
    """The commit the training package's enabled released schedule runs, if any."""
    pipeline = pipelines.get("training")
    if pipeline is None:
        return None
    enabled = [j for j in ours(found, pipeline.pipeline_id) if j.status == "ENABLED"]
    by_id = {v.pipeline_version_id: v for v in versions(client, pipeline.pipeline_id)}
    for job in enabled:
        version = by_id.get(version_of(job))
        record = record_of(version) if version is not None else None
        if record and record.get("commit"):
            return record["commit"]
    return None


def release(connection, settings, packages, image, commit, dirty, root_dir, force, wait, out):
    client, tag, namespace = connection.client, connection.tag, connection.namespace
    scope = pipeline_scope(connection, settings)
    hyperparameters = hyperparameters_record(root_dir, settings)
    project = project_name(root_dir)
    lock = acquire(client, namespace, {"commit": commit, "project": project}, wait)
    try:
        found = all_schedules(client, namespace)
        if not force:
            check_descends(
                root_dir, released_commit(client, released_pipelines(client, scope), found), commit
            )
        targets, pipeline_ids = [], set()
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
            lock.check(client)
            pipeline = ensure_pipeline(client, package, scope)
            pipeline_ids.add(pipeline.pipeline_id)
            version = ensure_version(client, pipeline, package, name, record, out)
            schedule = schedule_for(settings, package.kind) if package.kind in SCHEDULED else None
            if schedule is None:
                print(
                    f"{pipeline.display_name}: not scheduled (runs are started by hand)", file=out
                )
                continue
            experiment = experiment_id(client, schedule.experiment, namespace)
            targets.append(
                Target(pipeline, version, schedule, experiment, record["pipeline_root"], project)
            )
        point_all(client, tag, targets, pipeline_ids, project, lock, out)
    finally:
        lock.release(client)


def point_all(client, tag, targets: list[Target], pipeline_ids: set[str], project, lock: Lock, out):
    """Each target's one schedule, then the project's other schedules swept."""
    found = all_schedules(client, lock.namespace)
    keep = {point_schedule(client, tag, target, found, lock, out) for target in targets}
    sweep(
        client, tag, all_schedules(client, lock.namespace), keep, project, pipeline_ids, lock, out
    )


def rollback(connection, settings, wanted: str | None, root_dir: Path, wait, out) -> None:
    client, tag, namespace = connection.client, connection.tag, connection.namespace
    project = project_name(root_dir)
    lock = acquire(client, namespace, {"action": "rollback", "project": project}, wait)
    try:
        released = released_pipelines(client, pipeline_scope(connection, settings))
        scheduled = [k for k in SCHEDULED if k in released and schedule_for(settings, k)]
        if not scheduled:
            raise ReleaseError("--rollback: nothing released and scheduled here yet")
        found = all_schedules(client, namespace)
        targets = []
        for kind in scheduled:
            pipeline = released[kind]
            schedule = schedule_for(settings, kind)
            assert schedule is not None  # `scheduled` holds only the scheduled kinds.
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
                enabled = [j for j in ours(found, pipeline.pipeline_id) if j.status == "ENABLED"]
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
            experiment = experiment_id(client, schedule.experiment, namespace)
            root = (record_of(target) or {})["pipeline_root"]
            targets.append(Target(pipeline, target, schedule, experiment, root, project))
        pipeline_ids = {p.pipeline_id for p in released.values()}
        point_all(client, tag, targets, pipeline_ids, project, lock, out)
    finally:
        lock.release(client)


def status(connection, settings, root_dir: Path, out) -> None:
    client, namespace = connection.client, connection.namespace
    scope = pipeline_scope(connection, settings)
    mode = f"multi-user, namespace {namespace}" if connection.multi_user else "single-user"
    print(f"KFP {connection.tag or 'release unknown'} ({mode}); cron runs in "
          f"{settings.kfp.schedule_time_zone} (kfp.schedule_time_zone)", file=out)  # fmt: skip
    released = released_pipelines(client, scope)
    if not released:
        print("nothing released yet", file=out)
    found = all_schedules(client, namespace)
    experiments: dict[str, str] = {}
    project = project_name(root_dir)
    pipeline_ids = {p.pipeline_id for p in released.values()}
    shown: set[str] = set()
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
        else:
            print(f"  schedule: '{schedule.cron}' ({settings.kfp.schedule_time_zone}) in "
                  f"experiment {schedule.experiment}", file=out)  # fmt: skip
        jobs = [j for j in found if j.display_name == pipeline.display_name]
        mine = ours(found, pipeline.pipeline_id)
        enabled = [j for j in mine if j.status == "ENABLED"]
        for job in mine:
            shown.add(job.recurring_run_id)
            experiment = experiments.setdefault(job.experiment_id, _experiment_name(client, job))
            flag = "  DUPLICATE" if len(enabled) > 1 and job in enabled else ""
            if job.status == "ENABLED" and (schedule is None or experiment != schedule.experiment):
                flag += "  LEFT OVER: not scheduled here by the settings (a release disables it)"
            version = names.get(version_of(job), version_of(job))
            print(f"  schedule {job.recurring_run_id} ({job.status}) in {experiment} runs "
                  f"{version}{flag}", file=out)  # fmt: skip
        for job in jobs:
            if job not in mine:
                print(
                    f"  schedule {job.recurring_run_id} ({job.status}) FOREIGN: same name, "
                    "not made by a release; left alone",
                    file=out,
                )
    others = [
        j
        for j in found
        if j.recurring_run_id not in shown and is_project_schedule(j, project, pipeline_ids)
    ]
    for job in others:
        print(
            f"schedule {job.recurring_run_id} ({job.status}) of {job.display_name}: LEFT OVER "
            "from an earlier dataset or package (a release disables it)",
            file=out,
        )


def _experiment_name(client, job) -> str:
    try:
        return client.get_experiment(experiment_id=job.experiment_id).display_name
    except Exception:  # Deleted since: show its id.
        return job.experiment_id


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
    parser.add_argument(
        "--force",
        action="store_true",
        help="release a commit that does not descend from the released one",
    )
    parser.add_argument(
        "--lock-wait", type=float, default=LOCK_WAIT, metavar="SECONDS",
        help=f"how long to wait for another release's lock (default {LOCK_WAIT})",
    )  # fmt: skip
    parser.add_argument("--packages", type=Path, help="compiled packages (DIR/training.yaml...)")
    parser.add_argument("--output-dir", type=Path, default=PROJECT_ROOT / "build" / "release")
    parser.add_argument("--config", type=Path, default=DEFAULT_SETTINGS_FILE)
    parser.add_argument(
        "--namespace", help="the profile namespace on a multi-user KFP (default: kfp.namespace)"
    )
    args = parser.parse_args(argv)
    out = sys.stdout
    try:
        settings = load_settings(args.config, settings_step_ids())
        namespace = args.namespace or settings.kfp.namespace
        root_dir = checkout_root(args.config)
        if args.status or args.rollback is not None:
            connection = connect(args.host, namespace)
            if connection is None:
                return 2
            if args.status:
                status(connection, settings, root_dir, out)
            else:
                rollback(connection, settings, args.rollback or None, root_dir, args.lock_wait, out)
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
        if not IN_CHECKOUT and (args.build or args.packages is None):
            # Building the image and compiling (`uv run --project`) read the checkout.
            raise ReleaseError(
                "--packages: this copy is installed, not a checkout; it cannot build the image "
                "or compile: pass --image REPO@sha256:DIGEST and --packages DIR"
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
        connection = connect(args.host, namespace)
        if connection is None:
            return 2
        release(
            connection, settings, packages, image, commit, dirty, root_dir, args.force,
            args.lock_wait, out,
        )  # fmt: skip
    except (ReleaseError, SettingsError, LockError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:
        if getattr(err, "status", None) is None:
            raise
        # An answer the release did not expect (kfp_server_api.ApiException): the server's
        # words in one line. What was done before it is done; running again converges.
        print(f"error: {api_refusal(err)}; run the release again once fixed", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
