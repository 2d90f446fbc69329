"""The fork's pipeline/config.py as the machinery reads it: `VARIANTS` and, optional,
`extra_steps`, the fork's own steps in every runner's DAG (trainer/fork DECLARED).

Only the runners and create_pipeline read it; it sits here, below them, so that the
interface is one package (pyproject.toml's layers contract names these two imports).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from trainer.fork import FORK_FILES, ForkInterfaceError, take, take_callable

if TYPE_CHECKING:
    from pipeline.pipeline_config import PipelineConfig

_FILE = FORK_FILES["pipeline.config"]


def variants() -> dict[str, Callable[[], PipelineConfig]]:
    from pipeline import config

    found = take(config, "VARIANTS")
    if not isinstance(found, dict) or not all(callable(v) for v in found.values()):
        raise ForkInterfaceError(f"{_FILE}: VARIANTS must map names to functions, got {found!r}")
    return found


def variant(name: str) -> PipelineConfig:
    """The configuration variant `name` (`--config NAME`, `config_variant:` on Kubeflow)."""
    from pipeline.pipeline_config import PipelineConfig

    known = variants()
    if name not in known:
        raise ValueError(f"unknown config variant {name!r}; choose from {sorted(known)}")
    made = known[name]()
    if isinstance(made, PipelineConfig):
        return made
    names = [f.name for f in dataclasses.fields(PipelineConfig)]
    if not dataclasses.is_dataclass(made) or not all(hasattr(made, n) for n in names):
        raise ForkInterfaceError(
            f"{_FILE}: variant {name!r} returned {type(made).__qualname__}, not a "
            "PipelineConfig (pipeline/pipeline_config.py)"
        )
    # A fork made before PipelineConfig moved to the template keeps the class in its own
    # file: its values are taken into the template's class, and the line says what to do.
    print(
        f"warning: {_FILE} defines its own PipelineConfig; the template's is used with its "
        "values: replace the class with `from pipeline.pipeline_config import "
        'PipelineConfig` (CHANGELOG.md, "Migrating a fork")',
        file=sys.stderr,
    )
    return PipelineConfig(**{n: getattr(made, n) for n in names})


def _no_steps(dag: Any) -> Sequence[Any]:
    del dag
    return ()


def extra_steps(dag: Any) -> tuple[Any, ...]:
    """The fork's own steps, wired to the DAG's outputs (`dag`: pipeline/runner_steps.py's
    DagSteps, `dag[step_id].outputs[...]`)."""
    from pipeline import config

    return tuple(take_callable(config, "extra_steps", _no_steps)(dag))
