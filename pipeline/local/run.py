"""A local run, from typed options to a finished run: what `local_runner.py` calls.

    from pipeline.local.run import LocalRunOptions, run_local

    summary = run_local(LocalRunOptions(dataset=spec, schema_file=..., spec_file=...,
                                        data_root="data/chicago_taxi", output_dir=Path("out"),
                                        config=variant("local_cpu")))

It checks the data root against the dataset spec's input, holds the output
directory's run lock, claims the directory for the pipeline, starts the
second process that runs the validation branch beside Transform
(pipeline/local/node_process.py), builds the DAG with `create_pipeline(...)`, runs
it (pipeline/local/scheduler.py), prints the run's summary and writes its HTML report.
The options arrive resolved: the runner loads the dataset directory and the
configuration variant, so this module reads no flags and no dataset files.
TensorFlow and TFX load only once the run has its lock.
"""

from __future__ import annotations

import datetime
import gc
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.fields import one_line
from pipeline.beam import BeamMode

if TYPE_CHECKING:
    from ml_metadata.proto import metadata_store_pb2
    from tfx.orchestration.pipeline import Pipeline

    from components.report.contents import RunReport
    from contract.dataset.spec import DatasetSpec
    from pipeline.inputs import DataRoot
    from pipeline.local.node_process import NodeProcess
    from pipeline.pipeline_config import PipelineConfig
    from trainer.hyperparameters import FrozenHyperparameters

# The pipeline that owns an output directory; another one gets a clear refusal.
PIPELINE_NAME_FILE = ".pipeline_name"
BEAM_MODES = ("auto", "in_memory", "multi_processing")


@dataclass(frozen=True)
class LocalRunOptions:
    """One local run, resolved: what to run, on what, where, and how.

    `dataset`, `schema_file`, `spec_file`: a checked dataset directory
    (`schemas.load_schema_dir`). `data_root`: a local directory (absolute) or
    an s3:// or gs:// prefix. `config`: a variant of pipeline/config.py with
    any overrides applied, the frozen `hyperparameters` among them (kept here
    for the report). `sequential`: one step at a time, in this
    process. `fail_if_not_blessed`: raise NotBlessedError when the candidate
    is not blessed. `verbose`: every TFX and TensorFlow log line. `warm`: this
    process was forked by `--watch` with the heavy modules imported and none run
    (pipeline/local/watch.py), so the second process is forked from it too.
    """

    dataset: DatasetSpec
    schema_file: Path
    spec_file: Path
    data_root: str
    output_dir: Path
    config: PipelineConfig
    hyperparameters: FrozenHyperparameters | None = None
    beam_mode: BeamMode = "auto"
    sequential: bool = False
    fail_if_not_blessed: bool = False
    write_report: bool = True
    verbose: bool = False
    warm: bool = False

    def __post_init__(self) -> None:
        # The config checks its own fields (pipeline/pipeline_config.py).
        if self.beam_mode not in BEAM_MODES:
            raise ValueError(f"beam_mode: must be one of {BEAM_MODES}, got {self.beam_mode!r}")
        if not isinstance(self.output_dir, Path):
            raise ValueError(f"output_dir: must be a Path, got {self.output_dir!r}")


def resolve_options(
    *,
    config_variant: str,
    data_root: str,
    hyperparameters: FrozenHyperparameters | None = None,
    train_steps: int | None = None,
    eval_steps: int | None = None,
    cache: bool = True,
    **run: Any,
) -> LocalRunOptions:
    """The run asked for, resolved: the fork's files checked before anything starts, the
    configuration variant with the overrides given (None keeps the variant's) and the
    tuner's frozen winner (`hyperparameters`, the schema dir's), a local data root made
    absolute. `run`: the other LocalRunOptions fields (the dataset directory's among
    them), as given."""
    from pipeline.object_store import uri_scheme
    from trainer.fork import check_fork_files
    from trainer.fork.config_file import variant

    check_fork_files()  # a fork file that cannot run stops here, not minutes in
    config = variant(config_variant)
    config = config.replace(
        train_steps=train_steps or config.train_steps,
        eval_steps=eval_steps or config.eval_steps,
        enable_cache=config.enable_cache and cache,
    )
    return LocalRunOptions(
        # An object-store URI as given; a local path made absolute.
        data_root=data_root if uri_scheme(data_root) else str(Path(data_root).resolve()),
        config=config.with_hyperparameters(hyperparameters),
        hyperparameters=hyperparameters,
        **run,
    )


def run_local(options: LocalRunOptions) -> RunReport:
    """Runs the DAG once; returns the run's summary, its report without the
    statistics, anomalies and training sections. Raises on a failed run (the
    error says why), and NotBlessedError with `fail_if_not_blessed`."""
    with prepared_run(options) as (checked, output_dir, node_process):
        return _run_pipeline(options, checked, output_dir, node_process)


@contextmanager
def prepared_run(
    options: LocalRunOptions,
) -> Iterator[tuple[DataRoot, Path, NodeProcess | None]]:
    """The checked data root, the output directory (held by this run, claimed for the
    pipeline) and the second process, if any: what a run of the DAG, or of its steps
    up to Transform (the tuner's, pipeline/local/tune.py), starts from."""
    # Only light modules before the lock: a second run is refused at once.
    from pipeline.inputs import check_data_root
    from pipeline.local.run_lock import RunLock

    data_input = options.dataset.input
    checked = check_data_root(
        options.data_root,
        data_input.pattern,
        data_input.spans,
        format=data_input.format,
        ignore=options.dataset.ignore,
    )
    check_label_columns(checked, options.dataset, options.spec_file)
    output_dir = options.output_dir.resolve()
    check_output_dir(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with RunLock(output_dir):
        claim_output_dir(output_dir, options.dataset.name)
        with start_node_process(
            sequential=options.sequential, verbose=options.verbose, fork=options.warm
        ) as node_process:
            yield checked, output_dir, node_process


def configure_logging(verbose: bool) -> None:
    """Component progress only (or everything with `verbose`), in this process and in
    the node process, which runs it as its initializer."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s") if verbose else _FirstLineOnly())
    if not verbose:
        # TensorFlow's C++ start-up chatter (CUDA plugin registration) is all
        # at ERROR level; Python exceptions still surface every real failure.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        # TFMA divides by zero for slices without positives and reports NaN anyway.
        warnings.filterwarnings(
            "ignore", category=RuntimeWarning, module="tensorflow_model_analysis.*"
        )
        handler.addFilter(_ProgressOnly())
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    # TFX reports progress through absl at INFO. Libraries that silence absl for
    # a while restore the verbosity absl had, so give it INFO explicitly.
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)


_OWN_PACKAGES = ("trainer", "pipeline", "components")


class _ProgressOnly(logging.Filter):
    """Passes errors, our own packages' logs, and TFX's component progress lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR or record.name.split(".")[0] in _OWN_PACKAGES:
            return True
        message = record.getMessage()
        return message.startswith("Component ") and (
            "is running" in message or "is finished" in message
        )


class _FirstLineOnly(logging.Formatter):
    """A record's first line, without its traceback: a failing Beam step logs its
    error with the worker's whole stack inside the message, above the runner's own
    one-line error that says why (`--verbose` shows them)."""

    def format(self, record: logging.LogRecord) -> str:
        lines = record.getMessage().strip().splitlines()
        return lines[0] if lines else ""


class NotBlessedError(RuntimeError):
    """`fail_if_not_blessed`, and the Evaluator did not bless the candidate."""


def new_run_id() -> str:
    """A run id in TFX's own format (LocalDagRunner uses the start time too)."""
    return datetime.datetime.now().isoformat()


def start_node_process(
    *, sequential: bool, verbose: bool, fork: bool = False
) -> AbstractContextManager:
    """The second process, running a node while this one runs another (local/scheduler.py).

    Started before this process imports TensorFlow: it imports on the other
    core meanwhile. `fork`: this process holds the imports already (`--watch`),
    and the second one is forked from it. A context manager either way; None
    when `sequential` or on a single core, where it would only compete.
    """
    from contextlib import nullcontext

    from pipeline.local.node_process import NodeProcess, usable_cores

    if sequential or usable_cores() < 2:
        return nullcontext()
    return NodeProcess(
        initializer=configure_logging,
        initargs=(verbose,),
        start_method="fork" if fork else "spawn",
    )


def check_label_columns(data: DataRoot, dataset: DatasetSpec, spec_file: Path) -> None:
    """Fails at once when the data lacks the label's columns: the wrong schema dir, typically.

    `data` is the checked data root. Other schema mismatches are the
    ExampleValidator's to report, feature by feature.
    """
    from pipeline.inputs import InputDataError

    missing = [c for c in dataset.label.source_columns if c not in data.header]
    if missing:
        raise InputDataError(
            f"{data.files[0]} has no column {', '.join(map(repr, missing))}, which the label of "
            f"{spec_file} reads. For other data, draft a schema dir with "
            "`python -m schemas.draft --data-root DIR --label COLUMN --output-dir SCHEMA_DIR` "
            "and pass --schema-dir SCHEMA_DIR"
        )


class OutputDirError(ValueError):
    """The output directory cannot hold a run."""


def check_output_dir(output_dir: Path) -> None:
    """OutputDirError where `output_dir`'s path holds a glob character.

    TFX's steps find their inputs by globbing the artifact directories under it
    (Transform and the Trainer read `<examples>/Split-train/*`), so in an output
    dir named `out[1]` they would find nothing, deep in a Beam stack trace.
    """
    held = sorted({c for c in str(output_dir) if c in "*?["})
    if held:
        raise OutputDirError(
            f"output dir {output_dir} holds {', '.join(map(repr, held))}: TFX's steps find "
            "their inputs under it by glob patterns, which read such a character as one; "
            "choose an --output-dir without it"
        )


class OutputDirInUseError(RuntimeError):
    """The output directory belongs to another pipeline."""


def claim_output_dir(output_dir: Path, pipeline_name: str) -> None:
    """Records which pipeline owns `output_dir`; refuses a directory another one owns.

    Two datasets in one output directory would share serving_model/: the
    Evaluator would compare a candidate with the other task's served model.
    """
    marker = output_dir / PIPELINE_NAME_FILE
    if marker.is_file():
        owner = marker.read_text().strip()
        if owner and owner != pipeline_name:
            raise OutputDirInUseError(
                f"output dir {output_dir} holds pipeline {owner!r}'s runs and served models; "
                f"give pipeline {pipeline_name!r} its own --output-dir"
            )
        return
    marker.write_text(pipeline_name + "\n")


@dataclass(frozen=True)
class LocalPipeline:
    """The DAG as a local run builds it, with its metadata store and the modes it chose."""

    pipeline: Pipeline
    metadata: metadata_store_pb2.ConnectionConfig
    beam_mode: str
    materialized: bool


def build_local_pipeline(
    options: LocalRunOptions, checked: DataRoot, output_dir: Path
) -> LocalPipeline:
    """`create_pipeline(...)` with this output directory's paths and metadata store, the
    Beam mode and Transform's materialization chosen from the data's size."""
    from tfx.orchestration import metadata as tfx_metadata

    from pipeline.beam import (
        beam_pipeline_args,
        choose_beam_mode,
        data_size_bytes,
        local_step_beam_args,
    )
    from pipeline.pipeline import create_pipeline
    from pipeline.steps import EXAMPLE_GEN
    from pipeline.transform_output import materialize_transform

    # TensorFlow, TFX and Beam leave millions of long-lived objects behind their
    # imports; every full garbage collection walked them all again (seconds of a
    # cold run: docs/where-the-time-goes.md). Frozen objects are never collected,
    # which costs nothing for modules that live as long as the process.
    gc.freeze()
    metadata = tfx_metadata.sqlite_metadata_connection_config(str(output_dir / "metadata.sqlite"))
    data_bytes = data_size_bytes(checked.files, checked.format)
    beam_mode = choose_beam_mode(data_bytes, options.beam_mode)
    materialized = materialize_transform(data_bytes)
    config = options.config
    pipeline = create_pipeline(
        dataset=options.dataset,
        pipeline_root=str(output_dir / "pipeline_root"),
        data_root=str(options.data_root),
        schema_path=str(options.schema_file),
        serving_model_dir=str(output_dir / "serving_model"),
        train_steps=config.train_steps,
        eval_steps=config.eval_steps,
        trainer_config=config.trainer,
        enable_cache=config.enable_cache,
        beam_pipeline_args=beam_pipeline_args(beam_mode),
        beam_pipeline_args_by_step=local_step_beam_args(beam_mode, example_gen=EXAMPLE_GEN),
        materialize_transform=materialized,
        metadata_connection_config=metadata,
    )
    return LocalPipeline(pipeline, metadata, beam_mode, materialized)


def _run_pipeline(
    options: LocalRunOptions,
    checked: DataRoot,
    output_dir: Path,
    node_process: NodeProcess | None = None,
) -> RunReport:
    from pipeline.local.run_summary import summarize_run, summary_text
    from pipeline.local.scheduler import run_locally

    built = build_local_pipeline(options, checked, output_dir)
    pipeline, metadata = built.pipeline, built.metadata
    beam_mode, materialized = built.beam_mode, built.materialized
    spec, config, data_root = options.dataset, options.config, options.data_root
    spans = (
        f", span{'s' if len(checked.spans) > 1 else ''} "
        + ", ".join(str(s.span) for s in checked.spans)
        if checked.spans
        else ""
    )
    print(
        f"Running {spec.name} ({spec.task}, label {spec.label.column or spec.label.derive}) "
        f"on {data_root}{spans} (Beam {beam_mode}, "
        f"Transform {'materialized' if materialized else 'applied in the Trainer'}, "
        f"{config.train_steps} train steps, "
        f"cache {'on' if config.enable_cache else 'off'})",
        flush=True,
    )
    run_id = new_run_id()
    try:
        run_locally(pipeline, run_id, node_process)
    except Exception as err:
        # A failed run still gets its report, up to the failing step.
        if options.write_report:
            write_run_report(
                metadata,
                spec.name,
                run_id,
                output_dir,
                error=error_text(err),
                hyperparameters=options.hyperparameters,
            )
        raise
    summary = summarize_run(metadata, spec.name, run_id)
    print(summary_text(summary), flush=True)
    if options.write_report:
        write_run_report(
            metadata, spec.name, run_id, output_dir, hyperparameters=options.hyperparameters
        )
    if options.fail_if_not_blessed and summary.blessed is False:
        failed = [t.describe() for t in summary.failed_thresholds]
        raise NotBlessedError(
            "the candidate was not blessed" + (": " + "; ".join(failed) if failed else "")
        )
    return summary


def error_text(err: BaseException) -> str:
    """An error as the last line of a run says it: its type and its message, on one
    printable line (a message quotes the data: a path with a newline, a cell's text)."""
    return f"{type(err).__name__}: {one_line(err)}"


def write_run_report(
    metadata,
    pipeline_name: str,
    run_id: str,
    output_dir: Path,
    *,
    error: str | None = None,
    hyperparameters: FrozenHyperparameters | None = None,
) -> Path | None:
    """Writes OUTPUT_DIR/reports/<run id>.html and latest.html, and prints where.

    Steps of the DAG that did not run (a failure stopped it before them) are
    listed as "not run". `hyperparameters`: the frozen file the run trained
    with (None: there is none), shown beside the resolved runtime. The report never changes a run's
    outcome: if writing it fails, that is said on stderr and the run's own
    exit code stands.
    """
    import dataclasses
    import time

    from components.report.contents import RunReport, StepRun
    from components.report.render import LATEST, write_report
    from pipeline.local.run_summary import summarize_run
    from pipeline.steps import DAG_STEPS
    from trainer.hyperparameters import report_rows

    started = time.monotonic()
    try:
        try:
            report = summarize_run(metadata, pipeline_name, run_id, sections=True)
        except LookupError:  # Failed before any step ran.
            report = RunReport(pipeline_name, run_id, steps=(), error=error)
        else:
            ran = {s.step_id for s in report.steps}
            not_run = tuple(StepRun(s, "not run") for s in DAG_STEPS.ids if s not in ran)
            report = dataclasses.replace(report, steps=report.steps + not_run, error=error)
        report = dataclasses.replace(report, hyperparameters=report_rows(hyperparameters))
        path = write_report(report, output_dir / "reports")
    except Exception as err:  # Reported, never raised: see the docstring.
        print(f"warning: run report not written: {error_text(err)}", file=sys.stderr, flush=True)
        return None
    print(
        f"Report: {path} (and {LATEST}; written in {time.monotonic() - started:.1f} s)",
        flush=True,
    )
    return path
