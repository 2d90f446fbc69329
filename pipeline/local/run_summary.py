"""What a finished run did, read back from ML Metadata as its `RunReport`.

Used by `local_runner.py` for its closing summary (`summary_text`) and its
HTML report, and by the benchmark for per-step timings, so each shows
exactly what TFX recorded. Each report field's artifact is the output that
the step registry names for it (`DAG_STEPS.report_outputs`,
pipeline/steps.py), as on Kubeflow.
"""

from __future__ import annotations

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.report.contents import RunReport, StepRun
from components.report.outputs import RunOutputs, report_fields
from components.serving.serving_dir import describe_signatures
from pipeline.steps import DAG_STEPS

_STATE_NAMES = {
    metadata_store_pb2.Execution.COMPLETE: "complete",
    metadata_store_pb2.Execution.CACHED: "cached",
    metadata_store_pb2.Execution.FAILED: "failed",
    metadata_store_pb2.Execution.RUNNING: "running",
    metadata_store_pb2.Execution.CANCELED: "canceled",
}
# The report fields the closing summary shows; the HTML report reads them all
# (statistics, anomalies and the Trainer's logs too).
_SUMMARY_FIELDS = frozenset({"examples", "drift", "evaluation", "blessing", "baseline", "pushed"})
_OUTPUT_EVENTS = (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)


def summary_text(report: RunReport) -> str:
    """The lines a local run ends with: each step, the input, drift, evaluation and push."""
    lines = [f"Run {report.run_id}"]
    lines += [f"  {s.step_id:<28} {s.state:<9} {s.seconds or 0.0:6.1f} s" for s in report.steps]
    if report.input is not None and report.input.spans:
        spans = ", ".join(map(str, report.input.spans))
        version = f", version {report.input.version}" if report.input.version is not None else ""
        lines.append(f"Input: span{'s' if len(report.input.spans) > 1 else ''} {spans}{version}")
        if report.input.left_out:
            lines.append(f"  {report.input.left_out}")
    if report.drift is not None:
        if report.drift.note:
            lines.append(f"Drift: {report.drift.note}")
        if report.drift.comparisons:
            drifted = [c for c in report.drift.comparisons if c.drifted]
            lines.append(
                f"Drift vs. served model {report.drift.baseline_version}'s training data: "
                f"{len(report.drift.comparisons) - len(drifted)} of "
                f"{len(report.drift.comparisons)} features within their thresholds"
            )
            lines += [f"  {c.status}: {c.describe()}" for c in drifted]
    if report.metrics:
        shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted(report.metrics.items()))
        lines.append(f"Evaluation (eval split): {shown}")
    lines.append(
        f"Baseline: model served at {report.baseline_path}"
        if report.baseline_path is not None
        else "Baseline: none (nothing served yet; absolute thresholds only)"
    )
    if report.blessed is None:
        lines.append("Blessing: not evaluated")
    else:
        lines.append(f"Blessing: {'BLESSED' if report.blessed else 'NOT BLESSED'}")
    lines += [f"  failed: {t.describe()}" for t in report.failed_thresholds]
    if report.pushed_destination:
        lines.append(f"Pushed model: {report.pushed_destination}")
        if report.signatures:
            lines.append(f"  signatures: {describe_signatures(report.signatures)}")
    elif report.already_served_path:
        lines.append(
            "Pushed model: none (the candidate is the model already served at "
            f"{report.already_served_path}; no duplicate version)"
        )
    else:
        lines.append("Pushed model: none (serving directory untouched)")
    return "\n".join(lines)


def _property_value(value: metadata_store_pb2.Value) -> object:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def artifact_properties(artifact: metadata_store_pb2.Artifact) -> dict[str, object]:
    """An artifact's properties and custom properties, as plain values."""
    return {
        name: _property_value(value)
        for properties in (artifact.properties, artifact.custom_properties)
        for name, value in properties.items()
    }


def _step_contexts(store: metadata_store.MetadataStore, pipeline_name: str) -> dict[int, str]:
    """Context id -> step id, for the steps of `pipeline_name` (TFX's "node" contexts)."""
    prefix = f"{pipeline_name}."
    return {
        c.id: c.name[len(prefix) :]
        for c in store.get_contexts_by_type("node")
        if c.name.startswith(prefix)
    }


def _step_id(store, execution, steps: dict[int, str]) -> str | None:
    for context in store.get_contexts_by_execution(execution.id):
        if context.id in steps:
            return steps[context.id]
    return None


def latest_run_id(
    connection_config: metadata_store_pb2.ConnectionConfig, pipeline_name: str
) -> str:
    """The newest run of `pipeline_name`, for a store this process did not run itself."""
    store = metadata_store.MetadataStore(connection_config)
    steps = _step_contexts(store, pipeline_name)
    for run in sorted(
        store.get_contexts_by_type("pipeline_run"),
        key=lambda c: c.create_time_since_epoch,
        reverse=True,
    ):
        executions = store.get_executions_by_context(run.id)
        if executions and _step_id(store, executions[0], steps) is not None:
            return run.name
    raise LookupError(f"no runs of pipeline {pipeline_name!r} in the metadata store")


def summarize_latest_run(
    connection_config: metadata_store_pb2.ConnectionConfig,
    pipeline_name: str,
    *,
    sections: bool = False,
) -> RunReport:
    """Summarizes the most recent run of `pipeline_name` in the metadata store."""
    return summarize_run(
        connection_config,
        pipeline_name,
        latest_run_id(connection_config, pipeline_name),
        sections=sections,
    )


def summarize_run(
    connection_config: metadata_store_pb2.ConnectionConfig,
    pipeline_name: str,
    run_id: str,
    *,
    sections: bool = False,
) -> RunReport:
    """Summarizes the run `run_id` of `pipeline_name`: the run a process started itself.

    Keyed on the run id, never on "the latest run", so a summary describes its
    own run even when another run wrote to the same store meanwhile. It reads
    what `summary_text` shows; with `sections`, every section of the HTML
    report too.
    """
    store = metadata_store.MetadataStore(connection_config)
    steps = _step_contexts(store, pipeline_name)

    run = store.get_context_by_type_and_name("pipeline_run", run_id)
    if run is None:
        raise LookupError(f"no run {run_id!r} in the metadata store")
    # One MLMD query per execution: look each step up once.
    run_executions = store.get_executions_by_context(run.id)
    step_of = {
        e.id: step for e in run_executions if (step := _step_id(store, e, steps)) is not None
    }
    if not step_of:
        raise LookupError(f"run {run_id!r} has no executions of pipeline {pipeline_name!r}")
    executions = sorted(
        (e for e in run_executions if e.id in step_of), key=lambda e: e.create_time_since_epoch
    )

    # The artifact of each report field: the output its step and key name.
    field_of = {source: field for field, source in DAG_STEPS.report_outputs.items()}
    wanted: dict[int, str] = {}
    for event in store.get_events_by_execution_ids(list(step_of)):
        if event.type not in _OUTPUT_EVENTS or not event.path.steps:
            continue
        field = field_of.get((step_of[event.execution_id], event.path.steps[0].key))
        if field is not None and (sections or field in _SUMMARY_FIELDS):
            wanted[event.artifact_id] = field
    found = {
        wanted[a.id]: (a.uri, artifact_properties(a))
        for a in store.get_artifacts_by_id(list(wanted))
    }
    return RunReport(
        pipeline_name=pipeline_name,
        run_id=run.name,
        steps=tuple(
            StepRun(
                step_of[e.id],
                _STATE_NAMES.get(e.last_known_state, "unknown"),
                started_ms=e.create_time_since_epoch,
                ended_ms=e.last_update_time_since_epoch,
            )
            for e in executions
        ),
        **report_fields(RunOutputs.from_artifacts(found)),
    )


def step_outputs(
    connection_config: metadata_store_pb2.ConnectionConfig,
    pipeline_name: str,
    run_id: str,
    step_id: str,
) -> dict[str, metadata_store_pb2.Artifact]:
    """Output key -> artifact of step `step_id` in run `run_id` (run or served from cache)."""
    store = metadata_store.MetadataStore(connection_config)
    steps = _step_contexts(store, pipeline_name)
    run = store.get_context_by_type_and_name("pipeline_run", run_id)
    if run is None:
        raise LookupError(f"no run {run_id!r} in the metadata store")
    executions = [
        e.id
        for e in store.get_executions_by_context(run.id)
        if _step_id(store, e, steps) == step_id
    ]
    if not executions:
        raise LookupError(f"run {run_id!r} has no {step_id} step")
    keys = {
        event.artifact_id: event.path.steps[0].key
        for event in store.get_events_by_execution_ids(executions)
        if event.type in _OUTPUT_EVENTS and event.path.steps
    }
    return {keys[a.id]: a for a in store.get_artifacts_by_id(list(keys))}
