"""Scores new data with the served model, on this machine: the scoring DAG, TFX's launcher per step.

    python score_runner.py --data-root NEW --serving-dir OUT/serving_model --output-dir SCORES \
        --key trip_id
    python score_runner.py ... --model-version 3 --format csv

The newest complete version under --serving-dir scores, unless --model-version
pins one. Scores land in SCORES/span=<span>/version=<version>/, committed once
with a _SUCCESS manifest (docs/batch-scoring.md).

This file is the command line: it turns flags into `ScoreOptions` and exit
codes. The run itself is `pipeline.local.score.score_local`, importable on its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from local_runner import (
    DEFAULT_OUTPUT_DIR,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    checkout_default,
    exit_now,
)

if TYPE_CHECKING:
    from pipeline.local.score import ScoreOptions

DEFAULT_SERVING_DIR = DEFAULT_OUTPUT_DIR / "serving_model"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Score new data with the served model (batch scoring, locally)."
    )
    parser.add_argument(
        "--data-root",
        required=True,
        help="the data to score, CSV or Parquet, as training reads it (the dataset spec's "
        "input: pattern and format; the latest span): a local path, s3:// or gs://",
    )
    parser.add_argument(
        "--input-pattern",
        help="the data root's span pattern, e.g. 'dt={YYYY}-{MM}-{DD}/*.parquet' (default: "
        "the dataset spec's input.pattern); 'none' scores the files at the top of the data "
        "root, as a flat folder, with a model trained on partitions",
    )
    parser.add_argument(
        "--serving-dir",
        # Installed from the wheel, there is no ./outputs beside the code (local_runner.py).
        **checkout_default(str(DEFAULT_SERVING_DIR)),
        help="the Pusher's serving directory (default: ./outputs/serving_model)",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        required=True,
        help="scores go here, a folder per span and version",
    )
    parser.add_argument(
        "--schema-dir",
        type=Path,
        help="the served model's dataset directory (schema.pbtxt, dataset.yaml; default: "
        "schemas/chicago_taxi)",
    )
    parser.add_argument(
        "--model-version", help="score with this served version (default: the newest complete one)"
    )
    parser.add_argument(
        "--key",
        action="append",
        dest="keys",
        metavar="COLUMN",
        help="an id column each output row carries (repeatable; default: keys: in the "
        "dataset spec)",
    )
    parser.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    parser.add_argument(
        "--max-error-share",
        type=float,
        default=0.001,
        help="fail when more than this share of the rows cannot be scored (default: 0.001)",
    )
    parser.add_argument(
        "--allow-duplicate-keys", action="store_true", help="score rows whose keys repeat"
    )
    parser.add_argument(
        "--beam-mode",
        choices=("auto", "in_memory", "multi_processing"),
        default="auto",
        help="DirectRunner mode (auto: in_memory for small data)",
    )
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="do not write the HTML scoring report (OUTPUT_DIR/_reports/<run id>.html, "
        "latest.html)",
    )
    parser.add_argument("--verbose", action="store_true", help="show all TFX/TensorFlow logs")
    args = parser.parse_args(argv)
    if not 0 <= args.max_error_share <= 1:
        parser.error(f"--max-error-share must be between 0 and 1, got {args.max_error_share}")
    return args


def options_from_args(args: argparse.Namespace) -> ScoreOptions:
    """The run the flags ask for: the dataset directory loaded, the keys from the flags
    or the dataset spec, the data root resolved."""
    from components.scoring.executor import ScoringSettings
    from contract.dataset.error import DatasetSpecError
    from contract.dataset.parse import parse_input
    from pipeline.local.score import ScoreOptions
    from pipeline.object_store import uri_scheme
    from schemas import DEFAULT_SCHEMA_DIR, load_schema_dir

    schema_dir = load_schema_dir(args.schema_dir or DEFAULT_SCHEMA_DIR)
    keys = tuple(args.keys or schema_dir.spec.keys)
    if not keys:
        raise ValueError(
            f"no key columns: pass --key COLUMN, or list them under keys: in {schema_dir.spec_file}"
        )
    data_root = args.data_root
    dataset = schema_dir.spec
    if args.input_pattern is not None:
        pattern = None if args.input_pattern.lower() == "none" else args.input_pattern
        try:
            data_input = parse_input({"pattern": pattern, "format": dataset.input.format})
        except DatasetSpecError as err:
            raise ValueError(f"--input-pattern: {err}") from None
        dataset = dataclasses.replace(dataset, input=data_input)
    return ScoreOptions(
        dataset=dataset,
        schema_file=schema_dir.schema_file,
        data_root=data_root if uri_scheme(data_root) else str(Path(data_root).resolve()),
        serving_dir=args.serving_dir,
        output_dir=args.output_dir,
        settings=ScoringSettings(
            keys=keys,
            output_format=args.format,
            max_error_share=args.max_error_share,
            allow_duplicate_keys=args.allow_duplicate_keys,
        ),
        model_version=args.model_version,
        beam_mode=args.beam_mode,
        verbose=args.verbose,
        write_report=not args.no_report,
    )


def main(argv: list[str] | None = None) -> int:
    from pipeline.local.run import configure_logging, error_text
    from pipeline.local.score import score_local

    args = parse_args(argv)
    configure_logging(args.verbose)
    try:
        score_local(options_from_args(args))
        return 0
    except KeyboardInterrupt:
        print("error: interrupted; no partition was committed", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # The last line must say why, whatever failed.
        if args.verbose:
            logging.exception("scoring failed")
        print(f"error: {error_text(err)}", file=sys.stderr, flush=True)
        return EXIT_FAILED


if __name__ == "__main__":
    exit_now(main())
