"""The template as Copier uses it: a new project, its answers, and `copier update` into a fork.

Each test makes a git repository of this checkout's files as they are now
(tracked and new, not ignored) and runs the `copier` command on it, as a user
runs it on the template's URL. This file tests the template itself: Copier
leaves it out of the projects it makes (copier.yml `_exclude`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE, update_goldens
from tests.harness import checkout_files

COPIER = Path(sys.executable).parent / "copier"
# What is the template's and never lands in a project.
TEMPLATE_ONLY = {"copier.yml", "tests/test_template.py"}
ANSWERS_FILE = ".copier-answers.yml"
# What Copier writes where a fork's edit and the template's change meet (inline mode).
CONFLICT_MARKER = "<<<<<<< before updating"
GIT_IDENTITY = ["-c", "user.name=Template Test", "-c", "user.email=template@test.invalid"]
# A fork as the update test makes it.
FORK_ANSWERS = {
    "pipeline_name": "churn-risk",
    "dataset_dir": "churn",
    "cloud": "eks",
    "object_store": "s3",
    "image_registry": "123456789012.dkr.ecr.us-east-1.amazonaws.com/ml",
}


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *GIT_IDENTITY, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def make_template_repo(path: Path) -> Path:
    """A git repository of this checkout's files, one commit: the template as published."""
    for relative in checkout_files():
        target = path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / relative, target)
    git(path, "init", "--quiet", "--initial-branch=main")
    commit_all(path, "template")
    # Packed, as a published repository's clone is: Copier renders the name of every
    # path in its clone of the template, .git's too, before it excludes them, and a
    # fresh commit leaves a file per object there.
    git(path, "gc", "--quiet")
    return path


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def copier(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(COPIER), *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def copy_project(template: Path, project: Path, **answers: str) -> Path:
    data = [arg for name, value in answers.items() for arg in ("--data", f"{name}={value}")]
    proc = copier_copy(template, project, *data)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return project


def copier_copy(template: Path, project: Path, *args: str) -> subprocess.CompletedProcess:
    """`copier copy` as a user runs it, non-interactively: every answer given or defaulted."""
    command = ("copy", "--defaults", "--vcs-ref", "HEAD", *args, str(template), str(project))
    return copier(template.parent, *command)


def project_files(project: Path) -> set[str]:
    return {
        str(p.relative_to(project))
        for p in project.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(project).parts
    }


def template_sources(template: Path) -> set[str]:
    """The files Copier renders rather than copies (`.jinja`), and those only it reads."""
    return {f for f in project_files(template) if f.endswith(".jinja")} | TEMPLATE_ONLY


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return make_template_repo(tmp_path_factory.mktemp("template"))


def test_the_golden_settings_are_the_templates_kubeflow_settings():
    """The tests compile the golden copy; in the template both files are one."""
    settings = (REPO_ROOT / "kubeflow" / "pipeline.yaml").read_text()
    if update_goldens():
        TEMPLATE_SETTINGS_FILE.write_text(settings)
    assert TEMPLATE_SETTINGS_FILE.read_text() == settings


def test_the_default_answers_reproduce_this_repository(template, tmp_path):
    project = copy_project(template, tmp_path / "project")
    expected = project_files(template) - template_sources(template)
    assert project_files(project) == expected | {ANSWERS_FILE}
    different = [f for f in expected if (project / f).read_bytes() != (template / f).read_bytes()]
    assert different == []
    answers = yaml.safe_load((project / ANSWERS_FILE).read_text())
    assert answers["_commit"] and answers["pipeline_name"] == "taxi-big-tipper"


GKE, EKS = "cloud.google.com/gke-", "eks.amazonaws.com/nodegroup"


@pytest.mark.parametrize(
    ("cloud", "cpu_label", "gpu_label"),
    [
        ("gke", (f"{GKE}nodepool", "cpu-pool"), (f"{GKE}accelerator", "nvidia-l4")),
        ("eks", (EKS, "cpu-pool"), (EKS, "gpu-l4")),
        ("aks", ("agentpool", "cpupool"), ("agentpool", "gpul4")),
    ],
)
def test_the_answers_set_the_kubeflow_settings_and_the_dataset_directory(
    template, tmp_path, cloud, cpu_label, gpu_label
):
    from kubeflow.package_settings import pipeline_retry_roles, pipeline_step_ids
    from kubeflow.settings import load_settings
    from pipeline.steps import DAG_STEPS
    from schemas import load_schema_dir

    answers = {**FORK_ANSWERS, "cloud": cloud}
    project = copy_project(template, tmp_path / "project", **answers)
    settings = load_settings(
        project / "kubeflow" / "pipeline.yaml",
        pipeline_step_ids(),
        set(DAG_STEPS.beam_ids),
        pipeline_retry_roles(),
    )
    assert settings.image == f"{answers['image_registry']}/churn-risk:0.1.0"
    assert settings.pipeline_root == "s3://my-bucket/tfx/churn-risk"
    assert settings.serving_model_dir == "s3://my-bucket/serving/churn-risk"
    assert settings.data_root == "s3://my-bucket/data/churn"
    assert settings.object_store is not None and settings.object_store.region == "us-east-1"
    assert settings.schema_dir == "schemas/churn"
    assert settings.schedule is not None and settings.schedule.experiment == "churn-risk"
    assert dict(settings.default_placement.node_selector) == dict([cpu_label])
    assert dict(settings.placement_for("Trainer").node_selector) == dict([gpu_label])
    tfjob = settings.training.tfjob.placement
    assert tfjob is not None and dict(tfjob.node_selector) == dict([gpu_label])
    # The project's dataset directory starts as the example's, under its own name;
    # the example stays as it is, for `./dev run` on the embedded sample.
    own = load_schema_dir(project / "schemas" / "churn")
    assert own.spec.name == "churn-risk"
    assert (
        own.schema_file.read_text() == (template / "schemas/chicago_taxi/schema.pbtxt").read_text()
    )
    assert load_schema_dir(project / "schemas" / "chicago_taxi").spec.name == "taxi-big-tipper"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("pipeline_name=Churn_Risk", "'pipeline_name': pipeline_name: \"Churn_Risk\" must be"),
        ("dataset_dir=my-data", "'dataset_dir': dataset_dir: \"my-data\" must be"),
        ("image_registry=https://r.example/ml", 'image_registry: "https://r.example/ml" is not'),
        ("cloud=gcp", "'cloud': 'gcp' is not in ['gke', 'eks', 'aks']"),
    ],
)
def test_a_bad_answer_is_refused_naming_the_question(template, tmp_path, answer, message):
    project = tmp_path / "project"
    proc = copier_copy(template, project, "--data", answer)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert not (project / "kubeflow" / "pipeline.yaml").exists()


def fork_edits(project: Path) -> dict[str, str]:
    """A fork's typical edits, each in one of its own files; returns what each file now says."""
    model = project / "trainer" / "model.py"
    hidden = "    for i, units in enumerate(config.hidden_units):\n"
    assert hidden in model.read_text()
    model.write_text(
        model.read_text().replace(
            hidden,
            "    # The fork's own layer, before the hidden stack.\n"
            '    x = keras.layers.Dense(32, activation="relu", name="fork_layer")(x)\n' + hidden,
        )
    )
    spec = project / "schemas" / "churn" / "dataset.yaml"
    numeric, bucketized = "{kind: numeric}", "{kind: bucketized, buckets: 8}"
    spec.write_text(
        spec.read_text().replace(f"  trip_miles: {numeric}", f"  trip_miles: {bucketized}")
    )
    schema = project / "schemas" / "churn" / "schema.pbtxt"
    schema.write_text("# The fork's schema: trip_miles is bucketized.\n" + schema.read_text())
    settings_file = project / "kubeflow" / "pipeline.yaml"
    settings = settings_file.read_text()
    memory = "memory_request: 16Gi, memory_limit: 32Gi}"
    transform = f'  Transform:\n    resources: {{cpu_request: "4", cpu_limit: "8", {memory}\n'
    assert transform in settings
    settings_file.write_text(
        settings.replace(
            transform,
            "  Transform:\n"
            '    resources: {cpu_request: "6", cpu_limit: "12", memory_request: 24Gi}\n'
            "    node_selector:\n"
            "      eks.amazonaws.com/nodegroup: highmem-pool\n",
        )
    )
    edited = (model, spec, schema, settings_file)
    return {str(p.relative_to(project)): p.read_text() for p in edited}


def upstream_change(template: Path) -> dict[str, str]:
    """A template change to its machinery (pipeline/, kubeflow/) and to a fork's own file."""
    fix = "\n\n# An upstream fix (tests/test_template.py).\nUPSTREAM_FIX = 1\n"
    machinery = {"pipeline/local/run_lock.py": fix, "kubeflow/tfx_spec.py": fix}
    for relative, addition in machinery.items():
        path = template / relative
        path.write_text(path.read_text() + addition)
    # Forks never see this: trainer/model.py is theirs.
    model = template / "trainer" / "model.py"
    model.write_text(model.read_text() + "\n\n# An upstream edit of the example model.\n")
    return machinery


def conflict_markers(project: Path) -> set[str]:
    """Files holding Copier's conflict markers, and rejected hunks (`.rej`)."""
    return {
        f
        for f in project_files(project)
        if f.endswith(".rej") or CONFLICT_MARKER in (project / f).read_text(errors="replace")
    }


@pytest.mark.slow
@pytest.mark.e2e
def test_an_update_brings_the_templates_fix_and_keeps_the_forks_edits(tmp_path, taxi_slice):
    template = make_template_repo(tmp_path / "template")
    project = copy_project(template, tmp_path / "fork", **FORK_ANSWERS)
    git(project, "init", "--quiet", "--initial-branch=main")
    commit_all(project, "the fork, as copied")
    edits = fork_edits(project)
    commit_all(project, "the fork's own model, dataset and settings")

    fixes = upstream_change(template)
    commit_all(template, "an upstream fix")
    # The docs show what a conflict looks like: those markers were there before.
    shown = conflict_markers(project)
    # A release: `copier update --vcs-ref TAG` takes the project to a tagged version.
    git(template, "tag", "v0.2.0")
    proc = copier(project, "update", "--defaults", "--vcs-ref", "v0.2.0")
    assert proc.returncode == 0, proc.stderr[-4000:]

    for relative, addition in fixes.items():
        assert (project / relative).read_text().endswith(addition)
    for relative, text in edits.items():
        assert (project / relative).read_text() == text, f"{relative}: the fork's edit was lost"
    assert conflict_markers(project) == shown
    assert yaml.safe_load((project / ANSWERS_FILE).read_text())["_commit"] == "v0.2.0"

    # The updated fork compiles its own Kubeflow spec...
    compiled = subprocess.run(
        [sys.executable, "-m", "kubeflow.compile", "--output", str(tmp_path / "fork.yaml")],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert compiled.returncode == 0, compiled.stderr[-4000:]
    _, platform = yaml.safe_load_all((tmp_path / "fork.yaml").read_text())
    selectors = [
        config.get("nodeSelector", {}).get("labels", {})
        for config in platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"].values()
    ]
    assert {"eks.amazonaws.com/nodegroup": "highmem-pool"} in selectors
    # ...and trains its model on its dataset spec in a short local run: in one process
    # (`--sequential`), as the merge, not the validation branch's second process, is
    # what this run is here for.
    run = subprocess.run(
        [
            sys.executable, "local_runner.py",
            "--schema-dir", "schemas/churn",
            "--data-root", str(taxi_slice),
            "--output-dir", str(tmp_path / "out"),
            "--train-steps", "20", "--eval-steps", "2", "--sequential",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    assert "churn-risk" in run.stdout


@pytest.mark.slow  # `copier update` renders the template twice and merges with git
def test_a_fork_that_edited_a_template_file_gets_conflict_markers_there_only(tmp_path):
    template = make_template_repo(tmp_path / "template")
    project = copy_project(template, tmp_path / "fork")
    git(project, "init", "--quiet", "--initial-branch=main")
    commit_all(project, "the fork, as copied")
    line = 'DEFAULT_RETRY_WINDOW = "24h"\n'
    retries = "kubeflow/settings/retries.py"
    for repo, value in ((project, '"12h"'), (template, '"48h"')):
        path = repo / retries
        assert line in path.read_text()
        path.write_text(path.read_text().replace(line, f"DEFAULT_RETRY_WINDOW = {value}\n"))
    commit_all(project, "the fork edits a template file")
    fixes = upstream_change(template)
    commit_all(template, "upstream edits the same line, and more")

    shown = conflict_markers(project)
    proc = copier(project, "update", "--defaults")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert conflict_markers(project) - shown == {retries}
    text = (project / retries).read_text()
    assert '"12h"' in text and '"48h"' in text
    # Everything else merged as usual.
    for relative, addition in fixes.items():
        assert (project / relative).read_text().endswith(addition)


def tags_without_changelog_entry(tags: list[str], changelog: str) -> list[str]:
    return [tag for tag in tags if f"## [{tag.removeprefix('v')}]" not in changelog]


def test_every_release_tag_has_a_changelog_entry():
    tags = git(REPO_ROOT, "tag", "--list", "v*").split()
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text()
    assert tags_without_changelog_entry(tags, changelog) == []
    # With no tag yet the check above is empty: show it catches one, and that the
    # entries to come have their section.
    assert tags_without_changelog_entry(["v0.1.0", "v9.9.9"], "## [0.1.0] - 2026-01-01") == [
        "v9.9.9"
    ]
    assert "\n## Unreleased\n" in changelog
