"""The run report as the last step of a Kubeflow run, written into an output artifact.

Locally, `local_runner.py` writes the report after the run from ML Metadata,
which also covers failed runs. A Kubeflow step cannot read KFP's metadata
store, so on Kubeflow this step builds the same report from the artifacts it
is handed: the examples' spans, statistics, anomalies, the drift check, the
Trainer's logs, the evaluation, the blessing and the push. It runs after
every other step has succeeded, so each of them is listed as complete;
per-step times are on the KFP run page.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

import json
import os

from absl import logging
from tfx import types
from tfx.dsl.component.experimental.annotations import (
    InputArtifact,
    OutputArtifact,
    Parameter,
)
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import standard_artifacts

from components.drift_gate import DataDrift
from components.example_gen import (
    FINGERPRINT_PROPERTY,
    SPAN_PROPERTY,
    SPANS_PROPERTY,
    VERSION_PROPERTY,
)
from components.pusher import (
    ALREADY_SERVED_PROPERTY,
    PUSHED_DESTINATION_PROPERTY,
    PUSHED_PROPERTY,
)
from components.served_model import SERVED_PATH_PROPERTY, is_served_baseline

REPORT_FILE = "report.html"


class RunReportHtml(types.Artifact):
    """A directory holding `report.html`, one self-contained HTML page."""

    # TFX's Kubeflow V2 compiler writes TYPE_NAME as the schema title, which
    # must be `<namespace>.<Title>`; its container entrypoint imports the class
    # back from that title. So it is an import path: `components` exports this
    # class. (`tfx_template.RunReportHtml` compiled, and then the step failed
    # when the compiled spec was executed: kubeflow/reference/run_compiled.py.)
    TYPE_NAME = "components.RunReportHtml"


def _int_property(artifact: types.Artifact, name: str) -> "int | None":
    return artifact.get_int_custom_property(name) if artifact.has_custom_property(name) else None


def _string_property(artifact: types.Artifact, name: str) -> "str | None":
    return artifact.get_string_custom_property(name) if artifact.has_custom_property(name) else None


def _input_data(examples: types.Artifact):
    """The report's InputData from what ExampleGen recorded on `examples`."""
    from components.report.contents import InputData

    return InputData.from_properties(
        {
            SPAN_PROPERTY: _int_property(examples, SPAN_PROPERTY),
            VERSION_PROPERTY: _int_property(examples, VERSION_PROPERTY),
            SPANS_PROPERTY: _string_property(examples, SPANS_PROPERTY),
            FINGERPRINT_PROPERTY: _string_property(examples, FINGERPRINT_PROPERTY),
        }
    )


@component
def RunReport(
    examples: InputArtifact[standard_artifacts.Examples],
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
    drift: InputArtifact[DataDrift],
    model_run: InputArtifact[standard_artifacts.ModelRun],
    evaluation: InputArtifact[standard_artifacts.ModelEvaluation],
    blessing: InputArtifact[standard_artifacts.ModelBlessing],
    baseline_model: InputArtifact[standard_artifacts.Model],
    pushed_model: InputArtifact[standard_artifacts.PushedModel],
    report: OutputArtifact[RunReportHtml],
    pipeline_name: Parameter[str],
    component_ids: Parameter[str],
):
    """Writes `report.html` into `report` from the run's artifacts."""
    # Here, not at the top: the report's plotting imports are for this step only.
    from components.report import contents as report_contents
    from components.report.render import render_html

    pushed = _int_property(pushed_model, PUSHED_PROPERTY) == 1
    contents = report_contents.RunReport(
        pipeline_name=pipeline_name,
        # A Kubeflow step does not see its run's id; its output directory is unique per run.
        run_id=os.path.dirname(report.uri.rstrip("/")),
        components=tuple(
            report_contents.ComponentRun(node, "succeeded") for node in json.loads(component_ids)
        ),
        input=_input_data(examples),
        blessed=_int_property(blessing, "blessed") == 1,
        baseline_path=_string_property(baseline_model, SERVED_PATH_PROPERTY)
        if is_served_baseline(baseline_model)
        else None,
        pushed_destination=_string_property(pushed_model, PUSHED_DESTINATION_PROPERTY)
        if pushed
        else None,
        already_served_path=_string_property(pushed_model, ALREADY_SERVED_PROPERTY),
        notes=(
            "Written by the RunReport step after every other step succeeded; "
            "step times are on the Kubeflow run page.",
        ),
        **report_contents.read_artifacts(
            report_contents.ArtifactUris(
                statistics=statistics.uri,
                anomalies=anomalies.uri,
                drift=drift.uri,
                model_run=model_run.uri,
                evaluation=evaluation.uri,
            )
        ),
    )
    html = render_html(contents)
    fileio.makedirs(report.uri)
    path = os.path.join(report.uri, REPORT_FILE)
    with fileio.open(path, "w") as f:
        f.write(html)
    logging.info("Run report: %s (%d bytes)", path, len(html))
