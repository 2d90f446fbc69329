"""The targets a benchmark checks, printed as a table under its measurements.

Each benchmark script measures this template beside the TFX taxi template in
one run and ends with its targets: what is asked, what was measured, and
whether it was met. The figures live on the docs' benchmark page, not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def load_average() -> float:
    """The 1-minute load average, printed beside every figure (docs/benchmarks.md#load)."""
    return float(Path("/proc/loadavg").read_text().split()[0])


@dataclass(frozen=True)
class Target:
    """`measured` must be at most `limit` (a ratio, or seconds, or GB: `unit` says)."""

    name: str
    measured: float
    limit: float
    unit: str = "x"

    @property
    def met(self) -> bool:
        return self.measured <= self.limit


def _format(value: float, unit: str) -> str:
    return f"{value:.2f}{unit}" if unit == "x" else f"{value:.2f} {unit}"


def targets_table(targets: list[Target]) -> str:
    rows = [("target", "at most", "measured", "met")]
    rows += [
        (t.name, _format(t.limit, t.unit), _format(t.measured, t.unit), "yes" if t.met else "NO")
        for t in targets
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)
