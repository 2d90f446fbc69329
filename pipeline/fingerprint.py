"""Content fingerprints of the code a component runs, for TFX's cache key.

TFX keys its cache on a component's inputs and execution properties. Given
`module_file=`, it packages the user module into a wheel whose hash lands in
those properties; given a module path (as this template does, so that nothing
is written under the pipeline root at compile time), it holds no trace of the
code, and an edit to the model would be served from cache.

`code_fingerprint(fn)` hashes the source of `fn`'s module and of every
first-party module it imports, transitively. The pipeline puts it into the
`custom_config` of Transform and Trainer, so an edit to preprocessing re-runs
Transform and everything downstream, an edit to the model re-runs Trainer and
downstream only, and an untouched component stays cached. The fingerprint is a
plain string in the compiled pipeline, so the same holds on Kubeflow (compile
from the source that is in the image).

Sources are compared as syntax trees: comments and formatting do not count,
any change to code (docstrings included) does.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from collections.abc import Callable, Iterable
from pathlib import Path

# Top-level packages of this project: their code is what a fork edits.
FIRST_PARTY_PACKAGES = ("trainer", "components", "pipeline", "schemas")
CUSTOM_CONFIG_KEY = "code_fingerprint"


def _module_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _is_first_party(name: str, packages: Iterable[str]) -> bool:
    return name.split(".")[0] in packages


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


def _first_party_trees(module: str, packages: Iterable[str]) -> dict[str, tuple[Path, ast.Module]]:
    """`module` and every first-party module it imports, transitively: name -> (file, tree)."""
    packages = tuple(packages)
    found: dict[str, tuple[Path, ast.Module]] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        if name in found or not _is_first_party(name, packages):
            continue
        path = _module_file(name)
        if path is None:
            continue  # `from pkg import CONSTANT`: not a module of its own.
        tree = ast.parse(path.read_text(), filename=str(path))
        found[name] = (path, tree)
        is_package = path.name == "__init__.py"
        pending.extend(_imported_names(tree, name, is_package))
        # Importing `a.b.c` runs a/__init__.py and a/b/__init__.py first.
        parts = name.split(".")
        pending.extend(".".join(parts[:i]) for i in range(1, len(parts)))
    return found


def first_party_sources(
    module: str, packages: Iterable[str] = FIRST_PARTY_PACKAGES
) -> dict[str, Path]:
    """`module` and every first-party module it imports, transitively: name -> file."""
    return {name: path for name, (path, _) in _first_party_trees(module, packages).items()}


def code_fingerprint(fn: Callable, packages: Iterable[str] = FIRST_PARTY_PACKAGES) -> str:
    """A short hash of the code `fn` runs: its module and the first-party modules it imports."""
    digest = hashlib.sha256()
    for name, (_, tree) in sorted(_first_party_trees(fn.__module__, packages).items()):
        digest.update(name.encode())
        digest.update(b"\0")
        # Syntax, not text: comments and formatting do not invalidate the cache.
        digest.update(ast.dump(tree).encode())
        digest.update(b"\0")
    digest.update(f"{fn.__module__}.{fn.__qualname__}".encode())
    return digest.hexdigest()[:16]
