"""The kfp.local internals run_compiled.py replaces, checked before and undone after.

kfp.local is KFP's own local executor; run_compiled.py replaces a few of its
functions (the task handler, the executor input, the outputs read back, the
task directory's name, the retry wait, the cache lookups) to make it play the
backend. Those are internals, not API: a kfp release may rename or reshape
them. So each replacement names the kfp release it was written against and
the parameters the original takes; `KfpLocalHooks` refuses to start, naming
the attribute, when the installed kfp is another release or an original is
missing or takes other parameters, and puts every original back on exit,
whatever happened in between.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import ModuleType
from typing import Any

# The kfp release whose kfp.local run_compiled.py's replacements were written for;
# kubeflow/kfp_sdk/pyproject.toml pins it.
KFP_RELEASE = "2.17.0"


class HookError(RuntimeError):
    """kfp.local is not what the replacements were written for; the message says where."""


@dataclass(frozen=True)
class Hook:
    """One attribute of a kfp module (`Class.method` allowed) and what replaces it."""

    module: ModuleType
    attribute: str
    replacement: Any
    # The original's parameter names, in order; None: not a function (a module, a class).
    parameters: tuple[str, ...] | None = None

    def where(self) -> str:
        return f"{self.module.__name__}.{self.attribute}"


def _owner_and_name(hook: Hook) -> tuple[Any, str]:
    *path, name = hook.attribute.split(".")
    owner: Any = hook.module
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            raise HookError(f"{hook.where()}: {'.'.join(path)} is gone from kfp.local")
    if not hasattr(owner, name):
        raise HookError(f"{hook.where()}: gone from kfp.local")
    return owner, name


def _check(hook: Hook, original: Any) -> None:
    if hook.parameters is None:
        return
    try:
        parameters = tuple(inspect.signature(original).parameters)
    except (TypeError, ValueError) as err:
        raise HookError(f"{hook.where()}: not a function any more ({err})") from None
    if parameters != hook.parameters:
        raise HookError(
            f"{hook.where()}: takes ({', '.join(parameters)}), the replacement was written "
            f"for ({', '.join(hook.parameters)})"
        )


class KfpLocalHooks:
    """A context manager: checks every hook, applies them all, and undoes them all."""

    def __init__(self, hooks: list[Hook], installed_release: str, release: str = KFP_RELEASE):
        self._hooks = hooks
        self._installed = installed_release
        self._release = release
        self._originals: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> KfpLocalHooks:
        if self._installed != self._release:
            raise HookError(
                f"kfp {self._installed} is installed; run_compiled.py replaces kfp.local "
                f"internals of kfp {self._release} (kubeflow/kfp_sdk/pyproject.toml pins it)"
            )
        resolved = []
        for hook in self._hooks:  # Every check before any change.
            owner, name = _owner_and_name(hook)
            original = getattr(owner, name)
            _check(hook, original)
            resolved.append((hook, owner, name, original))
        for hook, owner, name, original in resolved:
            self._originals.append((owner, name, original))
            setattr(owner, name, hook.replacement)
        return self

    def __exit__(self, *exc) -> None:
        while self._originals:
            owner, name, original = self._originals.pop()
            setattr(owner, name, original)
