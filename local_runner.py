"""Runs the pipeline on this machine: TFX's launcher per step, SQLite ML Metadata.

    python local_runner.py                      # embedded Chicago taxi sample and task
    python local_runner.py --data-root DIR --schema-dir SCHEMA_DIR --output-dir OUT

SCHEMA_DIR holds schema.pbtxt and dataset.yaml (draft both with
`python -m schemas.draft`); the dataset spec names the pipeline and sets the task.

Outputs land under --output-dir: pipeline_root/ (artifacts), metadata.sqlite,
and serving_model/<version>/ for every blessed, pushed model.

This file is the command line: it turns flags into `LocalRunOptions` and exit
codes. The run itself is `pipeline.local.run.run_local`, importable on its own.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.fingerprint import IN_CHECKOUT

if TYPE_CHECKING:
    from pipeline.local.run import LocalRunOptions

REPO_ROOT = Path(__file__).resolve().parent
# A checkout's embedded sample and outputs. Installed from the wheel, REPO_ROOT is
# site-packages: the sample data does not ship and outputs do not belong there, so
# --data-root and --output-dir are required (IN_CHECKOUT).
DEFAULT_DATA_ROOT = REPO_ROOT / "data" / "chicago_taxi"
DEFAULT_OUTPUT_DIR = REPO_ROOT / "outputs"
EXIT_FAILED = 1
EXIT_NOT_BLESSED = 3
EXIT_INTERRUPTED = 130


def checkout_default(value: object) -> dict[str, Any]:
    """A path flag's default in a checkout; installed (IN_CHECKOUT false), there is no
    such path beside the code, and the flag is required instead."""
    return {"default": value} if IN_CHECKOUT else {"required": True}


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """The flags saying what to run on and where, shared with tune_runner.py."""
    parser.add_argument(
        "--data-root",
        **checkout_default(str(DEFAULT_DATA_ROOT)),
        help="directory of CSV or Parquet files: a local path, s3://BUCKET/PREFIX or "
        "gs://BUCKET/PREFIX (default: the embedded taxi sample)",
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
        **checkout_default(DEFAULT_OUTPUT_DIR),
        help="artifacts, metadata and serving_model/ go here (default: ./outputs)",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="re-run every step instead of reusing results"
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
    parser.add_argument("--verbose", action="store_true", help="show all TFX/TensorFlow logs")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Run the TFX pipeline locally (TFX's launcher per step, SQLite metadata)."
    )
    add_run_flags(parser)
    parser.add_argument("--train-steps", type=int, help="training steps (default from config)")
    parser.add_argument("--eval-steps", type=int, help="validation steps (default from config)")
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="run one step at a time in this process, as TFX's LocalDagRunner does "
        "(default: a second process runs data validation beside Transform)",
    )
    parser.add_argument(
        "--fail-if-not-blessed",
        action="store_true",
        help=f"exit {EXIT_NOT_BLESSED} when the Evaluator does not bless the candidate "
        "(default: exit 0, as schedulers treat a run without a new model as a success)",
    )
    parser.add_argument(
        "--watch",
        action="store_true",
        help="stay up: run, then run again on every change to the code, the settings or the "
        "data, with TensorFlow and TFX kept imported (Ctrl-C twice to quit; docs/watch-mode.md)",
    )
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="do not write the HTML run report (OUTPUT_DIR/reports/<run id>.html, latest.html)",
    )
    args = parser.parse_args(argv)
    if args.watch and not IN_CHECKOUT:
        parser.error("--watch needs a checkout to watch: this copy is installed, not editable")
    for flag in ("train_steps", "eval_steps"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            parser.error(f"--{flag.replace('_', '-')} must be a positive integer, got {value}")
    return args


def options_from_args(args: argparse.Namespace, *, warm: bool = False) -> LocalRunOptions:
    """The run the flags ask for (pipeline.local.run.resolve_options does the resolving).
    `warm`: this process was forked by `--watch` (LocalRunOptions.warm)."""
    from pipeline.local.run import resolve_options
    from schemas import DEFAULT_SCHEMA_DIR, load_schema_dir

    schema_dir = load_schema_dir(args.schema_dir or DEFAULT_SCHEMA_DIR)
    return resolve_options(
        config_variant=args.config,
        data_root=args.data_root,
        # The tuner's frozen winner, where SCHEMA_DIR has one (tune_runner.py).
        hyperparameters=schema_dir.hyperparameters,
        dataset=schema_dir.spec,
        schema_file=schema_dir.schema_file,
        spec_file=schema_dir.spec_file,
        output_dir=args.output_dir,
        train_steps=args.train_steps,
        eval_steps=args.eval_steps,
        cache=not args.no_cache,
        beam_mode=args.beam_mode,
        sequential=args.sequential,
        fail_if_not_blessed=args.fail_if_not_blessed,
        write_report=not args.no_report,
        verbose=args.verbose,
        warm=warm,
    )


def main(argv: list[str] | None = None, *, warm: bool = False) -> int:
    """Runs the pipeline once (or, with --watch, on every change); returns the exit code.

    `warm`: this process is a run that `--watch` forked (pipeline/local/watch.py).
    """
    from contract.fields import one_line
    from pipeline.local.run import NotBlessedError, configure_logging, error_text, run_local

    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    configure_logging(args.verbose)
    if args.watch and not warm:
        from pipeline.local.watch import watch

        # Each run imports this module afresh, by its file's name (run as a script,
        # its __name__ is __main__).
        return watch(argv, args, runner_module=Path(__file__).stem)
    try:
        run_local(options_from_args(args, warm=warm))
        return 0
    except KeyboardInterrupt:
        print("error: interrupted; the serving directory was not changed", file=sys.stderr)
        return EXIT_INTERRUPTED
    except NotBlessedError as err:
        print(f"error: {one_line(err)}", file=sys.stderr, flush=True)
        return EXIT_NOT_BLESSED
    except Exception as err:  # The last line must say why, whatever failed.
        if args.verbose:
            logging.exception("pipeline failed")
        print(f"error: {error_text(err)}", file=sys.stderr, flush=True)
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
