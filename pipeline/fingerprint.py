"""Content fingerprints of the code a component runs, for TFX's cache key.

TFX keys its cache on a component's inputs and execution properties. Given
`module_file=`, it packages the user module into a wheel whose hash lands in
those properties; given a module path (as this template does, so that nothing
is written under the pipeline root at compile time), it holds no trace of the
code, and an edit to the model would be served from cache.

`code_fingerprint(fn)` hashes the source of `fn`'s module and of every
first-party module it imports, transitively. First-party is read from where
a module's source lives: under the repository and outside a virtual
environment. So a package a fork adds (say `features/`, imported from
`trainer/`) counts as soon as it is imported, with no list to keep. The
pipeline puts it into the `custom_config` of Transform and Trainer, so an
edit to preprocessing re-runs Transform and everything downstream, an edit
to the model re-runs Trainer and downstream only, and an untouched component
stays cached. The fingerprint is a
plain string in the compiled pipeline, so the same holds on Kubeflow (compile
from the source that is in the image).

Sources are compared as syntax trees: comments and formatting do not count,
any change to code (docstrings included) does.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

# The repository: a module whose source is under it (and not in an environment
# installed there) is the project's own code, what a fork edits. Installed from
# the wheel (pip install, no editable checkout), it is the site-packages directory.
PROJECT_ROOT = Path(__file__).resolve().parents[1]
# A checkout has its pyproject.toml beside the packages; an installed copy does not.
IN_CHECKOUT = (PROJECT_ROOT / "pyproject.toml").is_file()
CUSTOM_CONFIG_KEY = "code_fingerprint"


@cache
def project_roots() -> tuple[Path, ...]:
    """Where the project's own modules are: the checkout, or, installed, each top-level
    package and module its distribution installed (site-packages holds every other one too)."""
    if IN_CHECKOUT:
        return (PROJECT_ROOT,)
    owners = importlib.metadata.packages_distributions()
    own = set(owners.get(__name__.split(".")[0], ()))
    names = sorted(name for name, dists in owners.items() if own & set(dists))
    return tuple(
        PROJECT_ROOT / name if (PROJECT_ROOT / name).is_dir() else PROJECT_ROOT / f"{name}.py"
        for name in names
    )


def _module_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _under(path: Path, roots: tuple[Path, ...]) -> bool:
    """Whether `path` is under one of `roots` and not in an environment installed there
    (a root may itself be in site-packages: an installed copy's package)."""
    resolved = path.resolve()
    return any(
        resolved.is_relative_to(root) and "site-packages" not in resolved.relative_to(root).parts
        for root in roots
    )


def is_first_party_file(path: Path) -> bool:
    """Whether the source file `path` is the project's own code (see the module's docstring)."""
    return _under(path, project_roots())


def _is_first_party_package(top_level: str, roots: tuple[Path, ...]) -> bool:
    """Whether the top-level package or module `top_level` lives under `roots`.

    Only top-level names are looked up here: `find_spec` of a dotted name
    imports its parents, and TensorFlow's would be imported for nothing.
    """
    try:
        spec = importlib.util.find_spec(top_level)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    locations = [*(spec.submodule_search_locations or []), *([spec.origin] if spec.origin else [])]
    # An origin may be a marker ("built-in", "frozen"), which would resolve against
    # the working directory: only file paths count.
    return any(
        _under(Path(location), roots) for location in locations if Path(location).is_absolute()
    )


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Absolute module names `tree` imports (`from a import b` yields `a` and `a.b`)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".")
                base_parts = parts if is_package else parts[:-1]
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, node.module] if node.module else base_parts)
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def first_party_modules(
    module: str, roots: Iterable[Path] | None = None
) -> dict[str, tuple[Path, ast.Module]]:
    """`module` and every first-party module it imports, transitively: name -> (file, tree).
    `roots`: where first-party sources are (default: `project_roots()`)."""
    roots = tuple(Path(root).resolve() for root in (project_roots() if roots is None else roots))
    first_party: dict[str, bool] = {}
    found: dict[str, tuple[Path, ast.Module]] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        top_level = name.split(".")[0]
        if top_level not in first_party:
            first_party[top_level] = _is_first_party_package(top_level, roots)
        if name in found or not first_party[top_level]:
            continue
        path = _module_file(name)
        if path is None or not _under(path, roots):
            continue  # `from pkg import CONSTANT`: not a module of its own.
        tree = ast.parse(path.read_text(), filename=str(path))
        found[name] = (path, tree)
        is_package = path.name == "__init__.py"
        pending.extend(_imported_names(tree, name, is_package))
        # Importing `a.b.c` runs a/__init__.py and a/b/__init__.py first.
        parts = name.split(".")
        pending.extend(".".join(parts[:i]) for i in range(1, len(parts)))
    return found


def code_fingerprint(fn: Callable, roots: Iterable[Path] | None = None) -> str:
    """A short hash of the code `fn` runs: its module and the first-party modules it imports."""
    digest = hashlib.sha256()
    for name, (_, tree) in sorted(first_party_modules(fn.__module__, roots).items()):
        digest.update(name.encode())
        digest.update(b"\0")
        # Syntax, not text: comments and formatting do not invalidate the cache.
        digest.update(ast.dump(tree).encode())
        digest.update(b"\0")
    digest.update(f"{fn.__module__}.{fn.__qualname__}".encode())
    return digest.hexdigest()[:16]
