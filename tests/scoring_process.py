"""`score_partition` as the batch scoring tests call it, importable by a fresh process.

The tests that kill a scoring run start it in a process of its own
(`tests/test_batch_scoring.py`). That process imports this module, not the test
module: it then loads what the scorer loads and none of what only the tests use
(pytest, `tests/harness.py` and the TFMA it imports).
"""

from __future__ import annotations

from pathlib import Path

from components.serving.served_version import choose_version


def score(files, output_dir: Path, serving: Path, version=None, *, fingerprint="f1", **settings):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from components.scoring.executor import ScoringSettings, score_partition
    from pipeline.beam import IN_MEMORY_RUNNER_ARG

    return score_partition(
        example_files=files,
        span=3,
        input_fingerprint=fingerprint,
        output_dir=str(output_dir),
        model=choose_version(str(serving), version),
        settings=ScoringSettings(**{"keys": ("trip_id",), "batch_size": 16, **settings}),
        new_pipeline=lambda: beam.Pipeline(options=PipelineOptions([IN_MEMORY_RUNNER_ARG])),
    )
