"""The spans and fingerprint of the data a Kubeflow run reads: the work of the InputSnapshot step.

kubeflow/steps/input_snapshot/component.py declares the step for TFX (TFX's compiler);
on Kubeflow its pod runs `take_snapshot` through kubeflow/light_step.py,
without TFX's entrypoint, TensorFlow or TFMA (docs/kubeflow.md, "What a step
loads"). The resolution is components/example_gen/span_resolution.py's, the one
ExampleGen's executor runs, so the snapshot names the spans ExampleGen reads.
"""

from __future__ import annotations

import json

from absl import logging

from components.example_gen.span_resolution import InputSplits, resolve_input

# The step's one output, a string parameter (and TFX's String artifact).
SNAPSHOT_KEY = "snapshot"


def take_snapshot(input_base: str, input_config: str, input_window: str) -> dict[str, str]:
    """`{SNAPSHOT_KEY: ResolvedInput.to_json()}`: the spans, versions, patterns and
    fingerprints under `input_base`, for `input_config` (ExampleGen's input proto as
    JSON) and `input_window` (components.example_gen.input_settings.input_window)."""
    resolved = resolve_input(
        input_base, InputSplits.from_json(input_config), json.loads(input_window)
    )
    logging.info(
        "Input under %s: span(s) %s, fingerprint %s",
        input_base,
        [(s.span, s.version) for s in resolved.spans],
        resolved.fingerprint.replace("\n", " | "),
    )
    return {SNAPSHOT_KEY: resolved.to_json()}
