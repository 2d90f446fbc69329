"""Drafts a schema and a dataset spec from CSV or Parquet data, so a new dataset runs unedited.

    python -m schemas.draft --data-root DIR --label COLUMN --output-dir SCHEMA_DIR
    python local_runner.py --data-root DIR --schema-dir SCHEMA_DIR --output-dir OUT

With `--input-pattern 'span-{SPAN}/*.csv'` (and `--spans N`), DIR holds spans:
the draft reads the spans a run would, and writes the spec's `input:` section.
With `--closed COLUMN`, a categorical column's domain is closed: the schema
lists every value, and a new one stops a run. Other string domains tolerate a
small share of new values, and drift thresholds come from the data's own
noise (see each file's comments).

Writes SCHEMA_DIR/schema.pbtxt (TFDV's inference, curated as far as the data
allows) and SCHEMA_DIR/dataset.yaml (label, task, each column's kind, slices,
thresholds from the data), then reads both back through the same checks the
runner applies. Review and curate both: each file's comments say what was
decided from the data and why.

One module per job: profiles.py (the one pass over the rows, each column's
profile), task.py (the task and the naive model), features.py (each column's
kind, the slices), schema.py (the curated schema), noise.py (drift thresholds
from the data's noise), render.py with dataset.yaml.j2 (the spec's text). This
module runs them in order and checks what they wrote; `python -m
schemas.draft` is `main()`.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import get_args

from components.example_gen.input_files import left_out_line
from components.example_gen.parquet_files import ParquetError
from components.example_gen.spans import SpanPattern
from contract.dataset.error import DatasetSpecError
from contract.dataset.parse import parse_input
from contract.dataset.sections import DriftMeasure, InputSpec, Task
from contract.dataset.spec import PIPELINE_NAME_PATTERN, SCHEMA_FILE_NAME, SPEC_FILE_NAME
from contract.fields import one_line
from pipeline.inputs import InputDataError, check_data_root
from schemas.draft.features import choose_slices, close_columns, decide_column, drift_measure
from schemas.draft.noise import NOISE_ROWS, drift_thresholds
from schemas.draft.parquet_data import not_features, read_parquet_data
from schemas.draft.profiles import DraftError, profiles_of, read_data
from schemas.draft.render import render_spec
from schemas.draft.schema import curate_schema, schema_text, widen_schema
from schemas.draft.statistics import example_statistics
from schemas.draft.task import infer_task

__all__ = ["DraftError", "draft", "main"]


# The draft's exit code for data or flags it refuses (argparse's usage errors are 2 too);
# the README lists it beside the runner's.
EXIT_REFUSED = 2


def pipeline_name_for(data_root: Path) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", data_root.resolve().name.lower()).strip("-")
    name = name[:128] or "my-dataset"
    return name if PIPELINE_NAME_PATTERN.fullmatch(name) else "my-dataset"


def draft(
    data_root: Path,
    label: str,
    output_dir: Path,
    *,
    task: Task | None = None,
    name: str | None = None,
    force: bool = False,
    input_pattern: str | None = None,
    spans: int = 1,
    closed: Sequence[str] = (),
    ignore: Sequence[str] = (),
) -> str:
    """Writes OUTPUT_DIR/schema.pbtxt and dataset.yaml; returns a summary to print.

    `input_pattern`, `spans`: the data root holds spans (the spec's `input:`);
    the draft reads the spans a run would read. `closed`: categorical columns
    whose every value the schema lists (a new value stops a run). `ignore`:
    columns written under `ignore:` whatever they hold (a struct column too).
    """
    import tensorflow_data_validation as tfdv

    from schemas import column_types, load_schema_dir

    try:
        data_input = parse_input({"pattern": input_pattern, "spans": spans})
    except DatasetSpecError as err:
        raise DraftError(f"--input-pattern/--spans: {err}") from None
    try:
        data = check_data_root(
            data_root, data_input.pattern, data_input.spans, ignore=tuple(ignore)
        )
    except InputDataError as err:
        # A line that names the draft's own flag (`(the draft: --ignore seen_at)`) says it
        # already; a line that names only the spec's `ignore:` gets the flag beside it.
        message = str(err)
        named = "under `ignore:`" in message and "(the draft: --ignore" not in message
        hint = " (here: pass --ignore COLUMN)" if named else ""
        raise DraftError(f"{message}{hint}") from None
    skipped = data.parquet.skipped if data.parquet is not None else ()
    # Every column of the files, the ones never read (ignored) included.
    every_column = [*data.header, *(data.parquet.not_read if data.parquet is not None else ())]
    unknown = [c for c in ignore if c not in every_column]
    if unknown or label in ignore:
        raise DraftError(
            f"--ignore {(unknown or [label])[0]!r} is "
            + (
                f"not a column of the data (columns: {', '.join(every_column)})"
                if unknown
                else "the label"
            )
        )
    # The one pass over the rows (profiles and the noise sample); TFDV's
    # statistics below read the latest span again, in Beam, for the types.
    # Parquet: the rows of every file read, typed as ExampleGen types them.
    if data.parquet is not None:
        try:
            rows = read_parquet_data(data.parquet, sample_size=NOISE_ROWS)
        except ParquetError as err:  # a value the type table refuses: the runner's one line
            raise DraftError(str(err)) from None
    else:
        read = [c for c in data.header if c not in ignore]
        rows = read_data(data.files, read, sample_size=NOISE_ROWS)
    if label not in data.header:
        raise DraftError(
            f"--label {label!r} is not a column of the data (columns: {', '.join(data.header)})"
        )
    targets = [output_dir / SCHEMA_FILE_NAME, output_dir / SPEC_FILE_NAME]
    existing = [str(p) for p in targets if p.exists()]
    if existing and not force:
        raise DraftError(
            f"{', '.join(existing)} already exist(s); a draft never overwrites a curated "
            "file: choose another --output-dir, or pass --force"
        )
    name = name or pipeline_name_for(data_root)
    if not PIPELINE_NAME_PATTERN.fullmatch(name):
        raise DraftError(f"--name {name!r} must match {PIPELINE_NAME_PATTERN.pattern}")

    # Types as TFDV infers them from the examples ExampleGen writes from the files a
    # run reads (every span of the window, typed together as ExampleGen types them).
    inferred = tfdv.infer_schema(
        example_statistics(
            str(data_root),
            _statistics_patterns(data_input, data),
            data.header,
            data.format,
            tuple(ignore),
        ),
        infer_feature_shape=False,
    )
    types = column_types(inferred)
    profiles = profiles_of(rows, types)
    widened = {c: p.value_type for c, p in profiles.items() if p.value_type != types[c]}
    widen_schema(inferred, widened)
    types.update(widened)
    label_profile = profiles[label]
    task = infer_task(label_profile, task)
    decisions = {c: decide_column(profiles[c]) for c in types if c != label}
    if data.parquet is not None:
        decisions.update(
            {c: (None, why) for c, why in not_features(data.parquet).items() if c in decisions}
        )
    # Ignored columns are never read (nor typed, nor examples'): under `ignore:` as asked.
    decisions.update({c: (None, "--ignore") for c in ignore})
    if all(settings is None for settings, _ in decisions.values()):
        raise DraftError(
            "no column can be a feature: "
            + "; ".join(f"{c}: {reason}" for c, (_, reason) in decisions.items())
        )
    close_columns(decisions, closed, label)
    slices = choose_slices(decisions, profiles)
    # Columns no feature can hold, skipped as --ignore asked: under `ignore:`, with no
    # schema entry (ExampleGen never reads them).
    decisions.update({c: (None, "--ignore: no feature can hold its type") for c in skipped})
    ignored = {c for c, (settings, _) in decisions.items() if settings is None}
    marked_numbers = {
        c for c, (settings, _) in decisions.items() if settings and settings.get("missing_markers")
    }
    schema = curate_schema(
        inferred, profiles, label, task, ignored, marked_numbers, closed=set(closed)
    )
    measures: dict[str, DriftMeasure] = {
        c: drift_measure(profiles[c].value_type)
        for c, (settings, _) in decisions.items()
        if settings is not None
    }
    spec_text = render_spec(
        name=name,
        data_root=data_root,
        label=label_profile,
        task=task,
        decisions=decisions,
        slices=slices,
        profiles=profiles,
        drift_thresholds=drift_thresholds(rows, types, schema, measures),
        data_input=data_input,
    )

    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / SCHEMA_FILE_NAME).write_text(
        schema_text(schema, profiles, data_root=data_root, label=label, task=task, closed=closed)
    )
    (output_dir / SPEC_FILE_NAME).write_text(spec_text)
    # The runner's own checks, so a draft that would not run fails here.
    checked = load_schema_dir(output_dir)
    spec = checked.spec
    kinds = Counter(f.kind for f in spec.features.values())
    gate = spec.evaluation
    return "\n".join(
        [
            f"Drafted {spec.name}: {spec.task} on label {label!r}"
            + (f" (classes {list(spec.label.classes)})" if spec.label.classes else ""),
            "  features: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())),
            f"  ignored: {', '.join(spec.ignore) or 'none'}",
            f"  slices: {', '.join(spec.slices) or 'none'}",
            *(
                [
                    f"  input: {spec.input.pattern}, drafted from span(s) "
                    + ", ".join(str(s.span) for s in data.spans)
                ]
                if spec.input.has_spans
                else []
            ),
            *([f"  {line}"] if (line := left_out_line(str(data_root), data.left_out)) else []),
            *(
                f"  typed {column} {value_type}: the spans read hold values the latest "
                "span's types cannot take"
                for column, value_type in sorted(widened.items())
            ),
            f"  blessed when {gate.metric} {'>=' if gate.higher_is_better else '<='} "
            f"{gate.threshold:.4f} (naive model: {gate.naive_value:.4f})",
            *(
                f"  warning: {p.name} holds {p.nan_count} NaN cell(s); the schema refuses NaN "
                "(disallow_nan), so a run on this data stops at validation: drop or fill them"
                for p in profiles.values()
                if p.nan_count and p.name not in spec.ignore
            ),
            f"Wrote {output_dir / SCHEMA_FILE_NAME} and {output_dir / SPEC_FILE_NAME}.",
            f"Next: ./dev run --data-root {data_root} --schema-dir {output_dir} --output-dir OUT",
        ]
    )


def _statistics_patterns(data_input: InputSpec, data) -> list[str]:
    """The files TFDV infers types from, as ExampleGen's split patterns under the data
    root: every file (which the checks found to be data files), or each span's read."""
    if not data_input.has_spans or data_input.pattern is None:
        return ["*"]
    pattern = SpanPattern(data_input.pattern)
    return [pattern.for_span(span.span, span.version) for span in data.spans]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m schemas.draft", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--data-root", type=Path, required=True, help="directory of CSV or Parquet files"
    )
    parser.add_argument("--label", required=True, help="the column to predict")
    parser.add_argument(
        "--output-dir",
        type=Path,
        required=True,
        help="where to write schema.pbtxt and dataset.yaml (the runner's --schema-dir)",
    )
    parser.add_argument(
        "--task",
        choices=get_args(Task),
        help="default: from the label (2 values binary; a few strings or ints multiclass; "
        "else regression)",
    )
    parser.add_argument("--name", help="pipeline name (default: from the data root's name)")
    parser.add_argument(
        "--input-pattern",
        help="the data root holds spans: their pattern, e.g. 'span-{SPAN}/*.csv' or "
        "'{YYYY}-{MM}-{DD}/*.csv' (written to the spec's input.pattern)",
    )
    parser.add_argument(
        "--spans",
        type=int,
        default=1,
        help="with --input-pattern: how many latest spans a run reads",
    )
    parser.add_argument(
        "--closed",
        action="append",
        default=[],
        metavar="COLUMN",
        help="a categorical column whose every value the schema lists: a new value stops "
        "a run (repeat for several; default: domains tolerate a few new values)",
    )
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="COLUMN",
        help="a column that is no feature, written under ignore: (repeat for several); "
        "also a column no feature can hold (a struct), which the draft otherwise refuses",
    )
    parser.add_argument(
        "--force", action="store_true", help="overwrite existing files in --output-dir"
    )
    args = parser.parse_args(argv)
    try:
        summary = draft(
            args.data_root.resolve(),
            args.label,
            args.output_dir.resolve(),
            task=args.task,
            name=args.name,
            force=args.force,
            input_pattern=args.input_pattern,
            spans=args.spans,
            closed=args.closed,
            ignore=args.ignore,
        )
    except (DraftError, DatasetSpecError) as err:
        print(f"error: {one_line(err)}", file=sys.stderr)
        return EXIT_REFUSED
    print(summary)
    return 0
