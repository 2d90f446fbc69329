"""A local scoring run, from typed options to a committed partition: what `score_runner.py` calls.

    from pipeline.local.score import ScoreOptions, score_local

    result = score_local(ScoreOptions(dataset=spec, schema_file=..., data_root="new/",
                                      serving_dir="out/serving_model", output_dir="scores/",
                                      settings=ScoringSettings(keys=("trip_id",))))

It checks what can be checked before TensorFlow loads (the data root, the
keys among its columns, the served model and its task), holds the output
directory's run lock, and runs `create_scoring_pipeline(...)` with TFX's
launcher per step (pipeline/local/scheduler.py). The DAG's own records
(ML Metadata, the pipeline root) go under OUTPUT_DIR/_pipeline/, which
readers of the scores skip as they skip `_SUCCESS`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.beam import BeamMode

if TYPE_CHECKING:
    from components.scoring.executor import ScoringSettings
    from contract.dataset.spec import DatasetSpec

PIPELINE_DIR = "_pipeline"


class ScoreInputError(ValueError):
    """The scoring run's inputs do not fit together: keys, data, schema and model."""


@dataclass(frozen=True)
class ScoreOptions:
    """One local scoring run, resolved (flags read, dataset directory loaded)."""

    dataset: DatasetSpec
    schema_file: Path
    data_root: str
    serving_dir: str
    output_dir: Path
    settings: ScoringSettings
    model_version: str | None = None
    beam_mode: BeamMode = "auto"
    verbose: bool = False
    write_report: bool = True


@dataclass(frozen=True)
class ScoreSummary:
    status: str  # written, replaced or unchanged
    partition: str
    rows: int
    errors: int
    model_version: str
    model_digest: str
    span: int
    flat: bool = False  # no input pattern: every folder scored is span 0

    def text(self) -> str:
        what = {
            "written": "written",
            "replaced": "replaced (the span's input changed)"
            if not self.flat
            else "replaced (the input changed: without an input pattern every folder is span "
            "0, so another folder's scores in this output directory were replaced; give each "
            "folder its own --output-dir)",
            "unchanged": "unchanged (already scored: same input, same model)",
        }[self.status]
        return (
            f"Scores {what}: {self.rows} rows, {self.errors} errors, span {self.span}, "
            f"model version {self.model_version} (digest {self.model_digest[:12]}) in "
            f"{self.partition}"
        )


def score_local(options: ScoreOptions) -> ScoreSummary:
    """Runs the scoring DAG once; raises with a one-line reason on any failure."""
    from components.example_gen.input_files import left_out_line
    from components.scoring.executor import check_keys
    from components.serving.served_version import choose_version
    from pipeline.inputs import check_data_root
    from pipeline.local.run_lock import RunLock

    spec = options.dataset
    checked = check_data_root(
        options.data_root,
        spec.input.pattern,
        1,
        format=spec.input.format,
        ignore=tuple(c for c in spec.ignore if c not in options.settings.keys),
        skip_unsupported=True,
        columns=spec.scoring_columns(options.settings.keys),
    )
    if line := left_out_line(str(options.data_root), checked.left_out):
        print(line, flush=True)
    missing = [k for k in options.settings.keys if k not in checked.header]
    if missing:
        raise ScoreInputError(
            f"{checked.files[0]} has no key column {', '.join(map(repr, missing))} "
            f"(columns: {', '.join(checked.header)}); pass --key with its id columns"
        )
    model = choose_version(options.serving_dir, options.model_version)
    check_keys(options.settings.keys, model.spec)
    if model.spec.name != spec.name:
        raise ScoreInputError(
            f"the served model (version {model.version}) was trained for {model.spec.name!r}, "
            f"the schema dir is {spec.name!r}'s: pass --schema-dir of the served model's dataset"
        )
    output_dir = options.output_dir.resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    with RunLock(output_dir):
        return _run(options, model.version, output_dir, checked.files, checked.format)


def _run(
    options: ScoreOptions, version: str, output_dir: Path, files, input_format: str
) -> ScoreSummary:
    from ml_metadata.metadata_store import metadata_store
    from tfx.orchestration import metadata as tfx_metadata

    from components import artifact_names
    from pipeline.beam import beam_pipeline_args, choose_beam_mode, data_size_bytes
    from pipeline.local.run import new_run_id
    from pipeline.local.scheduler import run_locally
    from pipeline.scoring_pipeline import create_scoring_pipeline
    from pipeline.steps import SCORING_STEPS

    records = output_dir / PIPELINE_DIR
    connection = tfx_metadata.sqlite_metadata_connection_config(str(records / "metadata.sqlite"))
    records.mkdir(exist_ok=True)
    beam_mode = choose_beam_mode(data_size_bytes(files, input_format), options.beam_mode)
    pipeline = create_scoring_pipeline(
        dataset=options.dataset,
        pipeline_root=str(records / "pipeline_root"),
        data_root=options.data_root,
        schema_path=str(options.schema_file),
        serving_model_dir=os.path.abspath(options.serving_dir)
        if "://" not in options.serving_dir
        else options.serving_dir,
        output_dir=str(output_dir),
        settings=options.settings,
        # Pinned before the run: a push during it does not change which model scores.
        model_version=version,
        beam_pipeline_args=beam_pipeline_args(beam_mode),
        metadata_connection_config=connection,
    )
    print(
        f"Scoring {options.data_root} with model version {version} from {options.serving_dir} "
        f"(keys {', '.join(options.settings.keys)}, {options.settings.output_format}, "
        f"Beam {beam_mode})",
        flush=True,
    )
    run_id = new_run_id()
    try:
        run_locally(pipeline, run_id, uncached=SCORING_STEPS.uncached_ids)
    except Exception as err:
        # A failed run still gets its report: what it was given, and why it stopped.
        if options.write_report:
            write_scoring_run_report(options, connection, run_id, version, output_dir, err)
        raise
    store = metadata_store.MetadataStore(connection)
    scores = max(store.get_artifacts_by_type("InferenceResult"), key=lambda a: a.id)
    props = scores.custom_properties
    partition = props[artifact_names.PARTITION_PROPERTY].string_value
    summary = ScoreSummary(
        status=props[artifact_names.STATUS_PROPERTY].string_value,
        partition=partition,
        rows=props[artifact_names.ROWS_PROPERTY].int_value,
        errors=props[artifact_names.ERRORS_PROPERTY].int_value,
        model_version=props[artifact_names.MODEL_VERSION_PROPERTY].string_value,
        model_digest=props[artifact_names.MODEL_DIGEST_PROPERTY].string_value,
        span=props[artifact_names.SPAN_SCORED_PROPERTY].int_value,
        flat=options.dataset.input.pattern is None,
    )
    print(summary.text(), flush=True)
    if options.write_report:
        write_scoring_run_report(options, connection, run_id, version, output_dir, summary)
    return summary


def write_scoring_run_report(
    options: ScoreOptions,
    connection,
    run_id: str,
    version: str,
    output_dir: Path,
    outcome: ScoreSummary | Exception,
) -> Path | None:
    """Writes OUTPUT_DIR/_reports/<run id>.html and latest.html, and prints where.

    `outcome`: the run's summary, or the error that stopped it; a failed
    scorer's error names its attempt, whose files give the counts. As with the
    training run's report, writing it never changes the run's outcome: a
    failure to write is said on stderr.
    """
    from components.report.scoring_report import build_scoring_report, write_scoring_report
    from components.serving.served_version import choose_version
    from pipeline.local.run import error_text
    from pipeline.scoring_pipeline import scoring_pipeline_name

    pipeline_name = scoring_pipeline_name(options.dataset)
    try:
        summary = outcome if isinstance(outcome, ScoreSummary) else None
        report = build_scoring_report(
            pipeline_name=pipeline_name,
            run_id=run_id,
            model=choose_version(options.serving_dir, version),
            max_error_share=options.settings.max_error_share,
            output_format=options.settings.output_format,
            **_input_of(connection, pipeline_name, run_id),
            status="failed" if summary is None else summary.status,
            partition=None if summary is None else summary.partition,
            error=None if isinstance(outcome, ScoreSummary) else error_text(outcome),
            attempt=getattr(outcome, "attempt", None),
        )
        path = write_scoring_report(report, output_dir)
    except Exception as err:  # Reported, never raised: see the docstring.
        print(f"warning: scoring report not written: {error_text(err)}", file=sys.stderr)
        return None
    print(f"Report: {path}", flush=True)
    return path


def _input_of(connection, pipeline_name: str, run_id: str) -> dict:
    """The span and fingerprint ExampleGen recorded in this run; empty if it did not run."""
    from components.artifact_names import FINGERPRINT_PROPERTY, SPAN_PROPERTY
    from components.report.outputs import property_value
    from pipeline.local.run_summary import artifact_properties, step_outputs
    from pipeline.steps import EXAMPLE_GEN

    try:
        outputs = step_outputs(connection, pipeline_name, run_id, EXAMPLE_GEN)
    except LookupError:
        return {}
    if "examples" not in outputs:
        return {}
    properties = artifact_properties(outputs["examples"])
    span = property_value(properties, SPAN_PROPERTY)
    return {
        "span": None if span is None else int(span),  # type: ignore[call-overload]
        "input_fingerprint": property_value(properties, FINGERPRINT_PROPERTY),
    }
