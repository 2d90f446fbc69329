"""`kubeflow.release` through the real kfp client against the KFP stand-in on loopback.

The packages are the golden ones with their image replaced by a digest (compiling
needs TFX: the compile's own `--image` is tested in test_release_compiles_with_the_digest,
slow). Each release runs from a small git checkout holding the settings file, so
that it has a commit to name and a tree to find dirty.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time

import pytest
import yaml

from kubeflow import release_lock, schedules
from tests.conftest import TEMPLATE_SETTINGS_FILE
from tests.kfp_standin import KfpStandIn
from tests.release_harness import (
    SCORING,
    TAGGED,
    TRAINING,
    Checkout,
    ReleaseSession,
    changes,
    digest,
    enabled_schedules,
    recorded_versions,
    release,
    released_schedules,
    short,
    write_packages,
)
from tests.release_harness import checkout as checkout


def test_two_releases_of_one_commit_leave_one_version_and_one_schedule(checkout):
    with KfpStandIn() as kfp:
        first = release(kfp, checkout, image=digest(1))
        assert first.returncode == 0, first.stderr[-3000:]
        before = len(changes(kfp))
        again = release(kfp, checkout, image=digest(1))
        assert again.returncode == 0, again.stderr[-3000:]
        assert changes(kfp)[before:] == []
    commit = checkout.git("rev-parse", "HEAD").strip()
    for name in (TRAINING, SCORING):
        (version,) = recorded_versions(kfp, name)
        record = json.loads(version["description"])
        assert version["name"] == f"{commit[:12]}-{short(1)}"
        assert record["commit"] == commit and record["image"] == digest(1)
        assert record["dirty"] is False and record["dataset_dir"] == "schemas/chicago_taxi"
        assert len(record["package_sha256"]) == 64 and "hyperparameters" in record
        (job,) = released_schedules(kfp, name)
        assert job["status"] == "ENABLED"
        # Pinned to the version, never the "latest version" mode.
        assert (
            job["pipeline_version_reference"]["pipeline_version_id"]
            == (version["pipeline_version_id"])
        )
    settings = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    (job,) = released_schedules(kfp, SCORING)
    assert job["trigger"]["cron_schedule"]["cron"] == settings["scoring_schedule"]["cron"]
    # The multipart upload, never a URL for the server to fetch.
    assert "/apis/v2beta1/pipelines/upload_version" in changes(kfp)


def test_a_version_name_taken_by_another_package_is_refused(checkout, tmp_path):
    with KfpStandIn() as kfp:
        assert release(kfp, checkout, image=digest(1)).returncode == 0
        other = write_packages(tmp_path / "other", digest(1))
        text = (other / "training.yaml").read_text()
        (other / "training.yaml").write_text(text.replace("0 0 3", "0 0 4") + "# another\n")
        before = len(changes(kfp))
        proc = release(kfp, checkout, image=digest(1), packages=other)
        assert changes(kfp)[before:] == []
    assert proc.returncode == 2
    assert "exists with another package" in proc.stderr


def test_foreign_schedules_with_the_same_name_are_left_alone(checkout):
    with KfpStandIn() as kfp:
        experiment = kfp._post("/apis/v2beta1/experiments", {}, {"display_name": TRAINING})[1]
        # More than a page of them, before and after the release's own.
        foreign = [
            kfp.add_foreign_recurring_run(experiment["experiment_id"], TRAINING) for _ in range(105)
        ]
        snapshot = copy.deepcopy({j: kfp.recurring_runs[j] for j in foreign})
        assert release(kfp, checkout, image=digest(1)).returncode == 0
        foreign += [kfp.add_foreign_recurring_run(experiment["experiment_id"], TRAINING)]
        snapshot.update(copy.deepcopy({foreign[-1]: kfp.recurring_runs[foreign[-1]]}))
        checkout.commit()
        second = release(kfp, checkout, image=digest(2))
        assert second.returncode == 0, second.stderr[-3000:]
        status = release(kfp, checkout, "--status")
    assert {j: kfp.recurring_runs[j] for j in foreign} == snapshot
    assert not [p for p in changes(kfp) if any(j in p for j in foreign)]
    assert len(enabled_schedules(kfp, TRAINING)) == 1
    assert status.stdout.count("FOREIGN") == 106


@pytest.mark.parametrize("tag", ["2.15.0", "2.16.1"])
def test_a_run_in_progress_survives_a_release(checkout, tag):
    with KfpStandIn(tag_name=tag, clock=time.time()) as kfp:
        assert release(kfp, checkout, image=digest(1)).returncode == 0
        (old,) = released_schedules(kfp, TRAINING)
        run = kfp.fire(old["recurring_run_id"])
        checkout.commit()
        second = release(kfp, checkout, image=digest(2))
        assert second.returncode == 0, second.stderr[-3000:]
        # The old schedule is disabled, not deleted: its runs are recorded through it.
        assert kfp.recurring_runs[old["recurring_run_id"]]["status"] == "DISABLED"
        assert "stays disabled until" in second.stdout
        assert kfp.runs[run]["workflow_exists"]
        kfp.clock += schedules.DELETE_AFTER.total_seconds() + 1
        checkout.commit()
        third = release(kfp, checkout, image=digest(3))
        assert third.returncode == 0, third.stderr[-3000:]
        assert kfp.runs[run]["workflow_exists"]
        if tag == "2.15.0":
            # No ORPHAN before 2.16: it stays until its run has ended...
            assert old["recurring_run_id"] in kfp.recurring_runs
            kfp.finish(run)
            checkout.commit()
            assert release(kfp, checkout, image=digest(4)).returncode == 0
        else:
            kfp.finish(run)
        # ...and goes then; on 2.16 and later with ORPHAN, its Workflows left to finish.
        assert old["recurring_run_id"] not in kfp.recurring_runs
        assert kfp.most_enabled[TRAINING] == 1
    deletes = [q for m, p, q in kfp.requests if m == "DELETE" and "/recurringruns/" in p]
    if tag != "2.15.0":
        assert deletes and all(q.get("propagation_policy") == "ORPHAN" for q in deletes)
    assert len(enabled_schedules(kfp, TRAINING)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["2.15.0", "2.16.1"])
def test_a_release_stopped_after_each_step_converges_when_run_again(checkout, tag):
    with KfpStandIn(tag_name=tag) as kfp:
        assert release(kfp, checkout, image=digest(1)).returncode == 0
        start = kfp.changes
        checkout.commit()
        assert release(kfp, checkout, image=digest(2)).returncode == 0
        steps = kfp.changes - start
    assert steps >= 6
    with ReleaseSession() as session:
        for stop in range(steps):
            with KfpStandIn(tag_name=tag) as kfp:
                stopped_after(session, kfp, checkout, stop)


def stopped_after(session: ReleaseSession, kfp: KfpStandIn, checkout: Checkout, stop: int):
    """A release of digest(1), then one of digest(2) stopped after `stop` changes, then the
    same release run again: each stage leaves at most one schedule enabled, the last one."""
    assert session(kfp, checkout, image=digest(1)).returncode == 0
    kfp.fail_from = kfp.changes + stop
    stopped = session(kfp, checkout, image=digest(2))
    assert stopped.returncode != 0
    for name in (TRAINING, SCORING):
        enabled = [j for j in released_schedules(kfp, name) if j["status"] == "ENABLED"]
        assert len(enabled) <= 1, (stop, name)
    kfp.fail_from = None
    # The stopped release may have left its lock: the rerun takes it over once expired.
    kfp.clock = time.time() + release_lock.LOCK_TTL + 1
    rerun = session(kfp, checkout, image=digest(2))
    assert rerun.returncode == 0, (stop, rerun.stderr[-3000:])
    for name in (TRAINING, SCORING):
        assert kfp.most_enabled[name] == 1
        versions = recorded_versions(kfp, name)
        assert [v["name"][13:] for v in versions] == [short(1), short(2)]
        enabled = [j for j in released_schedules(kfp, name) if j["status"] == "ENABLED"]
        assert len(enabled) == 1
        assert (
            enabled[0]["pipeline_version_reference"]["pipeline_version_id"]
            == (versions[-1]["pipeline_version_id"])
        )


@pytest.mark.slow  # Five releases, each a fresh process that imports kfp.
def test_rollback_points_the_schedule_back_without_an_upload(checkout):
    with KfpStandIn() as kfp:
        assert release(kfp, checkout, image=digest(1)).returncode == 0
        checkout.commit()
        assert release(kfp, checkout, image=digest(2)).returncode == 0
        first, second = recorded_versions(kfp, TRAINING)
        uploads = len(kfp.posted("/apis/v2beta1/pipelines/upload_version"))
        back = release(kfp, checkout, "--rollback")
        assert back.returncode == 0, back.stderr[-3000:]
        (job,) = enabled_schedules(kfp, TRAINING)
        assert (
            job["pipeline_version_reference"]["pipeline_version_id"]
            == (first["pipeline_version_id"])
        )
        forward = release(kfp, checkout, "--rollback", second["name"])
        assert forward.returncode == 0, forward.stderr[-3000:]
        (job,) = enabled_schedules(kfp, TRAINING)
        assert (
            job["pipeline_version_reference"]["pipeline_version_id"]
            == (second["pipeline_version_id"])
        )
        missing = release(kfp, checkout, "--rollback", "no-such-version")
        assert len(kfp.posted("/apis/v2beta1/pipelines/upload_version")) == uploads
        assert len(kfp.versions) == 6  # Two pipelines' first versions and two releases each.
    assert missing.returncode == 2 and "has no version 'no-such-version'" in missing.stderr
    assert kfp.most_enabled[TRAINING] == 1


def test_status_lists_versions_newest_first_and_the_schedule(checkout):
    with KfpStandIn() as kfp:
        assert release(kfp, checkout, image=digest(1)).returncode == 0
        checkout.commit()
        assert release(kfp, checkout, image=digest(2)).returncode == 0
        (job,) = enabled_schedules(kfp, TRAINING)
        proc = release(kfp, checkout, "--status")
    assert proc.returncode == 0, proc.stderr[-3000:]
    training = proc.stdout.split("scoring:")[0]
    assert training.index(short(2)) < training.index(short(1))
    assert f"schedule {job['recurring_run_id']} (ENABLED) in {TRAINING} runs " in training
    assert digest(2) in training and "DUPLICATE" not in proc.stdout


def test_a_tag_a_dirty_tree_and_a_bad_name_are_refused_with_nothing_uploaded(checkout, tmp_path):
    bad = write_packages(tmp_path / "bad", digest(1))
    spec, platform = yaml.safe_load_all((bad / "training.yaml").read_text())
    spec["pipelineInfo"]["name"] = "Taxi_Big_Tipper"
    (bad / "training.yaml").write_text(yaml.safe_dump_all([spec, platform]))
    with KfpStandIn() as kfp:
        good = write_packages(tmp_path / "good", digest(1))
        tag = release(kfp, checkout, "--image", TAGGED, "--packages", str(good))
        named = release(kfp, checkout, image=digest(1), packages=bad)
        (checkout.root / "changes.txt").write_text("uncommitted\n")
        dirty = release(kfp, checkout, image=digest(1))
        assert kfp.requests == []
        allowed = release(kfp, checkout, "--allow-dirty", image=digest(1))
        assert allowed.returncode == 0, allowed.stderr[-3000:]
    assert tag.returncode == 2 and "has no digest" in tag.stderr
    assert "docker buildx build --push --metadata-file" in tag.stderr
    assert named.returncode == 2 and "'Taxi_Big_Tipper' must match" in named.stderr
    assert dirty.returncode == 2 and "uncommitted changes" in dirty.stderr
    for proc in (tag, named, dirty):
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    (version,) = recorded_versions(kfp, TRAINING)
    assert json.loads(version["description"])["dirty"] is True
    assert "-dirty-" in version["name"]


def test_a_container_that_runs_another_image_is_refused(checkout, tmp_path):
    packages = write_packages(tmp_path / "mixed", digest(1))
    spec, platform = yaml.safe_load_all((packages / "scoring.yaml").read_text())
    executor = sorted(spec["deploymentSpec"]["executors"])[0]
    spec["deploymentSpec"]["executors"][executor]["container"]["image"] = TAGGED
    (packages / "scoring.yaml").write_text(yaml.safe_dump_all([spec, platform]))
    with KfpStandIn() as kfp:
        proc = release(kfp, checkout, image=digest(1), packages=packages)
        assert kfp.requests == []
    assert proc.returncode == 2 and f"executor {executor} runs {TAGGED}" in proc.stderr


@pytest.mark.slow
def test_release_compiles_with_the_digest(checkout, tmp_path):
    """The compile's --image reaches every container and every Beam worker."""
    from kubeflow import compile as kfp_compile

    out = tmp_path / "training.yaml"
    args = ["--config", str(TEMPLATE_SETTINGS_FILE), "--image", digest(7), "--output", str(out)]
    assert kfp_compile.main(args) == 0
    spec = next(yaml.safe_load_all(out.read_text()))
    images = {
        e["container"]["image"]
        for e in spec["deploymentSpec"]["executors"].values()
        if "container" in e
    }
    assert images == {digest(7)}
    assert TAGGED not in out.read_text()


@pytest.mark.slow
def test_the_tuning_package_is_a_version_for_manual_runs_never_scheduled(checkout, tmp_path):
    from kubeflow import compile as kfp_compile
    from kubeflow import package_settings

    packages = write_packages(tmp_path / "packages", digest(1))
    settings = package_settings.load_tuning_settings(TEMPLATE_SETTINGS_FILE)
    settings = dataclasses.replace(settings, image=digest(1))
    spec, platform = kfp_compile.compile_tuning_pipeline(settings)
    kfp_compile.write_package(packages / "tuning.yaml", spec, platform)
    with KfpStandIn() as kfp:
        proc = release(kfp, checkout, "--tuning", image=digest(1), packages=packages)
        assert proc.returncode == 0, proc.stderr[-3000:]
        status = release(kfp, checkout, "--status")
    # TFX names the tuning DAG as the training one; its versions have a pipeline of their own.
    assert spec["pipelineInfo"]["name"] == TRAINING
    tuning = f"{TRAINING}-tuning"
    (version,) = recorded_versions(kfp, tuning)
    assert json.loads(version["description"])["package"] == "tuning"
    assert released_schedules(kfp, tuning) == []
    assert {j["display_name"] for j in kfp.recurring_runs.values()} == {TRAINING, SCORING}
    assert "tuning: pipeline " in status.stdout
