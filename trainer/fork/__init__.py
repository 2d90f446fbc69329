"""The fork's interface: the one place the template's machinery reads the fork's files.

A fork owns the files copier.yml lists under `_skip_if_exists`: `copier update`
never touches them, so a fork made years ago still has its own copy. The
machinery therefore takes from them only the names declared here (`DECLARED`),
and only through this package, one module per file (`model_file`,
`custom_file`, `search_space_file`, `config_file`). Everything else a fork file
used to hold (the serving output names, the model's inputs, its compile,
`PipelineConfig`) is the template's, in trainer/model_support.py and
pipeline/pipeline_config.py, and reaches forks with every update.

A hook marked optional has the template's default, so a fork made before the
hook existed runs unchanged; a required name a fork file lacks stops the run
with one line naming the file, the name and what it must be.

Held by import-linter's contract "Only the fork's interface imports the fork's
files" (pyproject.toml) and tests/test_fork_boundary.py. The modules here import
their fork file inside each function: the code fingerprint (pipeline/
fingerprint.py) follows those imports, so a step's cache key covers just the
fork files it reads, and importing this package imports none of them.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

# The fork's Python files: module -> path. Its other files are kubeflow/pipeline.yaml
# and the dataset directory (schemas/<dataset>/dataset.yaml, schema.pbtxt), read as data.
FORK_FILES = {
    "trainer.model": "trainer/model.py",
    "trainer.custom": "trainer/custom.py",
    "trainer.search_space": "trainer/search_space.py",
    "pipeline.config": "pipeline/config.py",
}


@dataclass(frozen=True)
class Hook:
    """One name the machinery takes from a fork file: what it must be, and whether a fork
    may leave it out (then the template's default is used)."""

    what: str
    optional: bool = False


DECLARED: dict[str, dict[str, Hook]] = {
    "trainer.model": {
        "build_model": Hook(
            "build_model(config, label, input_sizes, *, dtype_policy) -> keras.Model"
        ),
        "loss_and_metrics": Hook("loss_and_metrics(label) -> (loss, [gate metric, ...])"),
        "optimizer": Hook("optimizer(config) -> keras.optimizers.Optimizer", optional=True),
    },
    "trainer.custom": {
        "extra_features": Hook("extra_features(inputs) -> {name: float32 tensor [batch]}"),
        "adjust_features": Hook(
            "adjust_features(features, inputs) -> {name_xf: tensor}", optional=True
        ),
        # Plus the function a spec's `label.derive` names (custom_file.derived_label).
    },
    "trainer.search_space": {
        "search_space": Hook("search_space(hp) -> Hyperparameters"),
        "Hyperparameters": Hook(
            "a frozen dataclass extending trainer.config.ModelConfig", optional=True
        ),
    },
    "pipeline.config": {
        "VARIANTS": Hook("VARIANTS: {name: function returning a PipelineConfig}"),
        "extra_steps": Hook("extra_steps(dag) -> [TFX component, ...]", optional=True),
    },
}
# Names that fork files made before this interface hold and the template no longer reads
# (they are the template's now, in trainer/model_support.py and pipeline/pipeline_config.py):
# looked for only to tell such a fork what to move (CHANGELOG.md, "Migrating a fork").
RETIRED: dict[str, tuple[str, ...]] = {
    "trainer.model": (
        "compile_model",
        "output_name",
        "model_input_sizes",
        "random_model_inputs",
        "PROBABILITIES_OUTPUT",
        "PREDICTION_OUTPUT",
    ),
    "pipeline.config": ("PipelineConfig", "variant"),
}

# Template modules a fork file may import that moved (CHANGELOG.md, "Migrating a fork"):
# the old module -> the package (or module) its names are in now. `copier update` keeps a
# fork's file, import and all, so the check before a run says where each name went.
MOVED_MODULES: dict[str, str] = {
    "trainer.dataset_spec": "contract.dataset",
    "trainer.fields": "contract.fields",
    "trainer.task_metrics": "contract.dataset.task_metrics",
}
# The project these files sit in (trainer/fork/__init__.py's grandparent): where the moved
# names are looked up, from the source, as the check reads everything.
_PROJECT = Path(__file__).resolve().parents[2]

_MISSING: Any = object()


class ForkInterfaceError(ValueError):
    """A fork file lacks a name the machinery needs, or holds one of the wrong kind."""


def take(module: ModuleType, name: str, default: Any = _MISSING) -> Any:
    """`name` from the fork file `module`, which DECLARED must list; the template's `default`
    for an optional hook the file does not define."""
    hooks = DECLARED[module.__name__]
    if name not in hooks:
        raise KeyError(f"{name!r} is not declared for {module.__name__} (trainer/fork DECLARED)")
    hook = hooks[name]
    value = getattr(module, name, _MISSING)
    if value is not _MISSING:
        return value
    if hook.optional and default is not _MISSING:
        return default
    raise _missing_name(module.__name__, name)


def _missing_name(module: str, name: str) -> ForkInterfaceError:
    """The one line for a required name a fork file does not define (at run time or before)."""
    return ForkInterfaceError(
        f"{FORK_FILES[module]} defines no {name}: the template needs {DECLARED[module][name].what} "
        '(docs/forks-and-updates.md, "What the template reads from your files")'
    )


def take_callable(module: ModuleType, name: str, default: Any = _MISSING) -> Any:
    value = take(module, name, default)
    if not callable(value):
        raise ForkInterfaceError(
            f"{FORK_FILES[module.__name__]}: {name} is a {type(value).__name__}, not a "
            f"function; the template needs {DECLARED[module.__name__][name].what}"
        )
    return value


def retired_compile_model() -> str:
    """What a model file from before the interface is told: its compile_model is not called."""
    return (
        f"{FORK_FILES['trainer.model']} defines compile_model, which the template no longer "
        "calls: move the optimizer it builds into `def optimizer(config)` and delete "
        "compile_model, output_name, model_input_sizes and random_model_inputs "
        '(CHANGELOG.md, "Migrating a fork")'
    )


def top_level_names(tree: ast.Module, imported: bool = True) -> set[str]:
    """A module's top-level names; with `imported`, those it imports too (a fork file may
    take a hook from elsewhere and so define it by its import)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif imported and isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _homes(package: str) -> dict[str, str]:
    """Each top-level name the modules of `package` (a package or a module of the project)
    define themselves -> the module that defines it, read from their source."""
    base = _PROJECT.joinpath(*package.split("."))
    if not base.is_dir():
        return {}
    homes: dict[str, str] = {}
    for path in sorted(base.glob("*.py")):
        module = package if path.stem == "__init__" else f"{package}.{path.stem}"
        tree = ast.parse(path.read_text(), str(path))
        for name in top_level_names(tree, imported=False):
            homes.setdefault(name, module)
    return homes


def moved_import(file: str, tree: ast.Module) -> str | None:
    """The line that tells a fork file importing a moved template module (MOVED_MODULES)
    where its names are now, or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in MOVED_MODULES:
            old = node.module
            homes = _homes(MOVED_MODULES[old])
            by_module: dict[str, list[str]] = {}
            for alias in node.names:
                home = homes.get(alias.name, MOVED_MODULES[old])
                by_module.setdefault(home, []).append(alias.name)
            where = "; ".join(
                f"import {' and '.join(names)} from {home}" for home, names in by_module.items()
            )
        elif isinstance(node, ast.Import) and any(a.name in MOVED_MODULES for a in node.names):
            old = next(a.name for a in node.names if a.name in MOVED_MODULES)
            where = f"import {MOVED_MODULES[old]} instead"
        else:
            continue
        return (
            f"{file}, line {node.lineno}: imports {old}, which the template moved: {where} "
            '(CHANGELOG.md, "Migrating a fork")'
        )
    return None


def check_fork_files(root: Path | None = None) -> None:
    """Before a run starts (the runners, the Kubeflow compile): each fork file parses and
    defines every required name, and a model file from before the interface, or a file
    importing a template module that moved, is told what to change, in one line
    (ForkInterfaceError), instead of a step failing minutes in. Reads the
    files' source only: nothing is imported, so TensorFlow is not loaded for it. `root`: the
    project the files are in (default: where Python finds them)."""
    for module, hooks in DECLARED.items():
        if root is None:
            spec = importlib.util.find_spec(module)
            path = Path(spec.origin) if spec is not None and spec.origin else None
        else:
            path = root / FORK_FILES[module]
        if path is None or not path.is_file():
            raise ForkInterfaceError(
                f"{FORK_FILES[module]} is missing: the template reads "
                f"{', '.join(hooks)} from it (docs/forks-and-updates.md)"
            )
        try:
            tree = ast.parse(path.read_text(), str(path))
        except SyntaxError as err:
            # Still a SyntaxError (what --watch and a user look for), in one line.
            raise SyntaxError(f"{FORK_FILES[module]}, line {err.lineno}: {err.msg}") from None
        moved = moved_import(FORK_FILES[module], tree)
        if moved is not None:
            raise ForkInterfaceError(moved)
        defined = top_level_names(tree)
        for name, hook in hooks.items():
            if not hook.optional and name not in defined:
                raise _missing_name(module, name)
        if module == "trainer.model" and "compile_model" in defined and "optimizer" not in defined:
            raise ForkInterfaceError(retired_compile_model())
