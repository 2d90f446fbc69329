"""Retries on Kubeflow: settings validated with the field named, compiled as kfp writes them."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
import yaml

from kubeflow import compile as kfp_compile
from kubeflow import package_settings, tfx_spec
from kubeflow import pipeline_steps as kubeflow_steps
from kubeflow.settings import parse_settings
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.retries import DEFAULT_RETRY, RetryPolicy
from pipeline import steps as dag
from tests.conftest import TEMPLATE_SETTINGS_FILE
from tests.harness import run_in_standin_harness

STEP_IDS = package_settings.pipeline_step_ids()
ROLES = package_settings.pipeline_retry_roles()
RAW_SETTINGS = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())


def settings_with_retries(retries):
    raw = copy.deepcopy(RAW_SETTINGS)
    if retries is None:
        raw.pop("retries", None)
    else:
        raw["retries"] = retries
    return parse_settings(raw, STEP_IDS, retry_roles=ROLES)


def test_checked_in_settings_state_the_defaults():
    """The file's `retries:` section is what a file without one gets: the file documents it."""
    checked_in = settings_with_retries(RAW_SETTINGS["retries"]).retries
    absent = settings_with_retries(None).retries
    for step in STEP_IDS:
        assert checked_in.policy_for(step) == absent.policy_for(step), step
    retried = {s for s in STEP_IDS if absent.policy_for(s).max_retries}
    assert retried == {*dag.DAG_STEPS.beam_ids, dag.TRAINER}
    assert absent.policy_for(dag.TRAINER) == DEFAULT_RETRY


def test_compiled_retry_policy_is_kfps_set_retry_form():
    assert RetryPolicy(max_retries=3, backoff="5m", backoff_factor=3, retry_window="2h").spec() == {
        "maxRetryCount": 3,
        "backoffDuration": "300s",
        # A float, as set_retry writes it; Go's %v hands Argo "3".
        "backoffFactor": 3.0,
        "backoffMaxDuration": "7200s",
    }
    assert RetryPolicy(max_retries=0).spec() is None


def test_a_step_entry_replaces_the_defaults_field_by_field():
    retries = settings_with_retries(
        {
            "defaults": {"max_retries": 1, "backoff": "10s"},
            "components": {dag.TRAINER: {"max_retries": 4}},
        }
    ).retries
    assert retries.policy_for(dag.TRAINER) == RetryPolicy(4, "10s", 2.0, None)
    assert retries.policy_for(dag.PUSHER) == RetryPolicy(1, "10s", 2.0, None)
    # The defaults never reach a gate.
    assert retries.policy_for(dag.DATA_GATE).max_retries == 0
    assert retries.policy_for(dag.DRIFT_GATE).max_retries == 0


def test_compiled_tasks_carry_their_policy_and_gates_none():
    settings = settings_with_retries(
        {"defaults": {"max_retries": 1}, "components": {dag.TRAINER: {"max_retries": 3}}}
    )
    spec, _ = kfp_compile.compile_pipeline(settings)
    tasks = tfx_spec.all_tasks(spec)
    assert tasks[dag.TRAINER]["retryPolicy"]["maxRetryCount"] == 3
    assert tasks[dag.PUSHER]["retryPolicy"]["maxRetryCount"] == 1
    assert tasks[kubeflow_steps.RUN_STATUS]["retryPolicy"]["maxRetryCount"] == 1
    for gate in kubeflow_steps.KUBEFLOW_STEPS.never_retried:
        if gate != kubeflow_steps.DEPLOY:  # compiled only with `serving:`
            assert "retryPolicy" not in tasks[gate], gate
    assert "retryPolicy" not in tasks["tfx-dag"]  # a DAG, not a step


@pytest.mark.parametrize(
    ("retries", "message"),
    [
        (
            {"components": {dag.DATA_GATE: {"max_retries": 1}}},
            r"^retries.components.DataValidationGate.max_retries: DataValidationGate must not "
            r"retry: it fails on the data's anomalies",
        ),
        (
            {"components": {dag.DRIFT_GATE: {"max_retries": 2}}},
            r"^retries.components.DataDriftGate.max_retries: DataDriftGate must not retry",
        ),
        ({"defaults": {"max_retries": -1}}, r"^retries.defaults.max_retries: must be an integer"),
        ({"defaults": {"max_retries": 11}}, r"^retries.defaults.max_retries: must be an integer"),
        (
            {"components": {dag.TRAINER: {"max_retries": True}}},
            r"^retries.components.Trainer.max_retries: must be an integer",
        ),
        (
            {"components": {dag.TRAINER: {"backoff": "90"}}},
            r"^retries.components.Trainer.backoff: '90' is not a duration",
        ),
        (
            {"components": {dag.TRAINER: {"backoff": "1.5m"}}},
            r"^retries.components.Trainer.backoff: '1.5m' is not a duration",
        ),
        (
            # Only the window may be left unset; a backoff of null crashed the compile.
            {"defaults": {"backoff": None}},
            r"^retries.defaults.backoff: None is not a duration",
        ),
        (
            {"defaults": {"backoff": "10m", "retry_window": "5m"}},
            r"^retries.defaults.retry_window: 5m is shorter than backoff 10m",
        ),
        (
            {"components": {dag.TRAINER: {"retry_window": "6h", "backoff_max": "6h"}}},
            r"^retries.components.Trainer.backoff_max: deprecated, and retry_window is set",
        ),
        (
            {"defaults": {"backoff_factor": 0.5}},
            r"^retries.defaults.backoff_factor: must be a whole number >= 1",
        ),
        (
            # Argo parses backoff.factor with strconv.Atoi: "1.5" ends the step in Error.
            {"defaults": {"backoff_factor": 1.5}},
            r"^retries.defaults.backoff_factor: must be a whole number \(2, 3\), got 1.5: Argo "
            r"reads backoff.factor as an integer",
        ),
        (
            {"components": {dag.TRAINER: {"backoff_factor": 2.5}}},
            r"^retries.components.Trainer.backoff_factor: must be a whole number",
        ),
        (
            {"defaults": {"backoff_factor": "2"}},
            r"^retries.defaults.backoff_factor: must be a whole number >= 1, got '2'",
        ),
        ({"defaults": {"retries": 2}}, r"^retries.defaults: unknown field\(s\) \['retries'\]"),
        (
            {"components": {"Trainr": {}}},
            r"^retries.components: unknown component id\(s\) \['Trainr'\]",
        ),
        ({"max_retries": 2}, r"^retries: unknown field\(s\) \['max_retries'\]"),
        ([2], r"^retries: must be a dict"),
    ],
)
def test_retry_settings_errors_name_the_field(retries, message):
    with pytest.raises(SettingsError, match=message):
        settings_with_retries(retries)


def test_a_whole_float_factor_compiles_as_the_integer_argo_reads():
    """YAML's 2.0 is a whole number: accepted, and compiled as kfp writes it (2.0)."""
    settings = settings_with_retries({"defaults": {"max_retries": 1, "backoff_factor": 3.0}})
    assert settings.retries.policy_for(dag.PUSHER).backoff_factor == 3
    assert isinstance(settings.retries.policy_for(dag.PUSHER).backoff_factor, int)
    assert settings.retries.policy_for(dag.PUSHER).spec()["backoffFactor"] == 3.0


def test_without_roles_no_step_retries_by_default():
    """The submit tool knows task ids only; nothing it reads depends on retries."""
    raw = copy.deepcopy(RAW_SETTINGS)
    raw.pop("retries")
    retries = parse_settings(raw, STEP_IDS).retries
    assert all(retries.policy_for(s).max_retries == 0 for s in STEP_IDS)


def tfjob_settings(trainer_retries: dict | None, deadline: str = "6h"):
    """The checked-in settings training on a TFJob of `deadline`, the Trainer's retry
    entry replaced by `trainer_retries` (None: the checked-in one)."""
    raw = copy.deepcopy(RAW_SETTINGS)
    raw["training"]["engine"] = "tfjob"
    raw["training"]["tfjob"]["deadline"] = deadline
    raw["config_variant"] = "gpu_multi_node"
    raw["components"][dag.TRAINER] = {"resources": {"cpu_request": "1", "memory_request": "2Gi"}}
    if trainer_retries is not None:
        raw["retries"]["components"][dag.TRAINER] = trainer_retries
    return parse_settings(raw, STEP_IDS, retry_roles=ROLES)


def test_default_windows_cover_each_steps_real_duration():
    """The window is KFP's backoffMaxDuration: from the first attempt's start, Argo
    retries no more after it and kills a retry still running."""
    spec, _ = kfp_compile.compile_pipeline(settings_with_retries(RAW_SETTINGS["retries"]))
    tasks = tfx_spec.all_tasks(spec)
    for step in (*dag.DAG_STEPS.beam_ids, dag.TRAINER):
        assert tasks[step]["retryPolicy"]["backoffMaxDuration"] == "86400s", step
    # On a TFJob the Trainer's window holds all three attempts at the 6 h deadline,
    # and the two backoffs (60 s, 120 s) between them.
    spec, _ = kfp_compile.compile_pipeline(tfjob_settings(None))
    trainer = tfx_spec.all_tasks(spec)[dag.TRAINER]["retryPolicy"]
    assert trainer == {
        "maxRetryCount": 2,
        "backoffDuration": "60s",
        "backoffFactor": 2.0,
        "backoffMaxDuration": f"{3 * 6 * 3600 + 60 + 120}s",
    }


def test_a_window_too_short_for_one_retry_of_the_deadline_is_refused():
    settings = tfjob_settings({"max_retries": 2, "retry_window": "6h"})
    with pytest.raises(
        SettingsError,
        match=r"^retries.components.Trainer.retry_window: 6h cannot hold even one retry: a "
        r"retry starts at least 60s after the first attempt ends and may run 6h, and Argo "
        r"kills it 6h after the first attempt began. Set at least 361m, or leave it out for "
        r"1083m .*; Trainer's deadline is training.tfjob.deadline 6h$",
    ):
        kfp_compile.compile_pipeline(settings)
    # One retry of the whole deadline fits: accepted.
    kfp_compile.compile_pipeline(tfjob_settings({"max_retries": 2, "retry_window": "361m"}))
    # Without retries there is no window to hold.
    kfp_compile.compile_pipeline(tfjob_settings({"max_retries": 0, "retry_window": "1h"}))


def test_old_backoff_max_loads_as_the_window_with_a_deprecation_message():
    with pytest.warns(
        FutureWarning,
        match=r"^retries.components.Trainer.backoff_max is deprecated: rename it retry_window. "
        r"KFP never read it as a cap on the wait between attempts",
    ):
        settings = settings_with_retries(
            {"components": {dag.TRAINER: {"max_retries": 2, "backoff_max": "30m"}}}
        )
    policy = settings.retries.policy_for(dag.TRAINER)
    assert policy.retry_window == "30m"
    assert policy.spec()["backoffMaxDuration"] == "1800s"
    # The TFX-era default of 30 minutes cannot cover a TFJob's 6 h: refused, named.
    with (
        pytest.warns(FutureWarning),
        pytest.raises(
            SettingsError, match=r"^retries.components.Trainer.retry_window: 30m cannot hold"
        ),
    ):
        kfp_compile.compile_pipeline(
            tfjob_settings({"max_retries": 2, "backoff": "60s", "backoff_max": "30m"})
        )


# --- The retry window as the backend's Argo applies it --------------------------------

# A step that fails its first attempt and succeeds on any later one; argv: a counter
# file, then the step's name (run_compiled.py names a non-TFX step by its last argument).
FAILS_ONCE = (
    "import pathlib, sys\n"
    "counter = pathlib.Path(sys.argv[1])\n"
    "attempt = int(counter.read_text() or 0) + 1 if counter.exists() else 1\n"
    "counter.write_text(str(attempt))\n"
    "sys.exit(1 if attempt == 1 else 0)\n"
)
STEP = "LongStep"


# A step that writes into its output artifact and, on its first attempt, then waits
# to be killed (the --lose-node and --preempt faults), its executor output file begun
# and not finished, as a TFX step killed while writing it leaves it; argv: a counter
# file, the executor input, the step's name.
WRITES_THEN_WAITS_ONCE = (
    "import json, pathlib, sys, time\n"
    "counter = pathlib.Path(sys.argv[1])\n"
    "attempt = int(counter.read_text() or 0) + 1 if counter.exists() else 1\n"
    "counter.write_text(str(attempt))\n"
    "output_file = pathlib.Path(json.loads(sys.argv[3])['outputs']['outputFile'])\n"
    "output_file.parent.mkdir(parents=True, exist_ok=True)\n"
    "output_file.write_text('{' if attempt == 1 else '{}')\n"
    "outputs = json.loads(sys.argv[3])['outputs']['artifacts']\n"
    "model = pathlib.Path(outputs['model']['artifacts'][0]['uri'])\n"
    "model.mkdir(parents=True, exist_ok=True)\n"
    "(model / 'weights').write_text(str(attempt))\n"
    "time.sleep(120 if attempt == 1 else 0)\n"
)


def one_step_package(tmp_path, retry_policy: dict, writes_outputs: bool = False) -> Path:
    """A compiled package of one container task that carries `retry_policy`; it fails its
    first attempt, or with `writes_outputs` writes its output and waits on it."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    counter = str(tmp_path / "count")
    if writes_outputs:
        # As a TFX step takes its executor input (kfp.local substitutes it for {{$}}).
        command = ["python", "-c", WRITES_THEN_WAITS_ONCE, counter]
        args = ["--json_serialized_invocation_args", "{{$}}", STEP]
        outputs = {"artifacts": {"model": {"artifactType": {"schemaTitle": "system.Model"}}}}
    else:
        command, args, outputs = ["python", "-c", FAILS_ONCE, counter, STEP], [], None
    spec = {
        "pipelineInfo": {"name": "retry-window"},
        "schemaVersion": "2.1.0",
        "sdkVersion": "kfp-2.5.0",
        "root": {
            "dag": {
                "tasks": {
                    STEP: {
                        "taskInfo": {"name": STEP},
                        "componentRef": {"name": f"comp-{STEP}"},
                        "retryPolicy": retry_policy,
                    }
                }
            }
        },
        "components": {
            f"comp-{STEP}": {
                "executorLabel": f"exec-{STEP}",
                **({"outputDefinitions": outputs} if outputs else {}),
            }
        },
        "deploymentSpec": {
            "executors": {
                f"exec-{STEP}": {
                    "container": {"image": "python:3.10", "command": command, "args": args}
                }
            }
        },
    }
    package = tmp_path / "package.yaml"
    package.write_text(yaml.safe_dump_all([spec, {}]))
    return package


def run_one_step(tmp_path, retry_policy: dict, *options: str, writes_outputs: bool = False) -> dict:
    """The one-step package executed by run_compiled.py; its step's summary."""
    package = one_step_package(tmp_path, retry_policy, writes_outputs)
    summary = tmp_path / "summary.json"
    run_in_standin_harness(
        "run_compiled.py",
        "--package", str(package),
        "--pipeline-root", str(tmp_path / "root"),
        "--python", sys.executable,
        "--summary", str(summary),
        *options,
        timeout=300,
    )  # fmt: skip
    return json.loads(summary.read_text())["steps"][STEP]


def run_long_step(tmp_path, retry_policy: dict, attempt_duration: str) -> dict:
    """Each attempt takes `attempt_duration` on the cluster, set up as the docs recommend."""
    return run_one_step(
        tmp_path,
        retry_policy,
        "--attempt-duration", f"{STEP}={attempt_duration}",
        "--template-retry-policy", "none",
    )  # fmt: skip


@pytest.mark.slow
def test_stock_2_17_retries_no_failed_step_and_2_16_or_the_recommended_setup_does(tmp_path):
    """Stock 2.17+ merges `retryPolicy: OnError` into every template: a step that exits
    non-zero is Failed to Argo, so the step's own retries never start."""
    policy = DEFAULT_RETRY.spec(60)
    stock = run_one_step(tmp_path / "stock", policy, "--backend-release", "2.17.0")
    assert (stock["status"], stock["attempts"], stock["phase"]) == ("FAILURE", 1, "Failed")
    assert stock["retry_stopped"] == "retryPolicy OnError does not retry a node that ended Failed"
    older = run_one_step(tmp_path / "older", policy, "--backend-release", "2.16.1")
    assert (older["status"], older["attempts"], older["retry_policy"]) == (
        "SUCCESS",
        2,
        "OnFailure",
    )
    fixed = run_one_step(
        tmp_path / "fixed", policy, "--backend-release", "2.17.0", "--template-retry-policy", "none"
    )
    assert (fixed["status"], fixed["attempts"]) == ("SUCCESS", 2)


@pytest.mark.slow
def test_the_checked_in_trainer_policy_retries_a_step_that_failed_after_40_minutes(tmp_path):
    """A GPU node lost 40 minutes into training: the settings' 30 m window of old let no
    retry start; the window now holds it."""
    settings = settings_with_retries(RAW_SETTINGS["retries"])
    policy = settings.retries.policy_for(dag.TRAINER).spec()
    step = run_long_step(tmp_path, policy, "40m")
    assert (step["status"], step["attempts"]) == ("SUCCESS", 2)
    assert "retry_stopped" not in step
    # The old default, 30 minutes from the first attempt's start: Argo stops there.
    old = {**policy, "backoffMaxDuration": "1800s"}
    step = run_long_step(tmp_path / "old", old, "40m")
    assert (step["status"], step["attempts"]) == ("FAILURE", 1)
    assert step["retry_stopped"] == "Max duration limit exceeded"


@pytest.mark.slow
def test_a_retry_running_past_the_window_is_killed_and_no_other_starts(tmp_path):
    """Window 30 m from the first attempt's start; attempts of 20 m. The retry starts at
    21 m (after its 60 s backoff) and is killed at 30 m; no third attempt starts."""
    policy = {
        "maxRetryCount": 2,
        "backoffDuration": "60s",
        "backoffFactor": 2.0,
        "backoffMaxDuration": "1800s",
    }
    step = run_long_step(tmp_path, policy, "20m")
    assert (step["status"], step["attempts"]) == ("FAILURE", 2)
    assert step["killed_at_retry_deadline"] is True
    assert step["retry_stopped"] == "Max duration limit exceeded"
    assert step["cluster_ended"] - step["cluster_started"] == pytest.approx(1800, abs=1)


@pytest.mark.slow
def test_a_lost_node_is_not_retried_under_the_recommended_setup_and_is_under_always(tmp_path):
    """A node gone without a word while the step writes: its pod is deleted, an Error to
    Argo. With no templateDefaults retryStrategy (the docs' recommended setup) the task's
    OnFailure does not retry it; with `retryPolicy: Always` the step's own retries do."""

    def node_lost(template_retry_policy: str) -> dict:
        return run_one_step(
            tmp_path / template_retry_policy, DEFAULT_RETRY.spec(60), "--lose-node", STEP,
            "--backend-release", "2.17.0", "--template-retry-policy", template_retry_policy,
            writes_outputs=True,
        )  # fmt: skip

    recommended = node_lost("none")
    assert (recommended["status"], recommended["attempts"], recommended["phase"]) == (
        "FAILURE",
        1,
        "Error",
    )
    assert recommended["log_tail"][-1] == "[node lost: pod deleted while writing its outputs]"
    assert recommended["retry_stopped"] == (
        "retryPolicy OnFailure does not retry a node that ended Error"
    )
    always = node_lost("Always")
    assert (always["status"], always["attempts"], always["retry_policy"]) == (
        "SUCCESS",
        2,
        "Always",
    )
    assert always["earlier_log_tails"][0][-1].startswith("[node lost:")


@pytest.mark.slow
def test_a_preempted_attempts_half_written_executor_output_is_not_read(tmp_path):
    """As the backend's launcher, which reads the executor output file only after the
    command succeeded: a step killed while TFX wrote that file is retried, not a crash."""
    step = run_one_step(
        tmp_path, DEFAULT_RETRY.spec(60), "--preempt", STEP, "--template-retry-policy", "none",
        writes_outputs=True,
    )  # fmt: skip
    assert (step["status"], step["attempts"]) == ("SUCCESS", 2)
    assert step["earlier_log_tails"][0][-1] == "[preempted: killed while writing its outputs]"
    assert step["executor_output"] == {}
