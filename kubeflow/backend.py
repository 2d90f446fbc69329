"""The open-source Kubeflow Pipelines backend a compiled package needs, stated once.

TFX compiles every step into the `tfx-dag` sub-DAG of the exit handler
(kubeflow/steps/run_status.py). The backend honours a task's `retryPolicy` inside
a sub-DAG from 2.14.0 on (kubeflow/pipelines#11908; 2.5 to 2.13 read it in
the root DAG only, and ignore every retry here without a word), and passes an
exit handler its `PipelineTaskFinalStatus` from the same release. The compile
prints this minimum, the docs state it, and `kubeflow.submit` refuses an older
backend.
"""

from __future__ import annotations

import re

MINIMUM = (2, 14, 0)
MINIMUM_TEXT = ".".join(map(str, MINIMUM))
NEEDED_FOR = (
    "retries of steps inside the exit handler's sub-DAG and the exit handler's final status"
)
# The API server's release tag (TAG_NAME): 2.14.0, v2.15.1, 2.14.0-rc.1.
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$")


def parse_release(tag: str | None) -> tuple[int, int, int] | None:
    """A release tag as (major, minor, patch), or None where it names no release."""
    match = _RELEASE.match((tag or "").strip())
    if not match:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def requirement() -> str:
    """The minimum, in words, for the compile's output and the docs."""
    return f"Kubeflow Pipelines backend {MINIMUM_TEXT} or later ({NEEDED_FOR})"


def too_old(tag: str) -> str | None:
    """Why a backend of release `tag` cannot run the package, or None (unknown tags too)."""
    release = parse_release(tag)
    if release is None or release >= MINIMUM:
        return None
    return (
        f"the Kubeflow Pipelines backend is {tag}; this package needs {MINIMUM_TEXT} or later "
        f"for {NEEDED_FOR}. On an older backend every step would run once, never retried, "
        "and the run-status step would not get the run's outcome: upgrade KFP"
    )
