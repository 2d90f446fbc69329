"""The scoring DAG, built by one pure factory beside the training DAG's.

ExampleGen (the latest span; CSV or Parquet, spans, patterns and object
stores as in training) -> StatisticsGen -> ServingDataGate (against the
schema's SERVING environment: the label may be absent, new columns are
allowed) -> BatchScorer (the served model, pinned or else the newest, or what
KServe rolled out where a rollout record is given, into one
partition per span and model version, committed once; components/scoring/executor.py).
The scorer waits for the gate: rows that fail validation are never scored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ml_metadata.proto import metadata_store_pb2
from tfx.components import StatisticsGen
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.orchestration.data_types import RuntimeParameter
from tfx.orchestration.pipeline import Pipeline

from components.example_gen.component import ExampleGen
from components.example_gen.executor import PARQUET_EXAMPLES_KEY
from components.gates.serving_data.component import ServingDataGate
from components.scoring.component import BatchScorer
from components.scoring.executor import ScoringSettings
from contract.dataset.spec import DatasetSpec
from pipeline.steps import (
    BATCH_SCORER,
    EXAMPLE_GEN,
    SCHEMA_IMPORTER,
    SCORING_STEPS,
    SERVING_GATE,
    STATISTICS_GEN,
)

# The scoring pipeline's name: the dataset's, so both pipelines' runs sit side by side.
SCORING_SUFFIX = "-scoring"


def scoring_pipeline_name(dataset: DatasetSpec) -> str:
    return dataset.name + SCORING_SUFFIX


def create_scoring_pipeline(
    *,
    dataset: DatasetSpec,
    pipeline_root: str,
    data_root: str | RuntimeParameter,
    schema_path: str,
    serving_model_dir: str,
    output_dir: str | RuntimeParameter,
    settings: ScoringSettings,
    model_version: str | RuntimeParameter | None = None,
    rolled_out_record: str | None = None,
    beam_pipeline_args: Sequence[str] = (),
    beam_pipeline_args_by_step: Mapping[str, Sequence[str]] | None = None,
    metadata_connection_config: metadata_store_pb2.ConnectionConfig | None = None,
) -> Pipeline:
    """Builds the scoring DAG. Pure: reads no data, no model and no environment.

    `dataset` is the dataset spec of the served model's task: its input
    (pattern, format, ignored columns) tells ExampleGen what to read, and
    the label's source columns are the ones the gate lets be absent. Scoring
    reads only the latest span, whatever window training reads.
    `model_version` None (or "") scores with the served version: the one the
    record at `rolled_out_record` names (the KServe rollout's,
    components/serving/rollout_record.py) when given, else the newest complete one.
    `data_root` and `output_dir` may be RuntimeParameters (Kubeflow), set per run.
    """
    per_step_beam_args = SCORING_STEPS.beam_args_by_step(beam_pipeline_args_by_step)
    example_gen = ExampleGen(
        input_base=data_root,
        input_pattern=dataset.input.pattern,
        spans=1,
        input_format=dataset.input.format,
        # A key the spec ignores is still read: the scores carry it.
        ignore=tuple(c for c in dataset.ignore if c not in settings.keys),
        # Keys are read as written: a CSV's `007`, `07` and `7` are three keys.
        text_columns=settings.keys,
        # Extra columns are allowed and never read, whatever they hold.
        skip_unsupported=True,
        columns=dataset.scoring_columns(settings.keys),
    ).with_id(EXAMPLE_GEN)
    # Statistics from ExampleGen's Parquet copy, as in training (pipeline/pipeline.py).
    statistics_gen = StatisticsGen(examples=example_gen.outputs[PARQUET_EXAMPLES_KEY]).with_id(
        STATISTICS_GEN
    )
    schema_importer = ImportSchemaGen(schema_file=schema_path).with_id(SCHEMA_IMPORTER)
    gate = ServingDataGate(
        statistics=statistics_gen.outputs["statistics"],
        schema=schema_importer.outputs["schema"],
        excluded_columns=json.dumps(list(dataset.serving_excluded_columns())),
    ).with_id(SERVING_GATE)
    scorer = BatchScorer(
        examples=example_gen.outputs["examples"],
        serving_model_dir=serving_model_dir,
        output_dir=output_dir,
        model_version=model_version or "",
        rolled_out_record=rolled_out_record or "",
        settings=settings.to_json(),
    ).with_id(BATCH_SCORER)
    # The scorer takes nothing from the gate; this edge keeps bad data from being scored.
    scorer.add_upstream_node(gate)
    steps = [example_gen, statistics_gen, schema_importer, gate, scorer]
    for step in steps:
        if step.id in per_step_beam_args:
            step.with_beam_pipeline_args(list(per_step_beam_args[step.id]))
    return Pipeline(
        pipeline_name=scoring_pipeline_name(dataset),
        pipeline_root=pipeline_root,
        components=steps,
        # Every run reads what is there now: new data, the newest model.
        enable_cache=False,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=list(beam_pipeline_args),
    )
