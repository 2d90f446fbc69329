"""The scoring run's report from what its steps recorded: the ScoringReport exit handler's work.

kubeflow/steps/scoring_report/component.py declares the exit handler for TFX; on
Kubeflow its pod runs `write_scoring_run_report` through kubeflow/light_step.py,
without TFX's entrypoint, TensorFlow, TFMA or Beam (docs/kubeflow.md, "What a
step loads").
"""

from __future__ import annotations

import json

from absl import logging

from components import store_files
from kubeflow.steps.kfp_display import OutputFile, shown_as


def write_scoring_run_report(
    final_status: object,
    pipeline_name: str,
    steps: str,
    task_name: str,
    serving_model_dir: str,
    rolled_out_record: str,
    settings: str,
    report: OutputFile,
) -> None:
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
    from components.report.scoring_report import build_scoring_report, render_scoring_html
    from components.scoring.output import attempt_named_in, version_of
    from components.scoring.settings import ScoringSettings
    from components.serving.served_version import ModelChoiceError, choose_version
    from kubeflow.steps.run_status.executor import ended_run, final_status_dict
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
    store_files.write_text(report.uri, render_scoring_html(contents))
    shown_as(report, "scoring report")
    logging.info(
        "Scoring report: %s; steps: %s", contents.status, json.dumps(states, sort_keys=True)
    )
