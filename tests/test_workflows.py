"""The GitHub workflows a fork gets (.github/workflows/): validated, audited and run.

Validated against SchemaStore's workflow schema as check-jsonschema ships it,
and audited by zizmor's offline audits (unpinned actions, excess permissions,
template injection, persisted credentials), both with every proxy pointed at a
closed port so that a fetch would fail. Then each workflow's `run:` steps run
in order, as the runner runs them (bash --noprofile --norc -eo pipefail, the
step's `env:` with its `${{ }}` expressions resolved, $GITHUB_OUTPUT read back
after each step), against the KFP stand-in; the registry's steps are handed
their outputs (a digest), since no registry is here.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE
from tests.harness import uv_binary
from tests.kfp_standin import KfpStandIn

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
# Any network call fails fast: both tools must work offline.
OFFLINE = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
}
EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def tool(name: str, *args: str) -> subprocess.CompletedProcess:
    command = [uv_binary(), "run", "--locked", name, *args]
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | OFFLINE
    return subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def check_jsonschema(*paths: Path) -> subprocess.CompletedProcess:
    return tool("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *map(str, paths))


def zizmor(*paths: Path) -> subprocess.CompletedProcess:
    return tool("zizmor", "--offline", "--no-progress", *map(str, paths))


def test_the_workflows_are_valid_and_pass_the_audit():
    paths = sorted(WORKFLOWS.glob("*.yml"))
    assert [p.name for p in paths] == ["ci.yml", "release.yml"]
    valid = check_jsonschema(*paths)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    audit = zizmor(*paths)
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_the_checks_catch_a_bad_workflow(tmp_path):
    """What each check is there for: a mistyped key; a tag-pinned action, no
    permissions, persisted credentials and a pull request's title in a script."""
    workflow = yaml.safe_load((WORKFLOWS / "ci.yml").read_text())
    workflow["jobs"]["test"]["step"] = workflow["jobs"]["test"].pop("steps")
    (tmp_path / "mistyped.yml").write_text(yaml.safe_dump(workflow))
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "name: bad\non: pull_request_target\njobs:\n  greet:\n    runs-on: ubuntu-22.04\n"
        "    steps:\n      - uses: actions/checkout@v4\n"
        "      - run: echo '${{ github.event.pull_request.title }}'\n"
    )
    mistyped = check_jsonschema(tmp_path / "mistyped.yml")
    assert mistyped.returncode != 0
    assert "step" in mistyped.stdout + mistyped.stderr
    audit = zizmor(bad)
    assert audit.returncode != 0
    for finding in ("unpinned-uses", "template-injection", "excessive-permissions", "artipacked"):
        assert finding in audit.stdout + audit.stderr, finding


class Runner:
    """The runner's part: `if:` on the event, `env:` resolved, the step's script run."""

    def __init__(self, workflow: str, event: str, context: dict, tmp: Path) -> None:
        (self.job,) = yaml.safe_load((WORKFLOWS / workflow).read_text())["jobs"].values()
        self.event = event
        self.context = context
        self.outputs: dict[str, dict[str, str]] = {}
        self.tmp = tmp
        self.ran: list[str] = []

    def value(self, expression: str) -> str:
        """`vars.X`, `secrets.X`, `steps.ID.outputs.X`, and `A || 'default'`."""
        if "||" in expression:
            first, _, default = expression.partition("||")
            return self.value(first.strip()) or default.strip().strip("'")
        kind, _, rest = expression.partition(".")
        if kind == "steps":
            step_id, _, name = rest.partition(".outputs.")
            return self.outputs[step_id][name]
        return self.context.get(kind, {}).get(rest, "")

    def condition(self, text: str) -> bool:
        match = re.fullmatch(r"github\.event_name == '(\w+)'", text.strip())
        assert match, f"the test's runner reads no condition {text!r}"
        return match[1] == self.event

    def run(self, handed: dict[str, dict[str, str]], env: dict[str, str]) -> None:
        for step in self.job["steps"]:
            if "uses" in step:
                continue  # actions/checkout: the tree is here already.
            if "if" in step and not self.condition(step["if"]):
                continue
            if step.get("id") in handed:
                self.outputs[step["id"]] = handed[step["id"]]
                continue
            assert "${{" not in step["run"], "an expression in a script is an injection"
            output = self.tmp / f"output-{len(self.ran)}"
            output.write_text("")
            step_env = {
                k: EXPRESSION.sub(lambda m: self.value(m[1]), str(v))
                for k, v in step.get("env", {}).items()
            }
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                cwd=REPO_ROOT,
                env={**env, **step_env, "GITHUB_OUTPUT": str(output)},
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert proc.returncode == 0, (step["name"], proc.stdout[-2000:], proc.stderr[-3000:])
            self.ran.append(step["name"])
            lines = output.read_text().splitlines()
            self.outputs[step.get("id", step["name"])] = dict(
                line.split("=", 1) for line in lines if "=" in line
            )
            self.last = proc


def runner_env(tmp_path: Path) -> dict[str, str]:
    """The runner's environment on a checkout of this tree: CI set, and git reading a
    commit of the tree as it is (in a repository of its own), so that the release
    finds the clean checkout a runner has."""
    git_dir = tmp_path / "checkout.git"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env |= {"GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(REPO_ROOT), "CI": "true"}
    for command in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.email=ci@example.com", "-c", "user.name=ci", "commit", "-q", "-m", "checkout"],
    ):
        subprocess.run(["git", *command], env=env, cwd=REPO_ROOT, check=True)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        env=env,
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return env | {"GITHUB_SHA": sha, "GITHUB_EVENT_NAME": "push"}


def test_the_release_workflow_releases_only_from_a_tag_or_the_default_branch():
    (job,) = yaml.safe_load((WORKFLOWS / "release.yml").read_text())["jobs"].values()
    assert job["if"] == (
        "github.event_name == 'push' || github.ref_name == github.event.repository.default_branch"
    )
    assert job["environment"] == "production"
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0  # The ancestry check reads the history.


@pytest.mark.slow
@pytest.mark.parametrize("namespace", ["", "kubeflow-user-example-com"])
def test_the_release_workflow_releases_the_digest_it_is_handed(tmp_path, namespace):
    """The template as shipped: its settings schedule the training and the scoring
    package, and each schedule runs the digest the build step handed on; with
    KFP_NAMESPACE set, on a multi-user KFP, in that namespace."""
    settings = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    repository = settings["image"].rsplit(":", 1)[0]
    digest = "sha256:" + "ab" * 32
    env = runner_env(tmp_path)
    with KfpStandIn(multi_user=bool(namespace), tokens={"t0ken": "user@example.com"}) as kfp:
        context = {
            "vars": {
                "KFP_HOST": kfp.host,
                "KFP_NAMESPACE": namespace,
                "IMAGE_REPOSITORY": repository,
                "IMAGE_REGISTRY": repository.split("/")[0],
            },
            "secrets": {"KFP_TOKEN": "t0ken", "REGISTRY_USERNAME": "u", "REGISTRY_PASSWORD": "p"},
        }
        runner = Runner("release.yml", "push", context, tmp_path)
        # No registry here: the login and the build are handed their outputs.
        runner.run({"login": {}, "build": {"digest": digest}}, env)
    assert runner.ran == ["Release"]
    image = f"{repository}@{digest}"
    assert "Bearer t0ken" in kfp.authorizations
    for job in kfp.recurring_runs.values():
        assert job["status"] == "ENABLED"
        spec = job["pipeline_spec"]["pipeline_spec"]
        images = {
            e["container"]["image"]
            for e in spec["deploymentSpec"]["executors"].values()
            if "container" in e
        }
        assert images == {image}
    assert len(kfp.recurring_runs) == 2  # The training and the scoring schedule.
    assert {job["namespace"] for job in kfp.recurring_runs.values()} == {namespace}
    assert f"commit {env['GITHUB_SHA']}, image {image}" in runner.last.stdout


@pytest.mark.slow
@pytest.mark.parametrize("event", ["pull_request", "push"])
def test_the_ci_workflow_runs_lint_then_its_tier(tmp_path, event):
    """Lint runs; the tier's command is run as written and collects the tests it
    would run (PYTEST_ADDOPTS=--collect-only: running the suite inside itself
    would never end)."""
    env = runner_env(tmp_path) | {"PYTEST_ADDOPTS": "--collect-only -q"}
    runner = Runner("ci.yml", event, {}, tmp_path)
    runner.run({}, env)
    tier = "Fast tier" if event == "pull_request" else "Whole suite"
    assert runner.ran == ["Lint", tier]
    collected = re.search(r"(\d+) tests? collected", runner.last.stdout + runner.last.stderr)
    assert collected and int(collected[1]) > 100
