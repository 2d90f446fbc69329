"""The scoring run report: one self-contained HTML page of what a batch scoring run did.

Written by a local scoring run (`pipeline/local/score.py`) to
OUTPUT_DIR/_reports/<run id>.html and `latest.html`: underscored, as
`_SUCCESS` and `_pipeline/` are, so readers of the scores skip it, and
outside every partition, so a report never makes a partition look complete
nor changes what its manifest lists (docs/batch-scoring.md).

It reads the scored files themselves (a committed partition, or a failed
run's attempt under `_temporary/`), not the run's own counts, and the
served version's evaluation record (`assets.extra/evaluation.json`, the
Evaluator's sums the Pusher copied in). That record holds counts at TFMA's
threshold, not a histogram of the eval predictions, so the served model's
side is the class mix it predicted on its eval split, where the record has
one. Every value from the data (keys, reasons, class names) reaches the page
through Jinja's autoescape and, in charts, `plots.shown`.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components import store_files
from components.report import plots
from components.report.data_statistics import FeatureStatistics, HistogramBucket
from components.report.render import _chart, _environment, write_pages
from components.scoring.output import ERRORS_FILE, PART_PREFIX, Manifest
from components.scoring.settings import CLASS_COLUMN, PREDICTION_COLUMN
from components.serving.served_version import ServedVersion
from contract.dataset.spec import DatasetSpec

TEMPLATE = "scoring.html.j2"
REPORTS_DIR = "_reports"
# How many failed rows the page lists; the errors file holds them all.
REASONS_LISTED = 5
HISTOGRAM_BUCKETS = 10
# The charts' series names: the legend holds about eight characters.
SCORED, SERVED_EVAL = "scored", "eval"
# The batched evaluator's confusion counts, [tp, tn, fp, fn] at TFMA's threshold
# (components/evaluator/batched_metrics.py, `_confusion`), are recorded under these metrics.
_CONFUSION_METRICS = ("binary_accuracy", "precision", "recall")
_MATRIX_PLOT = "multi_class_confusion_matrix_plot"
# A record names a key in TFMA's text form (`key_text`): `name: "recall" sub_key: {...} ...`.
_KEY_NAME = re.compile(r'(?:^|\s)name: "([^"]*)"')


@dataclass(frozen=True)
class Distribution:
    """Scores as the report charts them: a histogram (values) or a class mix (counts)."""

    label: str  # what is counted: "probability of big_tip", "class", "prediction"
    rows: int
    histogram: tuple[HistogramBucket, ...] = ()
    classes: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class ServedEvaluation:
    """What the served version's evaluation record says about its eval-split predictions."""

    note: str
    classes: tuple[tuple[str, float], ...] = ()  # predicted class -> eval rows


@dataclass(frozen=True)
class ScoringReport:
    """One scoring run: what it was given, what it wrote, and how it ended."""

    pipeline_name: str
    run_id: str
    status: str  # written, replaced, unchanged, or failed
    model_version: str | None
    model_digest: str | None
    span: int | None
    input_fingerprint: str | None
    max_error_share: float
    partition: str | None = None  # committed; None for a failed run
    scored_dir: str | None = None  # where the rows were read: the partition or the attempt
    rows: int | None = None
    errors: int | None = None
    first_errors: tuple[tuple[str, ...], ...] = ()  # keys..., reason
    error_columns: tuple[str, ...] = ()
    distribution: Distribution | None = None
    served: ServedEvaluation | None = None
    error: str | None = None

    @property
    def error_share(self) -> float | None:
        if self.rows is None or self.errors is None or not self.rows + self.errors:
            return None
        return self.errors / (self.rows + self.errors)


def read_errors(directory: str) -> tuple[tuple[str, ...], int, tuple[tuple[str, ...], ...]]:
    """(the errors file's columns, its rows, its first few rows)."""
    with store_files.open(os.path.join(directory, ERRORS_FILE), "r") as f:
        header, *rows = list(csv.reader(io.StringIO(f.read())))
    return tuple(header), len(rows), tuple(tuple(r) for r in rows[:REASONS_LISTED])


def read_predictions(directory: str, spec: DatasetSpec, output_format: str):
    """The scored rows' prediction columns (an Arrow table) from a partition's part files."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    column = PREDICTION_COLUMN if spec.task == "regression" else CLASS_COLUMN
    columns = [column] + ([positive_column(spec)] if spec.task == "binary" else [])
    tables = []
    for path in sorted(
        store_files.glob(os.path.join(directory, f"{PART_PREFIX}*.{output_format}"))
    ):
        with store_files.open(path, "rb") as f:
            data = pa.BufferReader(f.read())
        if output_format == "parquet":
            tables.append(pq.read_table(data, columns=columns))
        else:
            options = pa_csv.ConvertOptions(
                include_columns=columns,
                column_types={
                    c: pa.string() if c == CLASS_COLUMN else pa.float32() for c in columns
                },
            )
            tables.append(pa_csv.read_csv(data, convert_options=options))
    return pa.concat_tables(tables) if tables else None


def positive_column(spec: DatasetSpec) -> str:
    """A binary model's positive-class probability column: its second class's."""
    return f"probability_{spec.label.classes[1]}"


def _class_mix(values: Sequence[str], classes: Sequence[str]) -> tuple[tuple[str, float], ...]:
    counts = {c: 0.0 for c in classes}
    for value in values:
        counts[value] = counts.get(value, 0.0) + 1
    return tuple(counts.items())


def distribution_of(table, spec: DatasetSpec) -> Distribution:
    """The positive class's probability (binary), the class mix (multiclass), or the
    value (regression) of the scored rows."""
    import numpy as np

    rows = 0 if table is None else table.num_rows
    if spec.task == "multiclass":
        values = [] if table is None else table.column(CLASS_COLUMN).to_pylist()
        return Distribution(CLASS_COLUMN, rows, classes=_class_mix(values, spec.label.classes))
    column = positive_column(spec) if spec.task == "binary" else PREDICTION_COLUMN
    values = np.asarray([] if table is None else table.column(column).to_numpy(), np.float64)
    if spec.task == "binary":
        edges = np.linspace(0.0, 1.0, HISTOGRAM_BUCKETS + 1)
        label = f"probability of {spec.label.classes[1]}"
    else:
        low, high = (values.min(), values.max()) if len(values) else (0.0, 1.0)
        edges = np.linspace(low, high if high > low else low + 1.0, HISTOGRAM_BUCKETS + 1)
        label = PREDICTION_COLUMN
    counts, _ = np.histogram(values, edges)
    histogram = tuple(
        HistogramBucket(float(lo), float(hi), float(n))
        for lo, hi, n in zip(edges[:-1], edges[1:], counts, strict=True)
    )
    classes = (
        _class_mix(table.column(CLASS_COLUMN).to_pylist(), spec.label.classes)
        if spec.task == "binary" and table is not None
        else ()
    )
    return Distribution(label, rows, histogram=histogram, classes=classes)


def _overall_sums(record: Mapping[str, Any]) -> dict[str, Any]:
    """Metric name -> sums of the record's overall slice, for keys without a sub key."""
    for entry in record.get("candidate_sums") or ():
        if not entry.get("slice"):
            return {
                match.group(1): sums
                for text, sums in entry.get("sums", {}).items()
                if (match := _KEY_NAME.search(text)) and "sub_key" not in text
            }
    return {}


def served_evaluation(record: Mapping[str, Any] | None, spec: DatasetSpec) -> ServedEvaluation:
    """The served model's predicted class mix on its eval split, from its evaluation
    record where the record holds one; otherwise a note saying what is missing."""
    if record is None:
        return ServedEvaluation(
            "The served version holds no evaluation record (it was not pushed by this "
            "template's Pusher, or its Evaluator ran TFMA's own path): nothing to compare."
        )
    sums = _overall_sums(record)
    if spec.task == "binary":
        confusion = next(
            (sums[m] for m in _CONFUSION_METRICS if m in sums and len(sums[m]) == 4), None
        )
        if confusion is not None:
            tp, tn, fp, fn = confusion
            negative, positive = spec.label.classes
            return ServedEvaluation(
                "The evaluation record holds counts at TFMA's 0.5 threshold, not the eval "
                "predictions' histogram: compare the class mix.",
                classes=((negative, tn + fn), (positive, tp + fp)),
            )
    elif spec.task == "multiclass" and _MATRIX_PLOT in sums:
        # Rows: actual class; columns: predicted class + 1 (column 0: no class above 0).
        matrix = sums[_MATRIX_PLOT]
        predicted = [sum(row[i + 1] for row in matrix) for i in range(len(spec.label.classes))]
        return ServedEvaluation(
            "From the evaluation record's confusion matrix: the classes the served model "
            "predicted on its eval split.",
            classes=tuple(zip(spec.label.classes, predicted, strict=True)),
        )
    what = "error sums" if spec.task == "regression" else "no confusion counts"
    return ServedEvaluation(
        f"The evaluation record holds {what}, not the eval predictions' distribution: "
        "only this run's scores are shown."
    )


def _as_statistics(name: str, rows: int, distribution: Distribution, histogram: bool):
    if histogram:
        return FeatureStatistics(name, "numeric", rows, rows, histogram=distribution.histogram)
    return FeatureStatistics(name, "categorical", rows, rows, top_values=distribution.classes)


def render_scoring_html(report: ScoringReport) -> str:
    """The report as one HTML document; a chart that cannot be drawn is left out, with
    a note saying so."""
    import datetime

    left_out: list[str] = []
    charts = []
    d, served = report.distribution, report.served
    if d is not None and d.rows:
        if d.histogram:
            charts.append(
                _chart(
                    f"{d.label} histogram",
                    plots.feature_distribution,
                    [(SCORED, _as_statistics(d.label, d.rows, d, histogram=True))],
                    left_out=left_out,
                )
            )
        if d.classes:
            per_split = [(SCORED, _as_statistics(CLASS_COLUMN, d.rows, d, histogram=False))]
            if served is not None and served.classes:
                total = int(sum(n for _, n in served.classes))
                served_mix = Distribution(CLASS_COLUMN, total, classes=served.classes)
                per_split.append(
                    (SERVED_EVAL, _as_statistics(CLASS_COLUMN, total, served_mix, histogram=False))
                )
            charts.append(
                _chart("class mix", plots.feature_distribution, per_split, left_out=left_out)
            )
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            report=report,
            charts=[c for c in charts if c],
            left_out=left_out,
            generated=datetime.datetime.now().isoformat(timespec="seconds"),
        )
    )


def write_scoring_report(report: ScoringReport, output_dir: Path) -> Path:
    """Writes OUTPUT_DIR/_reports/<run id>.html and latest.html; returns the first."""
    return write_pages(render_scoring_html(report), report.run_id, output_dir / REPORTS_DIR)


def build_scoring_report(
    *,
    pipeline_name: str,
    run_id: str,
    model: ServedVersion | None,
    max_error_share: float,
    output_format: str,
    status: str,
    span: int | None = None,
    input_fingerprint: str | None = None,
    partition: str | None = None,
    error: str | None = None,
    attempt: str | None = None,
) -> ScoringReport:
    """The report of one run, local or Kubeflow, from what each can know of it.

    `model`: the version that scored, or None when the run stopped before one
    was chosen. A committed run (`partition`) is read from its files and
    manifest; a failed one (`error`) from the uncommitted `attempt` its error
    names, if any, with the model's digest computed here.
    """
    from components.scoring.output import read_manifest
    from components.serving.serving_dir import read_served_record

    fields: dict[str, Any] = {
        "pipeline_name": pipeline_name,
        "run_id": run_id,
        "status": status,
        "model_version": None if model is None else model.version,
        "model_digest": None,
        "max_error_share": max_error_share,
        "span": span,
        "input_fingerprint": input_fingerprint,
        "served": None
        if model is None
        else served_evaluation(read_served_record(model.path), model.spec),
        "error": error,
    }
    if partition is not None and model is not None:
        manifest = read_manifest(partition)
        fields["partition"] = partition
        if manifest is not None:
            fields.update(scored_fields(partition, model.spec, manifest.format, manifest))
    elif model is not None:
        fields["model_digest"] = model.digest()
        if attempt:
            fields.update(scored_fields(attempt, model.spec, output_format, None))
    return ScoringReport(**fields)


def scored_fields(
    directory: str, spec: DatasetSpec, output_format: str, manifest: Manifest | None
) -> dict[str, Any]:
    """`ScoringReport(**...)` fields read from a partition or an attempt's files."""
    columns, errors, first = read_errors(directory)
    table = read_predictions(directory, spec, output_format)
    fields: dict[str, Any] = {
        "scored_dir": directory,
        "rows": 0 if table is None else table.num_rows,
        "errors": errors,
        "error_columns": columns,
        "first_errors": first,
        "distribution": distribution_of(table, spec),
    }
    if manifest is not None:
        fields.update(
            model_version=manifest.model_version,
            model_digest=manifest.model_digest,
            span=manifest.span,
            input_fingerprint=manifest.input_fingerprint,
        )
    return fields
