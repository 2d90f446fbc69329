"""The report's charts, as SVG text: matplotlib figures, and feature charts drawn directly.

Each function returns a complete `<svg>` document as a string; `render` embeds
it as a `data:` image, so the charts' element ids cannot collide and the file
stays self-contained. Text is left as SVG text in a generic font family: the
browser draws it with a local font and fetches nothing.

Text from the data (category values, slice names, step ids) is only text:
matplotlib's mathtext is off (`text.parse_math`), so `$0_to_$10` draws as
written, and `shown()` (contract.fields.one_line) turns each character an SVG
document cannot hold (XML 1.0 has no control characters) or a label should
not break on (line breaks) into a visible escape such as `\\x07` before any
renderer sees it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from xml.sax.saxutils import escape

import matplotlib

matplotlib.use("Agg")  # No display; before pyplot is imported anywhere.

from matplotlib import pyplot as plt
from matplotlib.figure import Figure

from components.report.contents import StepRun
from components.report.data_statistics import FeatureStatistics
from components.report.evaluation import SliceMetrics
from components.report.training import TrainingCurves
from contract.fields import one_line as shown

_STYLE = {
    "svg.fonttype": "none",
    # Fixed ids and no timestamp: the same run gives the same SVG bytes.
    "svg.hashsalt": "run-report",
    "font.family": "sans-serif",
    "font.size": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    # Labels come from the data: `$...$` is a price range, not a formula.
    "text.parse_math": False,
}
SPLIT_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")
STATE_COLORS = {
    "complete": "#2ca02c",
    "succeeded": "#2ca02c",
    "cached": "#7fbf7f",
    "failed": "#d62728",
    "running": "#ff7f0e",
    "canceled": "#8c564b",
}
CANDIDATE_COLOR, BASELINE_COLOR = "#1f77b4", "#aaaaaa"


def _to_svg(fig: Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return buffer.getvalue()


def _figure(width: float, height: float) -> Figure:
    # Callers hold plt.rc_context(_STYLE) until _to_svg: savefig reads it too.
    return plt.figure(figsize=(width, height))


def timeline(steps: Sequence[StepRun]) -> str:
    """One bar per step from its start to its end, coloured by state."""
    timed = [s for s in steps if s.started_ms is not None and s.ended_ms is not None]
    with plt.rc_context(_STYLE):
        fig = _figure(7.0, 0.25 * max(len(steps), 1) + 0.6)
        ax = fig.add_subplot()
        start = min((s.started_ms for s in timed if s.started_ms is not None), default=0)
        for row, s in enumerate(steps):
            if s.started_ms is None or s.ended_ms is None:
                continue
            left = (s.started_ms - start) / 1e3
            ax.barh(
                row,
                max(s.seconds or 0.0, 0.05),
                left=left,
                color=STATE_COLORS.get(s.state, "#cccccc"),
            )
        ax.set_yticks(range(len(steps)), [shown(f"{s.step_id} ({s.state})") for s in steps])
        ax.invert_yaxis()
        ax.set_xlabel("seconds since the first step started")
        return _to_svg(fig)


def _num(value: float) -> str:
    """A coordinate or axis label: short, and the same text for the same value."""
    return f"{value:.4g}"


def _axis_labels(values: Sequence[float]) -> list[str]:
    """Labels for axis positions, with just enough digits to tell them apart.

    Census tracts span 17,031,010,100 to 17,031,980,100: four significant
    digits would print 1.703e+10 at every tick.
    """
    for digits in range(4, 13):
        labels = [f"{v:.{digits}g}" for v in values]
        if len(set(labels)) == len(set(values)):
            return labels
    return labels


def _svg(width: int, height: int, body: Sequence[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="10">'
        + "".join(body)
        + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 10) -> str:
    return (
        f'<text x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}" font-size="{size}">'
        f"{escape(shown(text))}</text>"
    )


def _legend(names: Sequence[str], right: float, top: float) -> list[str]:
    body = []
    for i, name in enumerate(names):
        y = top + 12 * i
        color = SPLIT_COLORS[i % len(SPLIT_COLORS)]
        body.append(
            f'<rect x="{_num(right - 58)}" y="{_num(y - 7)}" width="8" height="8" fill="{color}"/>'
        )
        body.append(_text(right - 46, y, name, size=9))
    return body


def feature_distribution(per_split: Sequence[tuple[str, FeatureStatistics]]) -> str:
    """A feature's histogram (numeric) or top values (categorical), one series per split.

    Heights are fractions of each split's examples, so splits of different
    sizes compare directly. Drawn as SVG by hand, not with matplotlib: a report
    has one of these per feature, and matplotlib's cost per figure was most of
    the report's time (docs/where-the-time-goes.md).
    """
    width, height = 360, 180
    left, right, top, bottom = 44, width - 8, 8, height - 30
    body = [f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>']

    def share(count: float, stats: FeatureStatistics) -> float:
        return count / stats.examples if stats.examples else 0.0

    splits = [split for split, _ in per_split]
    if per_split[0][1].kind == "numeric":
        bars = [
            (i, b.low, b.high, share(b.count, stats))
            for i, (_, stats) in enumerate(per_split)
            for b in stats.histogram
        ]
        if bars:
            low = min(b[1] for b in bars)
            high = max(b[2] for b in bars)
            span = (high - low) or 1.0
            tallest = max(b[3] for b in bars) or 1.0

            def x(value: float) -> float:
                return left + (value - low) / span * (right - left)

            for i, bar_low, bar_high, value in bars:
                bar_height = value / tallest * (bottom - top)
                body.append(
                    f'<rect x="{_num(x(bar_low))}" y="{_num(bottom - bar_height)}" '
                    f'width="{_num(max(x(bar_high) - x(bar_low), 0.5))}" '
                    f'height="{_num(bar_height)}" fill="{SPLIT_COLORS[i % len(SPLIT_COLORS)]}" '
                    'fill-opacity="0.55"/>'
                )
            ticks = _axis_labels([low, (low + high) / 2, high])
            body += [
                _text(left, bottom + 12, ticks[0], "start"),
                _text((left + right) / 2, bottom + 12, ticks[1], "middle"),
                _text(right, bottom + 12, ticks[2], "end"),
                _text(left - 4, top + 8, f"{100 * tallest:.3g}%", "end"),
                _text(left - 4, bottom, "0", "end"),
            ]
        body.append(
            _text(
                (left + right) / 2, height - 4, "value (bar height: share of examples)", "middle", 9
            )
        )
    else:
        labels: list[str] = []
        for _split, stats in per_split:
            for top_value, _count in stats.top_values[:8]:
                if top_value not in labels and len(labels) < 8:
                    labels.append(top_value)
        left = 120
        body = [f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#333"/>']
        shares = [
            [share(dict(stats.top_values).get(v, 0.0), stats) for v in labels]
            for _, stats in per_split
        ]
        widest = max((v for row in shares for v in row), default=0.0) or 1.0
        row_height = (bottom - top) / max(len(labels), 1)
        bar_height = row_height / (len(per_split) + 1)
        for row, label in enumerate(labels):
            y = top + row * row_height
            short = label if len(label) <= 20 else label[:19] + "…"
            body.append(_text(left - 4, y + row_height / 2 + 3, short, "end", 9))
            for i, split_shares in enumerate(shares):
                body.append(
                    f'<rect x="{left}" y="{_num(y + i * bar_height)}" '
                    f'width="{_num(split_shares[row] / widest * (right - 60 - left))}" '
                    f'height="{_num(bar_height)}" fill="{SPLIT_COLORS[i % len(SPLIT_COLORS)]}"/>'
                )
        body += [
            f'<line x1="{left}" y1="{bottom}" x2="{right - 60}" y2="{bottom}" stroke="#333"/>',
            _text(left, bottom + 12, "0", "middle"),
            _text(right - 60, bottom + 12, f"{100 * widest:.3g}%", "middle"),
            _text((left + right - 60) / 2, height - 4, "share of examples", "middle", 9),
        ]
    body += _legend(splits, right, top + 8)
    return _svg(width, height, body)


def training_curve(curves: TrainingCurves, metric: str) -> str:
    """`metric` per epoch, training and validation."""
    with plt.rc_context(_STYLE):
        fig = _figure(3.4, 2.0)
        ax = fig.add_subplot()
        for label, series, color in (
            ("train", curves.train.get(metric, ()), SPLIT_COLORS[0]),
            ("validation", curves.validation.get(metric, ()), SPLIT_COLORS[1]),
        ):
            if series:
                epochs, values = zip(*series, strict=True)
                ax.plot(epochs, values, marker="o", markersize=3, color=color, label=label)
        ax.set_title(shown(metric))
        ax.set_xlabel("epoch")
        # MaxNLocator's parameter; matplotlib's stubs type the base Locator.
        ax.xaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
        ax.legend(fontsize=7, frameon=False)
        return _to_svg(fig)


def slice_comparison(slices: Sequence[SliceMetrics], metric: str) -> str:
    """`metric` on every slice, candidate beside baseline."""
    rows = [s for s in slices if metric in s.metrics and s.metrics[metric].candidate is not None]
    with plt.rc_context(_STYLE):
        fig = _figure(5.0, 0.3 * max(len(rows), 1) + 0.7)
        ax = fig.add_subplot()
        has_baseline = any(s.metrics[metric].baseline is not None for s in rows)
        height = 0.4 if has_baseline else 0.7
        ax.barh(
            range(len(rows)),
            [_bar_length(s.metrics[metric].candidate) for s in rows],
            height=height,
            color=CANDIDATE_COLOR,
            label="candidate",
        )
        if has_baseline:
            ax.barh(
                [y + height for y in range(len(rows))],
                [s.metrics[metric].baseline or 0.0 for s in rows],
                height=height,
                color=BASELINE_COLOR,
                label="baseline (served)",
            )
        ax.set_yticks(
            [y + (height / 2 if has_baseline else 0) for y in range(len(rows))],
            [shown(s.slice_name) for s in rows],
        )
        ax.invert_yaxis()
        ax.set_title(shown(metric))
        ax.legend(fontsize=7, frameon=False, loc="lower right")
        return _to_svg(fig)


def _bar_length(value: float | None) -> float:
    """A bar for `value`; none (NaN draws nothing) for a metric the run did not compute."""
    return math.nan if value is None else value
