"""Argo's retry rules as run_compiled.py plays them (kubeflow/standin_harness/argo_retry.py).

Each case is a rule read in argo-workflows v4.0.5 and kubeflow/pipelines
2.17.0, cited in the module; the executed tests then run on these rules.
"""

from __future__ import annotations

import pytest

from kubeflow.settings.retries import DEFAULT_RETRY
from kubeflow.standin_harness import argo_retry as argo

TRAINER_POLICY = {
    "maxRetryCount": 2,
    "backoffDuration": "60s",
    "backoffFactor": 2.0,
    "backoffMaxDuration": "1800s",
}
STOCK_2_17 = argo.stock_template_defaults((2, 17, 0))


def test_stock_defaults_change_at_2_17():
    assert argo.stock_template_defaults((2, 16, 1)) is None
    assert argo.TemplateDefaults(limit=2, retry_policy=argo.ON_ERROR) == STOCK_2_17
    assert argo.stock_template_defaults((2, 18, 2)) == STOCK_2_17


def test_a_task_policy_sets_no_retry_policy_so_the_defaults_decide_it():
    # A limit other than the defaults' 2, so that the side the merge takes it from shows.
    policy = {**TRAINER_POLICY, "maxRetryCount": 3}
    before = argo.RetryStrategy.for_task(policy, argo.stock_template_defaults((2, 16, 0)))
    after = argo.RetryStrategy.for_task(policy, STOCK_2_17)
    assert (before.retry_policy, before.limit) == (argo.ON_FAILURE, 3)
    # The template's own limit wins the merge; the policy comes from the defaults.
    assert STOCK_2_17.limit == 2
    assert (after.retry_policy, after.limit) == (argo.ON_ERROR, 3)
    assert argo.RetryStrategy.for_task(None, None) is None
    defaults_only = argo.RetryStrategy.for_task(None, STOCK_2_17)
    assert (defaults_only.limit, defaults_only.factor, defaults_only.backoff_seconds) == (
        2,
        None,
        0.0,
    )


@pytest.mark.parametrize(
    ("policy", "failed", "error"),
    [
        (argo.ON_FAILURE, True, False),
        (argo.ON_ERROR, False, True),
        (argo.ALWAYS, True, True),
        (argo.ON_TRANSIENT_ERROR, False, False),
    ],
)
def test_which_phase_each_policy_retries(policy, failed, error):
    assert argo.retries(policy, argo.FAILED) is failed
    assert argo.retries(policy, argo.ERROR) is error


def test_an_unknown_policy_is_refused_as_argo_refuses_it():
    with pytest.raises(ValueError, match="OnSuccess is not a valid RetryPolicy"):
        argo.retries("OnSuccess", argo.FAILED)


def test_stock_2_17_does_not_retry_a_failed_step_but_2_16_does():
    """A step that exits non-zero (or whose node shut down) is Failed to Argo."""
    for defaults, refusal in (
        (None, None),
        (STOCK_2_17, "retryPolicy OnError does not retry a node that ended Failed"),
    ):
        strategy = argo.RetryStrategy.for_task(TRAINER_POLICY, defaults)
        assert strategy.refusal(2, 0.0, 10.0, 10.0, argo.FAILED) == refusal
    # A pod that never started (a missing secret key) is Error: 2.17's default retries it.
    stock = argo.RetryStrategy.for_task(TRAINER_POLICY, STOCK_2_17)
    assert stock.refusal(2, 0.0, 10.0, 10.0, argo.ERROR) is None


# Where the docs say a lost node's step is retried (docs/kubeflow-operations.md): the
# recommended setup (no templateDefaults retryStrategy) does not, stock 2.17+ and the
# `limit: '0'` + `Always` setup do.
RECOMMENDED = None
ALWAYS_LIMIT_0 = argo.TemplateDefaults(limit=0, retry_policy=argo.ALWAYS)


@pytest.mark.parametrize(
    ("defaults", "refusal"),
    [
        (RECOMMENDED, "retryPolicy OnFailure does not retry a node that ended Error"),
        (STOCK_2_17, None),
        (ALWAYS_LIMIT_0, None),
    ],
    ids=["recommended", "stock-2.17", "always-limit-0"],
)
def test_a_step_whose_pod_was_deleted_with_its_node_is_retried_where_error_is(defaults, refusal):
    """A lost node's pod is deleted: Argo ends the attempt Error ("pod deleted"), which
    OnFailure, the policy with no templateDefaults, does not retry."""
    strategy = argo.RetryStrategy.for_task(TRAINER_POLICY, defaults)
    assert strategy.refusal(2, 0.0, 10.0, 10.0, argo.ERROR) == refusal
    # A node's graceful shutdown instead: Failed, retried under the recommended setup.
    shut_down = strategy.refusal(2, 0.0, 10.0, 10.0, argo.FAILED)
    assert (shut_down is None) == (defaults is not STOCK_2_17)


def test_backoff_grows_by_the_whole_factor_and_is_not_capped():
    strategy = argo.RetryStrategy.for_task({**TRAINER_POLICY, "backoffMaxDuration": None}, None)
    assert [strategy.wait_before(n) for n in (2, 3, 4)] == [60.0, 120.0, 240.0]


def test_a_fractional_factor_is_an_error_at_the_first_retry():
    """KFP hands the factor over as the float's text; Argo reads it as an integer."""
    strategy = argo.RetryStrategy.for_task({**TRAINER_POLICY, "backoffFactor": 1.5}, None)
    assert strategy.factor == "1.5"
    assert strategy.refusal(2, 0.0, 10.0, 10.0, argo.FAILED) == (
        "value '1.5' cannot be resolved to an int"
    )
    # The template's default factor compiles to "2", which Argo reads.
    assert argo.RetryStrategy.for_task(DEFAULT_RETRY.spec(), None).factor == "2"


def test_the_window_closes_from_the_first_attempt_start():
    strategy = argo.RetryStrategy.for_task(TRAINER_POLICY, None)
    # 40 minutes into the first attempt: past the 30-minute window.
    assert strategy.refusal(2, 0.0, 2400.0, 2400.0, argo.FAILED) == argo.MAX_DURATION_EXCEEDED
    # Ended at 29.5 minutes; the 60 s backoff would end after the window.
    assert (
        strategy.refusal(2, 0.0, 1770.0, 1770.0, argo.FAILED) == argo.BACKOFF_EXCEEDS_MAX_DURATION
    )
    assert strategy.refusal(2, 0.0, 600.0, 600.0, argo.FAILED) is None


def test_no_retry_past_the_limit():
    strategy = argo.RetryStrategy.for_task({**TRAINER_POLICY, "backoffMaxDuration": None}, None)
    assert strategy.refusal(3, 0.0, 10.0, 10.0, argo.FAILED) is None
    assert strategy.refusal(4, 0.0, 10.0, 10.0, argo.FAILED) == argo.NO_RETRIES_LEFT


def test_releases_parse_as_the_api_server_reports_them():
    assert argo.parse_release("v2.17.0") == (2, 17, 0)
    assert argo.parse_release("2.16") == (2, 16, 0)
    with pytest.raises(ValueError, match="not a release"):
        argo.parse_release("latest")
