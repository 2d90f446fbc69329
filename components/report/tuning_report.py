"""The tuning report: one self-contained HTML page of a search's trials and its winner.

Written by the tuner (`pipeline/local/tune.py`) to
OUTPUT_DIR/tuning/report.html, in the run report's style and with its
escaping: every value from the search (hyperparameter names and values, the
pipeline's name, the provenance) reaches the page as one printable line
(the `line` filter: control and line-break characters as their escapes)
through Jinja's autoescape.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.report.render import _environment, _write_atomically
from trainer.tuning import SearchResult

TEMPLATE = "tuning.html.j2"


def render_tuning_html(
    pipeline_name: str, result: SearchResult, frozen: dict[str, Any], frozen_to: str | None
) -> str:
    """`frozen`: the winner as the frozen file holds it; `frozen_to`: where it was written,
    or None where it was not (a partial search not accepted)."""
    names = sorted({name for t in result.trials for name in t.hyperparameters})
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            pipeline_name=pipeline_name,
            result=result,
            names=names,
            frozen=frozen,
            frozen_to=frozen_to,
        )
    )


def write_tuning_report(path: Path, html: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, html)
    return path
