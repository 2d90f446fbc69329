"""The ids of the steps only Kubeflow packages have, and every id a settings file may
name, importable without TFX: `kubeflow.submit` reads the settings in the current-KFP
environment, which has no TFX."""

from __future__ import annotations

from pipeline.steps import DAG_STEPS, SCORING_STEPS

INPUT_SNAPSHOT = "InputSnapshot"
DEPLOY = "Deploy"
RUN_REPORT = "RunReport"
# The exit handler: not one of the DAG's steps, but a task of the spec's root.
RUN_STATUS = "RunStatus"
# The scoring package's exit handler (kubeflow/steps/scoring_report/component.py).
SCORING_REPORT = "ScoringReport"
# The tuning package's search (kubeflow/tuning/).
TUNE = "Tune"


def settings_step_ids() -> set[str]:
    """The steps of the three packages (training, scoring, tuning): one
    kubeflow/pipeline.yaml serves them all, and each package applies the
    entries of its own steps. An id in none of them is refused."""
    return (
        set(DAG_STEPS.ids)
        | set(SCORING_STEPS.ids)
        | {INPUT_SNAPSHOT, DEPLOY, RUN_REPORT, RUN_STATUS, SCORING_REPORT, TUNE}
    )
