"""`BatchScorer`: components/scoring/executor.py's `score_partition` as a TFX component.

It reads every split of ExampleGen's examples (a scoring run scores all its
rows), takes the span and the input fingerprint from the examples artifact
(ExampleGen records them, the driver's or its own executor's), and writes the
partition under `output_dir`, outside the pipeline root, as the Pusher writes
outside it. Its `scores` artifact records what it did. It reads the serving
directory and writes outside the pipeline, so it is never served from cache
(pipeline/steps.py, `SCORING_STEPS`).
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

import os

import apache_beam as beam
from absl import logging
from tfx.dsl.component.experimental.annotations import (
    BeamComponentParameter,
    InputArtifact,
    OutputArtifact,
    Parameter,
)
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_artifacts

from components.artifact_names import (
    ERRORS_PROPERTY,
    FINGERPRINT_PROPERTY,
    MODEL_DIGEST_PROPERTY,
    MODEL_VERSION_PROPERTY,
    PARTITION_PROPERTY,
    ROWS_PROPERTY,
    SPAN_PROPERTY,
    SPAN_SCORED_PROPERTY,
    STATUS_PROPERTY,
)
from components.scoring.executor import ScoringSettings, score_partition
from components.scoring.output import MANIFEST_FILE
from components.serving.served_version import choose_version


def example_files(examples) -> "list[str]":
    """Every file of every split of an Examples artifact."""
    files = []
    for split in artifact_utils.decode_split_names(examples.split_names):
        files += fileio.glob(os.path.join(artifact_utils.get_split_uri([examples], split), "*"))
    return sorted(files)


def input_of(examples) -> "tuple[int, str]":
    """(span, input fingerprint) as ExampleGen recorded them on its artifact."""
    span = (
        examples.get_int_custom_property(SPAN_PROPERTY)
        if examples.has_custom_property(SPAN_PROPERTY)
        else int(examples.span or 0)
    )
    fingerprint = (
        examples.get_string_custom_property(FINGERPRINT_PROPERTY)
        if examples.has_custom_property(FINGERPRINT_PROPERTY)
        else ""
    )
    return span, fingerprint


@component(use_beam=True)
def BatchScorer(
    examples: InputArtifact[standard_artifacts.Examples],
    scores: OutputArtifact[standard_artifacts.InferenceResult],
    serving_model_dir: Parameter[str],
    output_dir: Parameter[str],
    model_version: Parameter[str],
    rolled_out_record: Parameter[str],
    settings: Parameter[str],
    beam_pipeline: BeamComponentParameter[beam.Pipeline] = None,
):
    """Scores the examples with `model_version`, or with the version `rolled_out_record`
    names (the KServe rollout's, on Kubeflow), or with the newest served one when both are ""."""
    model = choose_version(serving_model_dir, model_version or None, rolled_out_record or None)
    span, fingerprint = input_of(examples)
    result = score_partition(
        example_files=example_files(examples),
        span=span,
        input_fingerprint=fingerprint,
        output_dir=output_dir,
        model=model,
        settings=ScoringSettings.from_json(settings),
        new_pipeline=lambda: beam_pipeline,
    )
    manifest = result.manifest
    # On Kubeflow nothing makes the artifact's own folder (the launcher makes its parent).
    fileio.makedirs(scores.uri)
    with fileio.open(os.path.join(scores.uri, MANIFEST_FILE), "w") as f:
        f.write(manifest.to_json())
    scores.set_string_custom_property(STATUS_PROPERTY, result.status)
    scores.set_int_custom_property(ROWS_PROPERTY, manifest.rows)
    scores.set_int_custom_property(ERRORS_PROPERTY, manifest.errors)
    scores.set_string_custom_property(MODEL_VERSION_PROPERTY, manifest.model_version)
    scores.set_string_custom_property(MODEL_DIGEST_PROPERTY, manifest.model_digest)
    scores.set_string_custom_property(PARTITION_PROPERTY, result.partition)
    scores.set_int_custom_property(SPAN_SCORED_PROPERTY, manifest.span)
    logging.info(
        "Scores %s: %s (%d rows, %d errors, model version %s).",
        result.status,
        result.partition,
        manifest.rows,
        manifest.errors,
        manifest.model_version,
    )
