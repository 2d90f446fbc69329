"""Renders a `RunReport` into one self-contained HTML file, and writes it."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
from absl import logging

from components.report import plots
from components.report.contents import RunReport
from contract.fields import one_line

TEMPLATE = "report.html.j2"
LATEST = "latest.html"
# Section ids, in page order: tests and readers can rely on them.
SECTIONS = (
    "outcome",
    "dag",
    "input",
    "statistics",
    "anomalies",
    "drift",
    "training",
    "runtime",
    "evaluation",
)
NO_VALUE = "\N{EN DASH}"
_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._:+-]")


def _svg_data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode("ascii")


def _number(value: object, digits: int = 4) -> str:
    if value is None:
        return NO_VALUE
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.{digits}f}" if abs(value) < 1e6 else f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("components.report", "."),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["number"] = _number
    env.filters["svg"] = _svg_data_uri
    env.filters["pct"] = lambda v: NO_VALUE if v is None else f"{100 * v:.1f}%"
    # Text from the data as one printable line: control and line-break characters
    # as their escapes (contract.fields.one_line).
    env.filters["line"] = one_line
    return env


def _chart(what: str, draw: Callable[..., str], *args: Any, left_out: list[str]) -> str | None:
    """`draw(*args)`, or None with a note in `left_out` where it raised.

    A chart is never worth the report: the page is written without it, and says
    so (on Kubeflow, after Deploy has served the model, a report step that
    raised would fail the run).
    """
    try:
        return draw(*args)
    except Exception as err:  # Any failure to draw leaves one chart out.
        logging.warning("Run report: the %s chart was not drawn: %r", what, err)
        left_out.append(
            f"The {what} chart is left out: it could not be drawn "
            f"({type(err).__name__}: {err}). The tables hold its numbers."
        )
        return None


def render_html(report: RunReport) -> str:
    """The report as one HTML document with its charts inlined (a chart that cannot be
    drawn is left out, with a note saying so)."""
    left_out = list(report.left_out)
    features = []
    if report.statistics:
        names = sorted({f.name for s in report.statistics for f in s.features})
        for name in names:
            per_split = [
                (s.split, f) for s in report.statistics for f in s.features if f.name == name
            ]
            features.append(
                {
                    "name": name,
                    "kind": per_split[0][1].kind,
                    "per_split": per_split,
                    "chart": _chart(
                        f"{name} distribution",
                        plots.feature_distribution,
                        per_split,
                        left_out=left_out,
                    ),
                }
            )
    curves = []
    if report.curves:
        curves = [
            {
                "metric": m,
                "chart": _chart(
                    f"{m} training curve",
                    plots.training_curve,
                    report.curves,
                    m,
                    left_out=left_out,
                ),
            }
            for m in report.curves.metrics
        ]
    slice_charts = []
    if report.evaluation and report.evaluation.slices:
        metric_names = sorted(
            {m for s in report.evaluation.slices for m in s.metrics} - {"example_count"}
        )
        slice_charts = [
            {
                "metric": m,
                "chart": _chart(
                    f"{m} per slice",
                    plots.slice_comparison,
                    report.evaluation.slices,
                    m,
                    left_out=left_out,
                ),
            }
            for m in metric_names
        ]
    timeline = (
        _chart("step timeline", plots.timeline, report.steps, left_out=left_out)
        if report.steps
        else None
    )
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            report=report,
            sections=SECTIONS,
            timeline=timeline,
            features=features,
            curves=curves,
            slice_charts=slice_charts,
            left_out=left_out,
            generated=datetime.datetime.now().isoformat(timespec="seconds"),
        )
    )


def render_what_it_can(build: Callable[[], RunReport], bare: RunReport) -> tuple[RunReport, str]:
    """`build()`'s report and its page; where building or rendering it raises, `bare`'s,
    with a note saying what was left out and why.

    For Kubeflow's report steps, where `bare` holds what a step knows without
    reading an artifact (the steps, the notes): the RunReport step runs after
    Deploy has served the model, and a step that raised would fail that run.
    """
    try:
        report = build()
        return report, render_html(report)
    except Exception as err:  # Whatever it was, the steps' states are still worth a page.
        logging.warning("Run report: only the steps' states are shown: %r", err)
        report = dataclasses.replace(
            bare,
            left_out=(
                *bare.left_out,
                "The report's sections are left out: they could not be read or drawn "
                f"({type(err).__name__}: {err}). The step's log holds the details.",
            ),
        )
        return report, render_html(report)


def report_filename(run_id: str) -> str:
    """`<run id>.html`, with anything a file name cannot hold replaced by `_`."""
    return _UNSAFE_FILENAME.sub("_", run_id) + ".html"


def _write_atomically(path: Path, text: str) -> None:
    # A reader (or a browser reloading latest.html) never sees half a file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_report(report: RunReport, reports_dir: Path) -> Path:
    """Writes `reports_dir/<run id>.html` and `reports_dir/latest.html`; returns the first."""
    return write_pages(render_html(report), report.run_id, reports_dir)


def write_pages(html: str, run_id: str, reports_dir: Path) -> Path:
    """`html` as `reports_dir/<run id>.html` and `reports_dir/latest.html`; returns the first."""
    reports_dir.mkdir(parents=True, exist_ok=True)
    path = reports_dir / report_filename(run_id)
    _write_atomically(path, html)
    _write_atomically(reports_dir / LATEST, html)
    return path
