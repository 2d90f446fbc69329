"""The trial budget of a resumed search counts completed trials (issue 61, item 8:
`tune --max-trials 3` on a search of 12 ran one more)."""

from __future__ import annotations

import keras_tuner

from trainer.tuning import BudgetedOracle


def oracle(directory, max_trials: int) -> BudgetedOracle:
    found = BudgetedOracle(
        objective=keras_tuner.Objective("val_loss", "min"), max_trials=max_trials, seed=0
    )
    hp = keras_tuner.HyperParameters()
    hp.Int("units", 1, 1000)
    found._set_project_dir(str(directory), "search")
    found.hyperparameters = hp
    return found


def test_a_search_resumed_with_a_smaller_budget_starts_no_trial_beyond_it(tmp_path):
    """Three trials completed and a fourth cut off (a search of 12 killed); resumed with
    --max-trials 3, no trial starts: KerasTuner's retry queue would run the fourth."""
    first = oracle(tmp_path, max_trials=12)
    for _ in range(3):
        trial = first.create_trial("tuner0")
        first.update_trial(trial.trial_id, {"val_loss": 1.0})
        trial.status = "COMPLETED"  # as KerasTuner's tuner ends a trial that ran
        first.end_trial(trial)
    cut_off = first.create_trial("tuner0")
    assert cut_off.status == "RUNNING"
    first.save()

    resumed = oracle(tmp_path, max_trials=3)
    resumed.reload()
    assert resumed.create_trial("tuner0").status == "STOPPED"
    # Under the budget, the cut-off trial is run again, as before.
    again = oracle(tmp_path, max_trials=5)
    again.reload()
    assert again.create_trial("tuner0").trial_id == cut_off.trial_id
