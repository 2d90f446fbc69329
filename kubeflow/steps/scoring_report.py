"""The scoring package's report: the local scoring report's page, for every run, failed ones too.

An exit handler, as the training package's RunStatus is
(kubeflow/steps/run_status.py): KFP starts it after the scoring DAG has
ended, however it ended, and it takes no artifacts. It reads what the steps
recorded of themselves (kubeflow/steps/step_records.py): ExampleGen's
examples (span, input fingerprint) and BatchScorer's `scores` (status,
partition). The page is the one a local scoring run writes
(components/report/scoring.py): rows and errors read from the committed
partition, or from the uncommitted attempt a failed scorer's error names;
the version and digest; the score distribution beside the served model's
eval distribution. A run stopped before scoring says which step failed and
why, with the counts not known.

The model: the scorer's own, from its `scores` artifact when it succeeded,
or from the path of the attempt its error names. A run stopped before the
scorer wrote anything shows the served version (the rollout record's, else
the newest), chosen again here, and not a pinned `model_version`: TFX 1.16's
Kubeflow V2 compiler hands runtime parameters to the DAG's steps only
(`attach_parameter() must run under ParameterContext` for an exit handler).

Its output is a `system.HTML` page, shown in the step's Visualization tab.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

import json

from absl import logging
from tfx.dsl.component.experimental.annotations import OutputArtifact, Parameter
from tfx.orchestration.kubeflow.decorators import exit_handler
from tfx.utils import io_utils

from kubeflow.steps.kfp_artifacts import HTML
from kubeflow.steps.kfp_display import shown_as


@exit_handler
def ScoringReport(
    final_status: Parameter[str],
    pipeline_name: Parameter[str],
    steps: Parameter[str],
    task_name: Parameter[str],
    serving_model_dir: Parameter[str],
    rolled_out_record: Parameter[str],
    settings: Parameter[str],
    report: OutputArtifact[HTML],
):
    """Writes the scoring run's report at `report`.

    `steps` is the DAG as JSON, `{"order": [ids], "upstream": {id: [ids]}}`;
    `task_name` is this step's own task name, which locates the run's
    directory in its output URI; the other parameters are the scorer's.
    """
    from components.artifact_names import (
        FINGERPRINT_PROPERTY,
        MODEL_VERSION_PROPERTY,
        PARTITION_PROPERTY,
        SPAN_PROPERTY,
        STATUS_PROPERTY,
    )
    from components.report.outputs import property_value
    from components.report.scoring import build_scoring_report, render_scoring_html
    from components.scored_output import attempt_named_in, version_of
    from components.scoring import ScoringSettings
    from components.served_version import ModelChoiceError, choose_version
    from kubeflow.steps.status_report import ended_run, final_status_dict
    from pipeline.steps import BATCH_SCORER, EXAMPLE_GEN

    ended = ended_run(report.uri, task_name, json.loads(steps), final_status_dict(final_status))
    run_dir, records, states, error = ended.run_dir, ended.records, ended.states, ended.error

    def output(step: str, key: str):
        found = records[step].output(key) if states.get(step) == "succeeded" else None
        return None if found is None else found.metadata

    examples, scores = output(EXAMPLE_GEN, "examples"), output(BATCH_SCORER, "scores")
    attempt = (
        attempt_named_in(records[BATCH_SCORER].last.error or "")
        if states.get(BATCH_SCORER) == "failed"
        else None
    )
    scored_version: str | None = None
    if scores is not None:
        scored_version = str(property_value(scores, MODEL_VERSION_PROPERTY))
    elif attempt is not None:
        scored_version = version_of(attempt)
    try:
        model = choose_version(serving_model_dir, scored_version, rolled_out_record or None)
    except ModelChoiceError as err:
        model = None
        error = error or str(err)
    span = None if examples is None else property_value(examples, SPAN_PROPERTY)
    scoring = ScoringSettings.from_json(settings)
    contents = build_scoring_report(
        pipeline_name=pipeline_name,
        run_id=run_dir or report.uri,
        model=model,
        max_error_share=scoring.max_error_share,
        output_format=scoring.output_format,
        status="failed"
        if error or scores is None
        else str(property_value(scores, STATUS_PROPERTY)),
        span=None if span is None else int(span),  # type: ignore[call-overload]
        input_fingerprint=None
        if examples is None
        else str(property_value(examples, FINGERPRINT_PROPERTY)),
        partition=None
        if error or scores is None
        else str(property_value(scores, PARTITION_PROPERTY)),
        error=error,
        attempt=attempt,
    )
    io_utils.write_string_file(report.uri, render_scoring_html(contents))
    shown_as(report, "scoring report")
    logging.info(
        "Scoring report: %s; steps: %s", contents.status, json.dumps(states, sort_keys=True)
    )
