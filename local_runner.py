"""Runs the pipeline on this machine: TFX's launcher per component, SQLite ML Metadata.

Components run as TFX's LocalDagRunner runs them, except that where the DAG
branches a second process runs the other branch (pipeline/local.py).

    python local_runner.py                      # embedded Chicago taxi sample and task
    python local_runner.py --data-root DIR --schema-dir SCHEMA_DIR --output-dir OUT

SCHEMA_DIR holds schema.pbtxt and dataset.yaml (draft both with
`python -m schemas.draft`); the dataset spec names the pipeline and sets the task.

Outputs land under --output-dir: pipeline_root/ (artifacts), metadata.sqlite,
and serving_model/<version>/ for every blessed, pushed model.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.config import PipelineConfig
    from pipeline.inputs import CsvDataRoot
    from pipeline.node_process import NodeProcess

REPO_ROOT = Path(__file__).resolve().parent
DEFAULT_DATA_ROOT = REPO_ROOT / "data" / "chicago_taxi"
DEFAULT_OUTPUT_DIR = REPO_ROOT / "outputs"
# The pipeline that owns an output directory; another one gets a clear refusal.
PIPELINE_NAME_FILE = ".pipeline_name"
EXIT_FAILED = 1
EXIT_NOT_BLESSED = 3
EXIT_INTERRUPTED = 130


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Run the TFX pipeline locally (TFX's launcher per component, SQLite metadata)."
    )
    parser.add_argument(
        "--data-root",
        default=str(DEFAULT_DATA_ROOT),
        help="directory of CSV files: a local path, s3://BUCKET/PREFIX or gs://BUCKET/PREFIX "
        "(default: the embedded taxi sample)",
    )
    parser.add_argument(
        "--schema-dir",
        type=Path,
        help="directory with schema.pbtxt and dataset.yaml (default: schemas/chicago_taxi, "
        "the embedded taxi task); draft one with python -m schemas.draft",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=DEFAULT_OUTPUT_DIR,
        help="artifacts, metadata and serving_model/ go here (default: ./outputs)",
    )
    parser.add_argument("--train-steps", type=int, help="training steps (default from config)")
    parser.add_argument("--eval-steps", type=int, help="validation steps (default from config)")
    parser.add_argument(
        "--no-cache", action="store_true", help="re-run every component instead of reusing results"
    )
    parser.add_argument(
        "--config",
        default="default",
        help="named configuration variant: default, local_cpu, gpu_1x, gpu_8x_amp, gpu_multi_node",
    )
    parser.add_argument(
        "--beam-mode",
        choices=("auto", "in_memory", "multi_processing"),
        default="auto",
        help="DirectRunner mode (auto: in_memory for small data)",
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="run one component at a time in this process, as TFX's LocalDagRunner does "
        "(default: a second process runs data validation beside Transform)",
    )
    parser.add_argument(
        "--fail-if-not-blessed",
        action="store_true",
        help=f"exit {EXIT_NOT_BLESSED} when the Evaluator does not bless the candidate "
        "(default: exit 0, as schedulers treat a run without a new model as a success)",
    )
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="do not write the HTML run report (OUTPUT_DIR/reports/<run id>.html, latest.html)",
    )
    parser.add_argument("--verbose", action="store_true", help="show all TFX/TensorFlow logs")
    args = parser.parse_args(argv)
    for flag in ("train_steps", "eval_steps"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            parser.error(f"--{flag.replace('_', '-')} must be a positive integer, got {value}")
    return args


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


def _configure_logging(verbose: bool) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
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


class NotBlessedError(RuntimeError):
    """--fail-if-not-blessed, and the Evaluator did not bless the candidate."""


def new_run_id() -> str:
    """A run id in TFX's own format (LocalDagRunner uses the start time too)."""
    return datetime.datetime.now().isoformat()


def run(args: argparse.Namespace) -> int:
    # Only light modules before the lock: a second run is refused at once, and
    # `--help` answers at once. TensorFlow and TFX load in _run_pipeline.
    from pipeline.config import variant
    from pipeline.inputs import check_csv_data_root
    from pipeline.run_lock import RunLock
    from schemas import DEFAULT_SCHEMA_DIR, load_schema_dir

    config = variant(args.config)
    config = config.replace(
        train_steps=args.train_steps or config.train_steps,
        eval_steps=args.eval_steps or config.eval_steps,
        enable_cache=config.enable_cache and not args.no_cache,
    )
    data_root = resolve_data_root(args.data_root)
    schema_dir = load_schema_dir(args.schema_dir or DEFAULT_SCHEMA_DIR)
    data_input = schema_dir.spec.input
    checked = check_csv_data_root(data_root, data_input.pattern, data_input.spans)
    check_label_columns(checked, schema_dir)
    output_dir = args.output_dir.resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    with RunLock(output_dir):
        claim_output_dir(output_dir, schema_dir.spec.name)
        with start_node_process(args) as node_process:
            return _run_pipeline(
                args, config, schema_dir, checked, data_root, output_dir, node_process
            )


def resolve_data_root(data_root: str) -> str:
    """An absolute local path, or the object-store URI (s3://, gs://) as given."""
    from pipeline.object_store import uri_scheme

    return data_root if uri_scheme(data_root) else str(Path(data_root).resolve())


def start_node_process(args: argparse.Namespace):
    """The second process that runs a node while this one runs another (pipeline/local.py).

    Started before this process imports TensorFlow: it imports on the other
    core meanwhile. A context manager either way; None with --sequential or
    on a single core, where it would only compete.
    """
    from contextlib import nullcontext

    from pipeline.node_process import NodeProcess, usable_cores

    if args.sequential or usable_cores() < 2:
        return nullcontext()
    return NodeProcess(initializer=_configure_logging, initargs=(args.verbose,))


def check_label_columns(data, schema_dir) -> None:
    """Fails at once when the data lacks the label's columns: the wrong schema dir, typically.

    `data` is the checked data root (`pipeline.inputs.CsvDataRoot`). Other schema
    mismatches are the ExampleValidator's to report, feature by feature.
    """
    from pipeline.inputs import InputDataError

    missing = [c for c in schema_dir.spec.label.source_columns if c not in data.header]
    if missing:
        raise InputDataError(
            f"{data.files[0]} has no column {', '.join(map(repr, missing))}, which the label of "
            f"{schema_dir.spec_file} reads. For other data, draft a schema dir with "
            "`python -m schemas.draft --data-root DIR --label COLUMN --output-dir SCHEMA_DIR` "
            "and pass --schema-dir SCHEMA_DIR"
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


def _run_pipeline(
    args: argparse.Namespace,
    config: PipelineConfig,
    schema_dir,
    checked: CsvDataRoot,
    data_root: str,
    output_dir: Path,
    node_process: NodeProcess | None = None,
) -> int:
    from tfx.orchestration import metadata as tfx_metadata

    from pipeline.beam import (
        beam_pipeline_args,
        choose_beam_mode,
        data_size_bytes,
        local_step_beam_args,
    )
    from pipeline.local import run_locally
    from pipeline.pipeline import EXAMPLE_GEN, create_pipeline
    from pipeline.run_summary import summarize_run
    from pipeline.transform_output import materialize_transform

    # TensorFlow, TFX and Beam leave millions of long-lived objects behind their
    # imports; every full garbage collection walked them all again (seconds of a
    # cold run: docs/where-the-time-goes.md). Frozen objects are never collected,
    # which costs nothing for modules that live as long as the process.
    gc.freeze()
    metadata = tfx_metadata.sqlite_metadata_connection_config(str(output_dir / "metadata.sqlite"))
    data_bytes = data_size_bytes(checked.files)
    beam_mode = choose_beam_mode(data_bytes, args.beam_mode)
    materialized = materialize_transform(data_bytes)

    spec = schema_dir.spec
    pipeline = create_pipeline(
        dataset=spec,
        pipeline_root=str(output_dir / "pipeline_root"),
        data_root=str(data_root),
        schema_path=str(schema_dir.schema_file),
        serving_model_dir=str(output_dir / "serving_model"),
        train_steps=config.train_steps,
        eval_steps=config.eval_steps,
        trainer_config=config.trainer,
        enable_cache=config.enable_cache,
        beam_pipeline_args=beam_pipeline_args(beam_mode),
        beam_pipeline_args_by_component=local_step_beam_args(beam_mode, example_gen=EXAMPLE_GEN),
        materialize_transform=materialized,
        metadata_connection_config=metadata,
    )
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
        # A failed run still gets its report, up to the failing component.
        if not args.no_report:
            write_run_report(metadata, spec.name, run_id, output_dir, error=_error_text(err))
        raise
    summary = summarize_run(metadata, spec.name, run_id)
    print(summary.format(), flush=True)
    if not args.no_report:
        write_run_report(metadata, spec.name, run_id, output_dir, summary=summary)
    if args.fail_if_not_blessed and summary.blessed is False:
        raise NotBlessedError(
            "the candidate was not blessed: " + "; ".join(summary.validation_failures)
            if summary.validation_failures
            else "the candidate was not blessed"
        )
    return 0


def _error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


def write_run_report(
    metadata, pipeline_name: str, run_id: str, output_dir: Path, *, summary=None, error=None
) -> Path | None:
    """Writes OUTPUT_DIR/reports/<run id>.html and latest.html, and prints where.

    The report never changes a run's outcome: if writing it fails, that is
    said on stderr and the run's own exit code stands.
    """
    import time

    from components.report.contents import RunReport
    from components.report.render import LATEST, write_report
    from pipeline.pipeline import COMPONENT_IDS
    from pipeline.run_summary import summarize_run

    started = time.monotonic()
    try:
        if summary is None:
            try:
                summary = summarize_run(metadata, pipeline_name, run_id)
            except LookupError:  # Failed before any component ran.
                summary = None
        report = (
            summary.report(expected_nodes=COMPONENT_IDS, error=error)
            if summary is not None
            else RunReport(pipeline_name, run_id, components=(), error=error)
        )
        path = write_report(report, output_dir / "reports")
    except Exception as err:  # Reported, never raised: see the docstring.
        print(f"warning: run report not written: {_error_text(err)}", file=sys.stderr, flush=True)
        return None
    print(
        f"Report: {path} (and {LATEST}; written in {time.monotonic() - started:.1f} s)",
        flush=True,
    )
    return path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _configure_logging(args.verbose)
    try:
        return run(args)
    except KeyboardInterrupt:
        print("error: interrupted; the serving directory was not changed", file=sys.stderr)
        return EXIT_INTERRUPTED
    except NotBlessedError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return EXIT_NOT_BLESSED
    except Exception as err:  # The last line must say why, whatever failed.
        if args.verbose:
            logging.exception("pipeline failed")
        print(f"error: {_error_text(err)}", file=sys.stderr, flush=True)
        return EXIT_FAILED


def exit_now(code: int) -> None:
    """Exits without a last garbage collection over everything the run allocated.

    Interpreter shutdown collected TensorFlow's object graph for about 2 s after
    the last line was printed. By now every output is written and closed, and
    the memory goes back to the OS either way. A run that read its data from
    s3:// leaves without C++ teardown (see pipeline.object_store.exit_process).
    """
    from pipeline.object_store import exit_process

    gc.freeze()
    exit_process(code)


if __name__ == "__main__":
    exit_now(main())
