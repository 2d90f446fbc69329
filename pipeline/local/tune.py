"""A local search: the DAG's steps up to Transform, then KerasTuner trials on its output.

    from pipeline.local.tune import TuneOptions, run_tuning

    outcome = run_tuning(TuneOptions(run=local_run_options, max_trials=10, ...))

It starts as a local run does (`prepared_run`: the data checks, the output
directory's run lock and claim) and builds the same DAG with the same
factory (`build_local_pipeline`), then runs only Transform and the steps it
depends on (`run_locally(..., last=TRANSFORM)`), from cache where the local
runner already ran them on this data: the same metadata store, the same
steps. The search (trainer/tuning.py) reads Transform's output, the train
split to fit and the eval split to score, and keeps its state in
OUTPUT_DIR/tuning/, so a rerun on the same output directory resumes it.

The winner goes to OUTPUT_DIR/tuning/best.yaml and, unless the search is
partial (cut off by the deadline) and not accepted, into
SCHEMA_DIR/hyperparameters.yaml, which every later run's Trainer reads.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.local.run import LocalRunOptions

if TYPE_CHECKING:
    from trainer.hyperparameters import FrozenHyperparameters
    from trainer.run import InputFiles
    from trainer.tuning import SearchResult

TUNING_DIR = "tuning"
BEST_FILE = "best.yaml"
REPORT_FILE = "report.html"


@dataclass(frozen=True)
class TuneOptions:
    """One search. `run`: the local run it starts as (data, schema dir, output dir,
    configuration: its runtime and seed are the trials'). `deadline_seconds`: wall
    clock from the start, or None. `accept_partial`: freeze a partial result too.
    `parallel`: trial processes, KerasTuner workers of an oracle this process serves."""

    run: LocalRunOptions
    max_trials: int
    steps_per_trial: int
    eval_steps: int
    deadline_seconds: float | None = None
    accept_partial: bool = False
    parallel: int = 1

    def __post_init__(self) -> None:
        if self.parallel < 1:
            raise ValueError(f"parallel: must be at least 1, got {self.parallel}")
        if self.deadline_seconds is not None and self.deadline_seconds <= 0:
            raise ValueError(f"deadline: must be positive seconds, got {self.deadline_seconds}")


@dataclass(frozen=True)
class TuneOutcome:
    result: SearchResult
    winner: FrozenHyperparameters | None
    frozen_to: Path | None
    report: Path


class PartialSearchError(RuntimeError):
    """The search is partial and `accept_partial` was not given: nothing was frozen."""


def run_tuning(options: TuneOptions) -> TuneOutcome:
    """Runs (or resumes) the search; freezes the winner. Raises PartialSearchError after
    writing the report and best.yaml when a partial result was not accepted."""
    from pipeline.local.run import build_local_pipeline, new_run_id, prepared_run
    from pipeline.local.run_summary import step_outputs
    from pipeline.local.scheduler import run_locally
    from pipeline.steps import EXAMPLE_GEN, TRANSFORM
    from trainer.tuning import SearchSettings, search

    started = time.time()
    deadline = started + options.deadline_seconds if options.deadline_seconds else None
    run, spec = options.run, options.run.dataset
    with prepared_run(run) as (checked, output_dir, node_process):
        built = build_local_pipeline(run, checked, output_dir)
        print(
            f"Tuning {spec.name}: its steps up to {TRANSFORM} on {run.data_root} "
            f"(cache {'on' if run.config.enable_cache else 'off'}), then at most "
            f"{options.max_trials} trials of {options.steps_per_trial} steps"
            + (f", {options.parallel} at a time" if options.parallel > 1 else ""),
            flush=True,
        )
        run_id = new_run_id()
        run_locally(built.pipeline, run_id, node_process, last=TRANSFORM)
        transform = step_outputs(built.metadata, spec.name, run_id, TRANSFORM)
        examples = step_outputs(built.metadata, spec.name, run_id, EXAMPLE_GEN)["examples"]
        tuning_dir = output_dir / TUNING_DIR
        search_started = time.monotonic()
        result = search(
            config=run.config.trainer,
            spec=spec,
            files=input_files(transform, examples),
            settings=SearchSettings(
                directory=str(tuning_dir),
                max_trials=options.max_trials,
                steps_per_trial=options.steps_per_trial,
                eval_steps=options.eval_steps,
                seed=run.config.trainer.seed,
                deadline=deadline,
            ),
            parallel=options.parallel,
        )
    print(trial_table(result), flush=True)
    print(search_line(result, time.monotonic() - search_started), flush=True)
    return freeze(options, result, examples, tuning_dir)


def input_files(transform: dict, examples) -> InputFiles:
    """Transform's materialized splits, or ExampleGen's through Transform's graph."""
    from trainer.run import InputFiles

    graph = transform["transform_graph"].uri
    if "transformed_examples" in transform:
        uri, raw = transform["transformed_examples"].uri, False
    else:
        uri, raw = examples.uri, True
    return InputFiles(
        train=[f"{uri}/Split-train/*"],
        eval=[f"{uri}/Split-eval/*"],
        transform_output=graph,
        raw_examples=raw,
    )


def trial_table(result: SearchResult) -> str:
    """The trials as a text table, the best marked, and the winner's line."""
    names = sorted({n for t in result.trials for n in t.hyperparameters})
    header = ["trial", "status", result.objective, "gate", *names]
    rows = [
        [
            ("* " if result.best and t.trial_id == result.best.trial_id else "  ") + t.trial_id,
            t.status.lower(),
            "-" if t.score is None else f"{t.score:.4f}",
            "-" if t.gate_metric is None else f"{t.gate_metric:.4f}",
        ]
        + [_short(t.hyperparameters.get(n, "")) for n in names]
        for t in result.trials
    ]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]
    ]
    if result.best is None:
        lines.append("No trial completed.")
    else:
        lines.append(
            f"Winner: trial {result.best.trial_id}, {result.objective} {result.best.score:.4f}, "
            + ", ".join(f"{k}={v}" for k, v in result.best.model.items())
            + (" (partial: the deadline cut the search short)" if result.partial else "")
        )
    return "\n".join(lines)


def search_line(result: SearchResult, seconds: float) -> str:
    """How long the trials this process ran took (benchmarks/tuning_parallel.py reads it)."""
    ran = [t for t in result.trials if t.trial_id in result.ran and t.status == "COMPLETED"]
    per = f", {seconds / len(ran):.1f} s per completed trial" if ran else ""
    return f"Search: {len(ran)} trials completed in this run in {seconds:.1f} s{per}"


def _short(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def provenance(options: TuneOptions, result: SearchResult, examples) -> dict:
    """Where the winner came from: the space, the data, the versions, the search."""
    from pipeline.local.run_summary import artifact_properties

    properties = artifact_properties(examples)
    read_at = datetime.datetime.fromtimestamp(
        examples.create_time_since_epoch / 1000, datetime.timezone.utc
    )
    return search_provenance(
        result,
        pipeline=options.run.dataset.name,
        max_trials=options.max_trials,
        steps_per_trial=options.steps_per_trial,
        properties=properties,
        examples_uri=examples.uri,
        read_at=read_at,
    )


def search_provenance(
    result: SearchResult,
    *,
    pipeline: str,
    max_trials: int,
    steps_per_trial: int,
    properties: dict,
    examples_uri: str,
    read_at: datetime.datetime,
) -> dict:
    """The frozen file's provenance, from the search and ExampleGen's examples (`properties`:
    their custom properties; `read_at`: when they were written). The Kubeflow Tune step's too."""
    import keras
    import keras_tuner
    import tensorflow as tf
    import tfx

    from pipeline.fingerprint import code_fingerprint
    from trainer.fork.search_space_file import search_space

    best = result.best
    if best is None or best.score is None:
        raise ValueError("provenance: the search has no completed trial")
    spans = str(properties.get("spans") or properties.get("span", 0))
    return {
        "search_space_digest": code_fingerprint(search_space()),
        "hyperparameters": dict(best.hyperparameters),
        "objective": result.objective,
        "direction": result.direction,
        "best_score": float(best.score),
        "best_trial": best.trial_id,
        "trials": len(result.completed),
        "max_trials": max_trials,
        "steps_per_trial": steps_per_trial,
        "partial": result.partial,
        "data": {
            "pipeline": pipeline,
            "fingerprint": str(properties.get("input_fingerprint", "")),
            "spans": [int(s) for s in spans.split(",")],
            "examples_uri": examples_uri,
            "read_at": read_at.isoformat(timespec="seconds"),
        },
        "versions": {
            "keras": keras.__version__,
            "keras_tuner": keras_tuner.__version__,
            "tensorflow": tf.__version__,
            "tfx": tfx.__version__,
        },
        "tuned_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def freeze(options: TuneOptions, result: SearchResult, examples, tuning_dir: Path) -> TuneOutcome:
    from components.report.tuning_report import render_tuning_html, write_tuning_report
    from trainer.hyperparameters import (
        HYPERPARAMETERS_FILE_NAME,
        FrozenHyperparameters,
        write_frozen,
    )

    spec_file = options.run.spec_file
    winner = (
        FrozenHyperparameters(result.best.model, provenance(options, result, examples))
        if result.best
        else None
    )
    frozen_to = None
    if winner is not None:
        write_frozen(tuning_dir / BEST_FILE, winner)
        if not result.partial or options.accept_partial:
            frozen_to = write_frozen(spec_file.parent / HYPERPARAMETERS_FILE_NAME, winner)
    html = render_tuning_html(
        options.run.dataset.name,
        result,
        winner.to_dict() if winner else {"model": {}, "provenance": {}},
        str(frozen_to) if frozen_to else None,
    )
    report = write_tuning_report(tuning_dir / REPORT_FILE, html)
    print(f"Report: {report}", flush=True)
    outcome = TuneOutcome(result, winner, frozen_to, report)
    if frozen_to is not None:
        print(f"Frozen into {frozen_to}: commit it; the next run's Trainer reads it", flush=True)
    elif winner is None:
        raise PartialSearchError(
            "no trial completed before the deadline; nothing was frozen: rerun with the same "
            "--output-dir and a later --deadline to resume"
        )
    else:
        raise PartialSearchError(
            f"the search is partial ({len(result.completed)} of {options.max_trials} trials "
            f"before the deadline); its best is in {tuning_dir / BEST_FILE}, not frozen: rerun "
            "with the same --output-dir to resume, or add --accept-partial to freeze it"
        )
    return outcome
