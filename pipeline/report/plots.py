"""The report's charts: matplotlib figures rendered to SVG text.

Each function returns a complete `<svg>` document as a string; `render` embeds
it as a `data:` image, so the charts' element ids cannot collide and the file
stays self-contained. Text is left as SVG text in a generic font family: the
browser draws it with a local font and fetches nothing.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # No display; before pyplot is imported anywhere.

from matplotlib import pyplot as plt
from matplotlib.figure import Figure

from pipeline.report.contents import (
    ComponentRun,
    FeatureStatistics,
    SliceMetrics,
    TrainingCurves,
)

_STYLE = {
    "svg.fonttype": "none",
    # Fixed ids and no timestamp: the same run gives the same SVG bytes.
    "svg.hashsalt": "run-report",
    "font.family": "sans-serif",
    "font.size": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
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


def timeline(components: Sequence[ComponentRun]) -> str:
    """One bar per component from its start to its end, coloured by state."""
    timed = [c for c in components if c.started_ms is not None and c.ended_ms is not None]
    with plt.rc_context(_STYLE):
        fig = _figure(7.0, 0.25 * max(len(components), 1) + 0.6)
        ax = fig.add_subplot()
        start = min((c.started_ms for c in timed), default=0)
        for row, c in enumerate(components):
            if c.started_ms is None or c.ended_ms is None:
                continue
            left = (c.started_ms - start) / 1e3
            ax.barh(
                row,
                max(c.seconds or 0.0, 0.05),
                left=left,
                color=STATE_COLORS.get(c.state, "#cccccc"),
            )
        ax.set_yticks(range(len(components)), [f"{c.node_id} ({c.state})" for c in components])
        ax.invert_yaxis()
        ax.set_xlabel("seconds since the first component started")
        return _to_svg(fig)


def feature_distribution(per_split: Sequence[tuple[str, FeatureStatistics]]) -> str:
    """A feature's histogram (numeric) or top values (categorical), one series per split.

    Heights are fractions of each split's examples, so splits of different
    sizes compare directly.
    """
    with plt.rc_context(_STYLE):
        fig = _figure(3.6, 1.8)
        ax = fig.add_subplot()
        kind = per_split[0][1].kind
        if kind == "numeric":
            for i, (split, stats) in enumerate(per_split):
                if not stats.histogram:
                    continue
                lows = [b.low for b in stats.histogram]
                widths = [max(b.high - b.low, 0.0) for b in stats.histogram]
                heights = [
                    b.count / stats.examples if stats.examples else 0.0 for b in stats.histogram
                ]
                ax.bar(
                    lows,
                    heights,
                    width=widths,
                    align="edge",
                    alpha=0.55,
                    color=SPLIT_COLORS[i % len(SPLIT_COLORS)],
                    label=split,
                )
            ax.set_ylabel("share of examples")
        else:
            labels: list[str] = []
            for _split, stats in per_split:
                for value, _count in stats.top_values[:8]:
                    if value not in labels and len(labels) < 8:
                        labels.append(value)
            n = max(len(per_split), 1)
            for i, (split, stats) in enumerate(per_split):
                counts = dict(stats.top_values)
                heights = [
                    counts.get(v, 0.0) / stats.examples if stats.examples else 0.0 for v in labels
                ]
                ax.barh(
                    [y + i / (n + 1) for y in range(len(labels))],
                    heights,
                    height=1 / (n + 1),
                    color=SPLIT_COLORS[i % len(SPLIT_COLORS)],
                    label=split,
                )
            ax.set_yticks(
                [y + (n - 1) / (2 * (n + 1)) for y in range(len(labels))],
                [v if len(v) <= 28 else v[:27] + "…" for v in labels],
            )
            ax.invert_yaxis()
            ax.set_xlabel("share of examples")
        ax.legend(fontsize=7, frameon=False)
        return _to_svg(fig)


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
        ax.set_title(metric)
        ax.set_xlabel("epoch")
        ax.xaxis.get_major_locator().set_params(integer=True)
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
            [s.metrics[metric].candidate for s in rows],
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
            [s.slice_name for s in rows],
        )
        ax.invert_yaxis()
        ax.set_title(metric)
        ax.legend(fontsize=7, frameon=False, loc="lower right")
        return _to_svg(fig)
