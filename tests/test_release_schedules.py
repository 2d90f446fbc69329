"""`kubeflow.release` on the platform's KFP (multi-user, a profile namespace) and beside
other clients of the same server: the lock, the ancestry rule, no unplanned runs on the
ScheduledWorkflow controller's clock, no forgotten schedules, settings refused before any
call. Through the real kfp client, against the KFP stand-in on loopback."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.kfp_standin import KfpStandIn, _epoch
from tests.release_harness import (
    SCORING,
    TRAINING,
    Checkout,
    digest,
    enabled_schedules,
    in_reference_env,
    release,
    release_arguments,
    released_schedules,
)
from tests.release_harness import checkout as checkout

NAMESPACE = "kubeflow-user-example-com"
TOKEN = "dex-token-of-user"


def edit_settings(checkout: Checkout, change) -> str:
    values = yaml.safe_load(checkout.config.read_text())
    change(values)
    checkout.config.write_text(yaml.safe_dump(values, sort_keys=False))
    return checkout.commit()


def multi_user() -> KfpStandIn:
    return KfpStandIn(multi_user=True, tokens={TOKEN: "user@example.com"})


def test_a_multi_user_release_schedules_in_the_namespace(checkout, monkeypatch):
    monkeypatch.setenv("KFP_TOKEN", TOKEN)
    with multi_user() as kfp:
        proc = release(kfp, checkout, "--namespace", NAMESPACE, image=digest(1))
        assert proc.returncode == 0, proc.stderr[-3000:]
        status = release(kfp, checkout, "--namespace", NAMESPACE, "--status")
    for name in (TRAINING, SCORING):
        (job,) = enabled_schedules(kfp, name)
        assert job["namespace"] == NAMESPACE
        (pipeline,) = [p for p in kfp.pipelines.values() if p["name"] == name]
        assert pipeline["namespace"] == NAMESPACE  # kfp.pipelines: namespaced, the default
    assert {e["namespace"] for e in kfp.experiments.values()} == {NAMESPACE}
    assert kfp.authorizations == {f"Bearer {TOKEN}"}
    assert f"multi-user, namespace {NAMESPACE}" in status.stdout
    assert "cron runs in UTC" in status.stdout


def test_a_multi_user_server_without_a_namespace_is_refused_before_any_change(
    checkout, monkeypatch
):
    monkeypatch.setenv("KFP_TOKEN", TOKEN)
    with multi_user() as kfp:
        proc = release(kfp, checkout, image=digest(1))
        submit, env = in_reference_env("-m", "kubeflow.submit")
        package = Path(release_arguments(kfp, checkout, image=digest(1))[-1]) / "training.yaml"
        submitted = subprocess.run(
            [*submit, "--host", kfp.host, "--package", str(package), "--config",
             str(checkout.config)],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    # healthz only (kfp.Client asks once itself, the connect once more).
    assert {(method, path) for method, path, _ in kfp.requests} == {
        ("GET", "/apis/v2beta1/healthz")
    }
    for refused in (proc, submitted):
        assert refused.returncode == 2
        assert refused.stderr.strip().count("\n") == 0, refused.stderr
        assert "multi-user mode" in refused.stderr and "--namespace" in refused.stderr


def test_a_release_without_the_gateways_token_is_refused_in_one_line(checkout):
    with multi_user() as kfp:
        proc = release(kfp, checkout, "--namespace", NAMESPACE, image=digest(1))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert kfp.pipelines == {} and kfp.experiments == {}


def test_shared_pipelines_are_uploaded_without_a_namespace(checkout, monkeypatch):
    monkeypatch.setenv("KFP_TOKEN", TOKEN)
    edit_settings(checkout, lambda v: v.setdefault("kfp", {}).update(pipelines="shared"))
    with multi_user() as kfp:
        proc = release(kfp, checkout, "--namespace", NAMESPACE, image=digest(1))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {p["namespace"] for p in kfp.pipelines.values()} == {""}
    assert {j["namespace"] for j in kfp.recurring_runs.values()} == {NAMESPACE}


def start(kfp: KfpStandIn, checkout: Checkout, n: int) -> subprocess.Popen:
    command, env = in_reference_env("-m", "kubeflow.release")
    command += release_arguments(kfp, checkout, image=digest(n))
    return subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow  # Two releases at once, each a process importing kfp, interleaved.
def test_two_releases_at_once_leave_one_schedule_running_the_newer_commit(checkout, tmp_path):
    older = checkout.git("rev-parse", "HEAD").strip()
    newer = checkout.commit()
    # A second checkout of the same repository, at the older commit.
    subprocess.run(["git", "clone", "-q", str(checkout.root), str(tmp_path / "old")], check=True)
    old = Checkout.__new__(Checkout)
    old.root = tmp_path / "old"
    old.git("checkout", "-q", older)
    with KfpStandIn(list_delay=0.05) as kfp:
        procs = [start(kfp, old, 1), start(kfp, checkout, 2)]
        results = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    for name in (TRAINING, SCORING):
        assert kfp.most_enabled[name] == 1
        (job,) = enabled_schedules(kfp, name)
        version = kfp.versions[job["pipeline_version_reference"]["pipeline_version_id"]]
        assert version["name"].startswith(newer[:12]), version["name"]
    if codes[0] != 0:  # The older one came second and was refused...
        assert "does not descend from the released" in results[0][1]
        assert results[0][1].strip().count("\n") <= 1, results[0][1]
    assert codes[1] == 0, results[1][1][-3000:]  # ...and the newer always lands.
    assert any("release lock: held by" in err for _, err in results) or codes[0] != 0


def test_an_older_commit_is_refused_unless_forced(checkout):
    older = checkout.git("rev-parse", "HEAD").strip()
    checkout.commit()
    with KfpStandIn() as kfp:
        assert release(kfp, checkout, image=digest(2)).returncode == 0
        checkout.git("checkout", "-q", older)
        refused = release(kfp, checkout, image=digest(1))
        assert refused.returncode == 2 and "does not descend" in refused.stderr
        assert len(enabled_schedules(kfp, TRAINING)) == 1
        forced = release(kfp, checkout, "--force", image=digest(1))
    assert forced.returncode == 0, forced.stderr[-3000:]
    (job,) = enabled_schedules(kfp, TRAINING)
    assert kfp.versions[job["pipeline_version_reference"]["pipeline_version_id"]][
        "name"
    ].startswith(older[:12])


def hour(h: float) -> float:
    return datetime(2026, 12, 1, tzinfo=timezone.utc).timestamp() + h * 3600


@pytest.mark.slow  # Four releases, each a process importing kfp, on a simulated day.
@pytest.mark.parametrize("catchup", [False, True])
def test_a_day_with_releases_and_a_rollback_runs_each_tick_once(checkout, catchup):
    """An hourly schedule over a day: a release, another, a rollback and a third,
    each started seconds before a tick, on a clock that moves a second per call, so
    that ticks fall between the release's calls (between the disable and the create)."""

    def hourly(values):
        for section in ("schedule", "scoring_schedule"):
            values[section].update(cron="0 0 * * * *", catchup=catchup)

    edit_settings(checkout, hourly)
    with KfpStandIn(clock=hour(0.5), runs_end_at_once=True, seconds_per_change=1.0) as kfp:
        assert release(kfp, checkout, image=digest(1)).returncode == 0  # 00:30
        # Started so that the training schedule's disable falls a second before the
        # tick and its create on it (a second per call: lock, two uploads, disable).
        for start, action, early in ((4, "release", 5), (8, "rollback", 3), (13, "release", 5)):
            kfp.advance(hour(start) - early - kfp.now())
            if action == "release":
                checkout.commit()
                proc = release(kfp, checkout, image=digest(start))
            else:
                proc = release(kfp, checkout, "--rollback")
            assert proc.returncode == 0, proc.stderr[-3000:]
        kfp.advance(hour(24) - kfp.now())
        for name in (TRAINING, SCORING):
            ticks = sorted(r["scheduled_at"] for r in kfp.runs_of(name))
            expected = [
                datetime.fromtimestamp(hour(h), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                for h in range(1, 25)
            ]
            assert ticks == expected, name
            assert kfp.most_enabled[name] == 1
        # No run late: each starts within the seconds a release's calls take of its tick.
        for run in kfp.runs.values():
            late = _epoch(run["created_at"]) - _epoch(run["scheduled_at"])
            assert 0 <= late <= 30, run


def test_a_changed_experiment_and_a_removed_scoring_schedule_leave_nothing_enabled(checkout):
    with KfpStandIn() as kfp:
        assert release(kfp, checkout, image=digest(1)).returncode == 0

        def move(values):
            values["schedule"]["experiment"] = "taxi-big-tipper-prod"
            del values["scoring_schedule"]

        edit_settings(checkout, move)
        proc = release(kfp, checkout, image=digest(2))
        assert proc.returncode == 0, proc.stderr[-3000:]
        status = release(kfp, checkout, "--status")
    (job,) = enabled_schedules(kfp, TRAINING)
    assert kfp.experiments[job["experiment_id"]]["display_name"] == "taxi-big-tipper-prod"
    assert enabled_schedules(kfp, SCORING) == []
    assert "disabled: the settings no longer schedule it" in proc.stdout
    assert "(DISABLED)" in status.stdout and "LEFT OVER" not in status.stdout
    assert len(released_schedules(kfp, SCORING)) == 1


def schedule_field(section: str, **fields):
    return lambda values: values[section].update(**fields)


def kfp_field(**fields):
    return lambda values: values.setdefault("kfp", {}).update(**fields)


BAD_SETTINGS = [
    (schedule_field("schedule", max_concurrency=11), "schedule.max_concurrency: must be 1 to 10"),
    (schedule_field("schedule", max_concurrency=0), "schedule.max_concurrency: must be 1 to 10"),
    (schedule_field("schedule", cron="0 0 3 * *"), "schedule.cron: '0 0 3 * *' must have 6 fields"),
    (schedule_field("schedule", cron="0 0 25 * * *"), "above maximum (23)"),
    (schedule_field("scoring_schedule", cron="@dialy"), "Unrecognized descriptor: @dialy"),
    (kfp_field(schedule_time_zone="Mars/Olympus"), "kfp.schedule_time_zone"),
    (kfp_field(namespace="Not_A_Namespace"), "kfp.namespace"),
]


@pytest.mark.parametrize(("change", "message"), BAD_SETTINGS)
def test_a_setting_the_server_refuses_is_refused_before_any_call(checkout, change, message):
    edit_settings(checkout, change)
    with KfpStandIn() as kfp:
        proc = release(kfp, checkout, image=digest(1))
        assert kfp.requests == []
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr


def test_a_descriptor_cron_is_released(checkout):
    edit_settings(checkout, lambda v: v["schedule"].update(cron="@daily"))
    with KfpStandIn() as kfp:
        proc = release(kfp, checkout, image=digest(1))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (job,) = enabled_schedules(kfp, TRAINING)
    assert job["trigger"]["cron_schedule"]["cron"] == "@daily"


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/org/repo.git",
        "https://user:token@github.com/org/repo/",
        "ssh://git@github.com/org/repo",
        "git@github.com:org/repo.git",
    ],
)
def test_a_remote_names_one_project_however_it_is_spelled(url):
    """A release from CI (https) and one from a laptop (ssh) sweep the same project's
    schedules; a token in the URL never reaches a schedule's description."""
    from kubeflow.release_packages import project_of_url

    assert project_of_url(url) == "github.com/org/repo"
