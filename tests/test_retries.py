"""Retries on Kubeflow: settings validated with the field named, compiled as kfp writes them."""

from __future__ import annotations

import copy

import pytest
import yaml

from kubeflow import compile as kfp_compile
from kubeflow import tfx_spec
from kubeflow.retries import DEFAULT_RETRY, RetryPolicy
from kubeflow.settings import DEFAULT_SETTINGS_FILE, SettingsError, parse_settings
from pipeline import pipeline as dag

COMPONENT_IDS = kfp_compile.pipeline_component_ids()
ROLES = kfp_compile.pipeline_retry_roles()
RAW_SETTINGS = yaml.safe_load(DEFAULT_SETTINGS_FILE.read_text())


def settings_with_retries(retries):
    raw = copy.deepcopy(RAW_SETTINGS)
    if retries is None:
        raw.pop("retries", None)
    else:
        raw["retries"] = retries
    return parse_settings(raw, COMPONENT_IDS, retry_roles=ROLES)


def test_checked_in_settings_state_the_defaults():
    """The file's `retries:` section is what a file without one gets: the file documents it."""
    checked_in = settings_with_retries(RAW_SETTINGS["retries"]).retries
    absent = settings_with_retries(None).retries
    for step in COMPONENT_IDS:
        assert checked_in.policy_for(step) == absent.policy_for(step), step
    retried = {s for s in COMPONENT_IDS if absent.policy_for(s).max_retries}
    assert retried == {*dag.BEAM_COMPONENT_IDS, dag.TRAINER}
    assert absent.policy_for(dag.TRAINER) == DEFAULT_RETRY


def test_compiled_retry_policy_is_kfps_set_retry_form():
    assert RetryPolicy(
        max_retries=3, backoff="5m", backoff_factor=1.5, backoff_max="2h"
    ).spec() == {
        "maxRetryCount": 3,
        "backoffDuration": "300s",
        "backoffFactor": 1.5,
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
    assert retries.policy_for(dag.TRAINER) == RetryPolicy(4, "10s", 2.0, "3600s")
    assert retries.policy_for(dag.PUSHER) == RetryPolicy(1, "10s", 2.0, "3600s")
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
    assert tasks[dag.RUN_STATUS]["retryPolicy"]["maxRetryCount"] == 1
    for gate in dag.NEVER_RETRIED:
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
            {"defaults": {"backoff": "10m", "backoff_max": "5m"}},
            r"^retries.defaults.backoff_max: 5m is shorter than backoff 10m",
        ),
        (
            {"defaults": {"backoff_factor": 0.5}},
            r"^retries.defaults.backoff_factor: must be a number >= 1",
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


def test_without_roles_no_step_retries_by_default():
    """The submit tool knows task ids only; nothing it reads depends on retries."""
    raw = copy.deepcopy(RAW_SETTINGS)
    raw.pop("retries")
    retries = parse_settings(raw, COMPONENT_IDS).retries
    assert all(retries.policy_for(s).max_retries == 0 for s in COMPONENT_IDS)
