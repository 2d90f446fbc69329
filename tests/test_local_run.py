"""The local run's typed options: what the command line makes of its flags, and the guards."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import local_runner
from pipeline.local.run import LocalRunOptions
from schemas import DEFAULT_SCHEMA_DIR, load_schema_dir
from trainer.fork.config_file import variant


def options(**changes) -> LocalRunOptions:
    schema_dir = load_schema_dir(DEFAULT_SCHEMA_DIR)
    base = LocalRunOptions(
        dataset=schema_dir.spec,
        schema_file=schema_dir.schema_file,
        spec_file=schema_dir.spec_file,
        data_root=str(local_runner.DEFAULT_DATA_ROOT),
        output_dir=Path("out"),
        config=variant("local_cpu"),
    )
    return dataclasses.replace(base, **changes)


def test_the_flags_become_resolved_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = local_runner.parse_args(
        ["--data-root", "data", "--train-steps", "7", "--no-cache", "--no-report", "--sequential"]
    )
    made = local_runner.options_from_args(args)
    assert made.data_root == str(tmp_path / "data")  # the caller's relative path, absolute
    assert (made.config.train_steps, made.config.enable_cache) == (7, False)
    assert made.config.eval_steps == variant("default").eval_steps
    assert (made.write_report, made.sequential, made.beam_mode) == (False, True, "auto")
    assert made.dataset.name == "taxi-big-tipper"
    assert made.schema_file == DEFAULT_SCHEMA_DIR / "schema.pbtxt"
    # An object store's URI is kept as given.
    args = local_runner.parse_args(["--data-root", "s3://bucket/taxi"])
    assert local_runner.options_from_args(args).data_root == "s3://bucket/taxi"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"beam_mode": "spark"}, r"^beam_mode: must be one of \('auto', 'in_memory'"),
        ({"output_dir": "out"}, r"^output_dir: must be a Path, got 'out'"),
    ],
)
def test_options_that_cannot_run_are_refused_naming_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        options(**changes)
