"""What a finished run did, read back from ML Metadata.

Used by `local_runner.py` for its closing summary and by the benchmark for
per-component timings, so both report exactly what TFX recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tensorflow_model_analysis as tfma
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.types.standard_component_specs import BASELINE_MODEL_KEY

from components.drift_gate import DataDrift, DriftResult, read_result
from components.pusher import (
    ALREADY_SERVED_PROPERTY,
    PUSHED_DESTINATION_PROPERTY,
    PUSHED_PROPERTY,
)
from components.report.contents import (
    ArtifactUris,
    ComponentRun,
    InputData,
    RunReport,
    read_artifacts,
)
from components.served_model import (
    HAS_MODEL_PROPERTY,
    SERVED_PATH_PROPERTY,
    describe_signatures,
    serving_signatures,
)

_STATE_NAMES = {
    metadata_store_pb2.Execution.COMPLETE: "complete",
    metadata_store_pb2.Execution.CACHED: "cached",
    metadata_store_pb2.Execution.FAILED: "failed",
    metadata_store_pb2.Execution.RUNNING: "running",
    metadata_store_pb2.Execution.CANCELED: "canceled",
}

# MLMD artifact type -> the ArtifactUris field the run report reads it from.
_REPORTED_ARTIFACT_TYPES = {
    "ExampleStatistics": "statistics",
    "ExampleAnomalies": "anomalies",
    "ModelRun": "model_run",
    "ModelEvaluation": "evaluation",
}


@dataclass
class RunSummary:
    run_id: str
    components: list[ComponentRun] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    validation_failures: list[str] = field(default_factory=list)
    has_baseline: bool = False
    baseline_path: str | None = None
    blessed: bool | None = None
    pushed_destination: str | None = None
    already_served_path: str | None = None
    signatures: tuple[tuple[str, tuple[str, ...]], ...] = ()
    pipeline_name: str = ""
    artifact_uris: ArtifactUris = field(default_factory=ArtifactUris)
    input: InputData | None = None
    drift: DriftResult | None = None

    def format(self) -> str:
        lines = [f"Run {self.run_id}"]
        lines += [
            f"  {c.node_id:<28} {c.state:<9} {c.seconds or 0.0:6.1f} s" for c in self.components
        ]
        if self.input is not None and self.input.spans:
            spans = ", ".join(map(str, self.input.spans))
            version = f", version {self.input.version}" if self.input.version is not None else ""
            lines.append(f"Input: span{'s' if len(self.input.spans) > 1 else ''} {spans}{version}")
        if self.drift is not None:
            if self.drift.note:
                lines.append(f"Drift: {self.drift.note}")
            if self.drift.comparisons:
                drifted = [c for c in self.drift.comparisons if c.drifted]
                lines.append(
                    f"Drift vs. served model {self.drift.baseline_version}'s training data: "
                    f"{len(self.drift.comparisons) - len(drifted)} of "
                    f"{len(self.drift.comparisons)} features within their thresholds"
                )
                lines += [f"  {c.status}: {c.describe()}" for c in drifted]
        if self.metrics:
            shown = ", ".join(f"{k} {v:.4f}" for k, v in sorted(self.metrics.items()))
            lines.append(f"Evaluation (eval split): {shown}")
        lines.append(
            f"Baseline: model served at {self.baseline_path}"
            if self.has_baseline
            else "Baseline: none (nothing served yet; absolute thresholds only)"
        )
        if self.blessed is None:
            lines.append("Blessing: not evaluated")
        else:
            lines.append(f"Blessing: {'BLESSED' if self.blessed else 'NOT BLESSED'}")
        lines += [f"  failed: {f}" for f in self.validation_failures]
        if self.pushed_destination:
            lines.append(f"Pushed model: {self.pushed_destination}")
            if self.signatures:
                lines.append(f"  signatures: {describe_signatures(self.signatures)}")
        elif self.already_served_path:
            lines.append(
                "Pushed model: none (the candidate is the model already served at "
                f"{self.already_served_path}; no duplicate version)"
            )
        else:
            lines.append("Pushed model: none (serving directory untouched)")
        return "\n".join(lines)

    def report(
        self, *, expected_nodes: tuple[str, ...] = (), error: str | None = None
    ) -> RunReport:
        """The run report: this summary plus what the run's artifacts hold.

        Nodes in `expected_nodes` with no execution in this run (a failure
        stopped the DAG before them) are listed as "not run".
        """
        ran = {c.node_id for c in self.components}
        components = tuple(self.components) + tuple(
            ComponentRun(node, "not run") for node in expected_nodes if node not in ran
        )
        return RunReport(
            pipeline_name=self.pipeline_name,
            run_id=self.run_id,
            components=components,
            input=self.input,
            drift=self.drift,  # read once, from the gate's artifact, for the summary too
            blessed=self.blessed,
            baseline_path=self.baseline_path if self.has_baseline else None,
            pushed_destination=self.pushed_destination,
            already_served_path=self.already_served_path,
            signatures=self.signatures,
            error=error,
            **read_artifacts(self.artifact_uris),
        )


def _property_value(value: metadata_store_pb2.Value) -> object:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _overall_metrics(evaluation_uri: str) -> dict[str, float]:
    result = tfma.load_eval_result(evaluation_uri)
    for slice_key, metrics in result.slicing_metrics:
        if slice_key == ():
            values = {}
            for _output, by_class in metrics.items():
                for sub_key, by_name in by_class.items():
                    # Per-class metrics (multiclass) come under "classId:N".
                    suffix = f" (class {sub_key.removeprefix('classId:')})" if sub_key else ""
                    for name, value in by_name.items():
                        if "doubleValue" in value:
                            values[name + suffix] = float(value["doubleValue"])
            return values
    return {}


def _validation_failures(evaluation_uri: str) -> list[str]:
    validation = tfma.load_validation_result(evaluation_uri)
    failures = []
    for per_slice in validation.metric_validations_per_slice:
        for failure in per_slice.failures:
            threshold = failure.metric_threshold
            kind = "change vs. baseline" if threshold.HasField("change_threshold") else "value"
            failures.append(
                f"{failure.metric_key.name}"
                f"{' (diff)' if failure.metric_key.is_diff else ''}"
                f" = {failure.metric_value.double_value.value:.4f} breaks the {kind} threshold"
            )
    return failures


def _node_contexts(store: metadata_store.MetadataStore, pipeline_name: str) -> dict[int, str]:
    """Context id -> node id, for the nodes of `pipeline_name`."""
    prefix = f"{pipeline_name}."
    return {
        c.id: c.name[len(prefix) :]
        for c in store.get_contexts_by_type("node")
        if c.name.startswith(prefix)
    }


def _node_id(store, execution, nodes: dict[int, str]) -> str | None:
    for context in store.get_contexts_by_execution(execution.id):
        if context.id in nodes:
            return nodes[context.id]
    return None


def latest_run_id(
    connection_config: metadata_store_pb2.ConnectionConfig, pipeline_name: str
) -> str:
    """The newest run of `pipeline_name`, for a store this process did not run itself."""
    store = metadata_store.MetadataStore(connection_config)
    nodes = _node_contexts(store, pipeline_name)
    for run in sorted(
        store.get_contexts_by_type("pipeline_run"),
        key=lambda c: c.create_time_since_epoch,
        reverse=True,
    ):
        executions = store.get_executions_by_context(run.id)
        if executions and _node_id(store, executions[0], nodes) is not None:
            return run.name
    raise LookupError(f"no runs of pipeline {pipeline_name!r} in the metadata store")


def summarize_latest_run(
    connection_config: metadata_store_pb2.ConnectionConfig, pipeline_name: str
) -> RunSummary:
    """Summarizes the most recent run of `pipeline_name` in the metadata store."""
    return summarize_run(
        connection_config, pipeline_name, latest_run_id(connection_config, pipeline_name)
    )


def summarize_run(
    connection_config: metadata_store_pb2.ConnectionConfig, pipeline_name: str, run_id: str
) -> RunSummary:
    """Summarizes the run `run_id` of `pipeline_name`: the run a process started itself.

    Keyed on the run id, never on "the latest run", so a summary describes its
    own run even when another run wrote to the same store meanwhile.
    """
    store = metadata_store.MetadataStore(connection_config)
    nodes = _node_contexts(store, pipeline_name)

    run = store.get_context_by_type_and_name("pipeline_run", run_id)
    if run is None:
        raise LookupError(f"no run {run_id!r} in the metadata store")
    # One MLMD query per execution: look each node up once.
    run_executions = store.get_executions_by_context(run.id)
    node_of = {e.id: _node_id(store, e, nodes) for e in run_executions}
    executions = [e for e in run_executions if node_of[e.id] is not None]
    if not executions:
        raise LookupError(f"run {run_id!r} has no executions of pipeline {pipeline_name!r}")

    summary = RunSummary(run_id=run.name, pipeline_name=pipeline_name)
    uris: dict[str, str] = {}
    executions.sort(key=lambda e: e.create_time_since_epoch)
    events = store.get_events_by_execution_ids([e.id for e in executions])
    artifact_types = {t.id: t.name for t in store.get_artifact_types()}
    artifacts = {
        a.id: a for a in store.get_artifacts_by_id(list({ev.artifact_id for ev in events}))
    }
    outputs_by_execution: dict[int, list[metadata_store_pb2.Artifact]] = {}
    for ev in events:
        if ev.type == metadata_store_pb2.Event.INPUT:
            if any(step.key == BASELINE_MODEL_KEY for step in ev.path.steps):
                props = artifacts[ev.artifact_id].custom_properties
                if HAS_MODEL_PROPERTY not in props or props[HAS_MODEL_PROPERTY].int_value == 1:
                    summary.has_baseline = True
                    if SERVED_PATH_PROPERTY in props:
                        summary.baseline_path = props[SERVED_PATH_PROPERTY].string_value
        elif ev.type in (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT):
            outputs_by_execution.setdefault(ev.execution_id, []).append(artifacts[ev.artifact_id])

    for execution in executions:
        node_id = node_of[execution.id]
        if node_id is None:  # not one of the pipeline's nodes (filtered above)
            continue
        summary.components.append(
            ComponentRun(
                node_id,
                _STATE_NAMES.get(execution.last_known_state, "unknown"),
                started_ms=execution.create_time_since_epoch,
                ended_ms=execution.last_update_time_since_epoch,
            )
        )
        for artifact in outputs_by_execution.get(execution.id, []):
            type_name = artifact_types[artifact.type_id]
            if type_name in _REPORTED_ARTIFACT_TYPES:
                uris[_REPORTED_ARTIFACT_TYPES[type_name]] = artifact.uri
            if type_name == "Examples" and "span" in artifact.custom_properties:
                # ExampleGen's (Transform's examples carry no span).
                summary.input = InputData.from_properties(
                    {k: _property_value(v) for k, v in artifact.custom_properties.items()}
                )
            elif type_name == DataDrift.TYPE_NAME:
                summary.drift = read_result(artifact.uri)
            elif type_name == "ModelEvaluation":
                summary.metrics = _overall_metrics(artifact.uri)
                summary.validation_failures = _validation_failures(artifact.uri)
            elif type_name == "ModelBlessing":
                summary.blessed = bool(artifact.custom_properties["blessed"].int_value)
            elif type_name == "PushedModel":
                props = artifact.custom_properties
                if props.get(PUSHED_PROPERTY) and props[PUSHED_PROPERTY].int_value:
                    summary.pushed_destination = props[PUSHED_DESTINATION_PROPERTY].string_value
                    summary.signatures = serving_signatures(summary.pushed_destination)
                elif ALREADY_SERVED_PROPERTY in props:
                    summary.already_served_path = props[ALREADY_SERVED_PROPERTY].string_value
    summary.artifact_uris = ArtifactUris(**uris)
    return summary
