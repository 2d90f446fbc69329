"""Searches the model's hyperparameters on this machine and freezes the winner.

    python tune_runner.py --max-trials 10                     # embedded taxi sample and task
    python tune_runner.py --schema-dir S --output-dir OUT --max-trials N --deadline 30m

It runs the pipeline's steps up to Transform (from cache where `local_runner.py`
already ran them into OUT), then KerasTuner trials of `trainer/search_space.py`
on Transform's train split, scored on its eval split. The search's state is
kept in OUT/tuning/: run the same command again to resume it. The winner is
frozen into S/hyperparameters.yaml (commit it), which every later run's
Trainer reads; the trials are in OUT/tuning/report.html.

This file is the command line: it turns flags into `TuneOptions` and exit
codes. The search itself is `pipeline.local.tune.run_tuning`.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys

import local_runner

EXIT_FAILED = 1
EXIT_PARTIAL = 4
EXIT_INTERRUPTED = 130
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smh]?)$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def duration_seconds(text: str) -> float:
    """`90`, `90s`, `30m` or `2h` as seconds; argparse's error otherwise."""
    match = _DURATION.match(text.strip())
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a positive duration: give seconds, or a number with s, m or h (30m)"
        )
    return float(match.group(1)) * _SECONDS[match.group(2)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Search the model's hyperparameters on the pipeline's Transform output."
    )
    local_runner.add_run_flags(parser)
    parser.add_argument("--max-trials", type=int, default=10, help="trial budget (default 10)")
    parser.add_argument(
        "--steps-per-trial", type=int, default=200, help="training steps per trial (default 200)"
    )
    parser.add_argument(
        "--eval-steps", type=int, help="eval-split steps scoring each trial (default from config)"
    )
    parser.add_argument(
        "--deadline",
        type=duration_seconds,
        help="wall clock for the whole search (90s, 30m, 2h): at the deadline the best "
        "completed trial stands, marked partial",
    )
    parser.add_argument(
        "--accept-partial",
        action="store_true",
        help="freeze the winner of a search the deadline cut short (default: refuse, exit "
        f"{EXIT_PARTIAL}; rerun on the same --output-dir to resume)",
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="trial processes at a time: KerasTuner workers of an oracle served on 127.0.0.1 "
        "(default 1: trials in this process)",
    )
    # What a local run has and a search does not need: no Trainer, no report of its own.
    parser.set_defaults(
        train_steps=None, sequential=True, fail_if_not_blessed=False, no_report=True
    )
    args = parser.parse_args(argv)
    if args.schema_dir is None and not local_runner.IN_CHECKOUT:
        # The winner is frozen into the schema directory: not into an installed copy's.
        parser.error("--schema-dir is required: this copy is installed, not a checkout")
    for flag in ("max_trials", "steps_per_trial", "eval_steps", "parallel"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            parser.error(f"--{flag.replace('_', '-')} must be a positive integer, got {value}")
    return args


def main(argv: list[str] | None = None) -> int:
    from pipeline.local.run import configure_logging, error_text
    from pipeline.local.tune import PartialSearchError, TuneOptions, run_tuning

    args = parse_args(argv)
    configure_logging(args.verbose)
    try:
        run = local_runner.options_from_args(args)
        run_tuning(
            TuneOptions(
                run=run,
                max_trials=args.max_trials,
                steps_per_trial=args.steps_per_trial,
                eval_steps=run.config.eval_steps,
                deadline_seconds=args.deadline,
                accept_partial=args.accept_partial,
                parallel=args.parallel,
            )
        )
        return 0
    except KeyboardInterrupt:
        print("error: interrupted; rerun with the same --output-dir to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except PartialSearchError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return EXIT_PARTIAL
    except Exception as err:  # The last line must say why, whatever failed.
        if args.verbose:
            logging.exception("tuning failed")
        print(f"error: {error_text(err)}", file=sys.stderr, flush=True)
        return EXIT_FAILED


if __name__ == "__main__":
    local_runner.exit_now(main())
