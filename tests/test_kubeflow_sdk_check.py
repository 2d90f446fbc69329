"""The compiled package, checked by a *current* kfp + kfp-kubernetes in their own environment.

The project's kfp is held at 2.5 by TFX's protobuf pin, and its kfp-kubernetes
(1.0.0) has no tolerations; a cluster today speaks a newer SDK. This test
builds the second locked environment in kubeflow/kfp_sdk/ (once; uv reuses
it), parses our package with that SDK's protos (unknown fields rejected) and
compares our resources and platform entries with what that SDK itself writes
for the same settings through `set_*_limit`, `kubernetes.add_node_selector`
and `kubernetes.add_toleration`.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from kubeflow import compile as kfp_compile
from kubeflow import package_dags, package_settings, tfx_spec
from kubeflow import pipeline_steps as kubeflow_steps
from kubeflow.settings import parse_settings
from kubeflow.step_ids import TUNE
from pipeline import steps as dag
from tests.conftest import TEMPLATE_SETTINGS_FILE
from tests.harness import MINIO, run_in_standin_harness

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("store", ["gcs", "minio"])
def test_package_parses_and_placement_matches_current_kfp(tmp_path, store):
    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    if store == "minio":
        # With serving on KServe: the Deploy step, checked like every other.
        raw.update(MINIO, serving={"inference_service": "taxi", "service_account": "kserve-minio"})
    settings = parse_settings(
        raw,
        package_settings.pipeline_step_ids(),
        retry_roles=package_settings.pipeline_retry_roles(),
    )
    spec, platform = kfp_compile.compile_pipeline(settings)
    package = tmp_path / "pipeline.yaml"
    kfp_compile.write_package(package, spec, platform)
    labels = tfx_spec.executor_labels(spec)
    steps = sorted(set(package_settings.pipeline_step_ids()) & set(labels))
    assert (kubeflow_steps.DEPLOY in steps) == (store == "minio")
    reference = checked_by_reference(tmp_path, settings, spec, platform, steps)
    assert_placed_as_reference(spec, platform, steps, reference)
    tasks = tfx_spec.all_tasks(spec)
    # The checked-in settings retry the Beam steps and the Trainer, and never a gate.
    retried = {task for task in tasks if "retryPolicy" in tasks[task]}
    assert retried == {*dag.DAG_STEPS.beam_ids, dag.TRAINER}

    # The exit handler and KFP's own artifact types, as kfp compiles a dsl.ExitHandler.
    exit_reference = reference["exit_handler"]
    components = spec["components"]
    report_outputs = components[kubeflow_steps.RUN_REPORT]["outputDefinitions"]["artifacts"]
    assert report_outputs["report"]["artifactType"] == exit_reference["html_type"]
    assert report_outputs["metrics"]["artifactType"] == exit_reference["metrics_type"]
    status_component = components[kubeflow_steps.RUN_STATUS]
    assert (
        status_component["outputDefinitions"]["artifacts"]["report"]["artifactType"]
        == (exit_reference["html_type"])
    )
    assert (
        status_component["inputDefinitions"]["parameters"]["final_status"]
        == (exit_reference["final_status_input"])
    )
    exit_task = spec["root"]["dag"]["tasks"][kubeflow_steps.RUN_STATUS]
    assert exit_task["triggerPolicy"] == exit_reference["exit_task_trigger"]
    body_task = exit_task["inputs"]["parameters"]["final_status"]["taskFinalStatus"]["producerTask"]
    assert exit_task["dependentTasks"] == [body_task]
    body = components[spec["root"]["dag"]["tasks"][body_task]["componentRef"]["name"]]
    # Every parameter the body's tasks read is declared on the body and passed to it.
    for task in body["dag"]["tasks"].values():
        for parameter in task.get("inputs", {}).get("parameters", {}).values():
            name = parameter.get("componentInputParameter")
            if name is None:
                continue
            assert set(parameter) == set(exit_reference["body_reads"])
            assert body["inputDefinitions"]["parameters"][name] == exit_reference["body_declares"]
            passed = spec["root"]["dag"]["tasks"][body_task]["inputs"]["parameters"][name]
            assert passed == {**exit_reference["body_is_passed"], "componentInputParameter": name}


def checked_by_reference(tmp_path, settings, spec, platform, steps, deadlines=None) -> dict:
    """The package parsed by the current kfp, and what that SDK writes for each step's
    settings (kubeflow/standin_harness/check_spec.py). `deadlines`: the steps' (default: the
    training package's)."""
    deadlines = package_dags.step_deadlines(settings) if deadlines is None else deadlines
    package = tmp_path / "pipeline.yaml"
    kfp_compile.write_package(package, spec, platform)
    placements = {
        task: {
            "resources": dataclasses.asdict(settings.placement_for(task).resources),
            "node_selector": dict(settings.placement_for(task).node_selector),
            "tolerations": [
                dataclasses.asdict(t) for t in settings.placement_for(task).tolerations
            ],
            "env": settings.object_store.environment() if settings.object_store else {},
            "secret_as_env": [
                {"secret": credentials.secret, "key_to_env": credentials.key_to_env()}
                for credentials in [settings.object_store and settings.object_store.credentials]
                if credentials
            ],
            "retry": retry_arguments(settings.retries.policy_for(task), deadlines.get(task)),
        }
        for task in steps
    }
    placements_file = tmp_path / "placements.json"
    placements_file.write_text(json.dumps(placements))

    proc = run_in_standin_harness(
        "check_spec.py", "--package", str(package), "--placements", str(placements_file),
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_placed_as_reference(spec, platform, steps, reference) -> None:
    """Each step's resources, environment, platform entry and retry policy, as the
    current kfp writes them."""
    labels = tfx_spec.executor_labels(spec)
    tasks = tfx_spec.all_tasks(spec)
    executors = spec["deploymentSpec"]["executors"]
    ours_platform = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    for task in steps:
        label = labels[task]
        container = executors[label]["container"]
        assert container.get("resources", {}) == reference[task]["resources"], task
        assert container.get("env", []) == reference[task]["env"], task
        assert ours_platform.get(label, {}) == reference[task]["kubernetes"], task
        assert tasks[task].get("retryPolicy") == reference[task]["retry_policy"], task


def test_the_scoring_package_parses_and_places_as_current_kfp(tmp_path):
    """The batch scoring package (docs/batch-scoring.md), under the same checks."""
    from tests.harness import taxi_schema_dir_copy

    schema_dir = taxi_schema_dir_copy(tmp_path)
    settings = package_settings.load_scoring_settings(TEMPLATE_SETTINGS_FILE)
    spec, platform = kfp_compile.compile_scoring_pipeline(settings, schema_dir)
    steps = sorted(dag.SCORING_STEPS.ids)
    reference = checked_by_reference(tmp_path, settings, spec, platform, steps)
    assert_placed_as_reference(spec, platform, steps, reference)


def retry_arguments(policy, step_deadline: int | None) -> dict | None:
    """kfp's `set_retry` arguments for a retry policy (None: no retries); its
    `backoff_max_duration` is the retry window."""
    if not policy.max_retries:
        return None
    return {
        "num_retries": policy.max_retries,
        "backoff_duration": policy.backoff,
        "backoff_factor": policy.backoff_factor,
        "backoff_max_duration": f"{policy.window_seconds(step_deadline)}s",
    }


def test_the_tuning_package_parses_and_places_as_current_kfp(tmp_path):
    """The tuning package (docs/tuning.md), under the same checks, with an S3 store."""
    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    raw.update(MINIO)
    raw["components"]["Tune"] = {"resources": {"cpu_request": "2", "memory_limit": "8Gi"}}
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump(raw))
    settings = package_settings.load_tuning_settings(path)
    spec, platform = kfp_compile.compile_tuning_pipeline(settings)
    steps = sorted(tfx_spec.executor_labels(spec))
    assert TUNE in steps
    deadlines = {TUNE: settings.tuning.deadline_seconds}
    reference = checked_by_reference(tmp_path, settings, spec, platform, steps, deadlines)
    assert_placed_as_reference(spec, platform, steps, reference)
    # Unnamed in retries:, Tune retries (a retry resumes the search), within its deadline.
    assert tfx_spec.all_tasks(spec)[TUNE]["retryPolicy"]["maxRetryCount"] == 2
