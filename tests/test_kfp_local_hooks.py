"""run_compiled.py's replacements of kfp.local internals: checked before, undone after.

The hooks themselves run in every executed test, against the kfp the
reference environment pins; here their guard is shown on a stand-in module.
"""

from __future__ import annotations

import types

import pytest

from kubeflow.standin_harness.kfp_local_hooks import KFP_RELEASE, Hook, HookError, KfpLocalHooks


def internals() -> types.ModuleType:
    module = types.ModuleType("kfp.local.internals")

    def construct_executor_input(component_spec, arguments, task_root, block_input_artifact):
        return "original"

    class LocalCache:
        def get(self, key):
            return "original"

    module.construct_executor_input = construct_executor_input
    module.LocalCache = LocalCache
    return module


def hooks(module) -> list[Hook]:
    return [
        Hook(
            module,
            "construct_executor_input",
            lambda *args: "replaced",
            ("component_spec", "arguments", "task_root", "block_input_artifact"),
        ),
        Hook(module, "LocalCache.get", lambda self, key: "replaced", ("self", "key")),
    ]


def enter(module, release: str = KFP_RELEASE) -> None:
    with KfpLocalHooks(hooks(module), installed_release=release):
        pass


def test_hooks_apply_inside_and_are_undone_after_even_on_an_error():
    module = internals()
    with (
        pytest.raises(RuntimeError, match="a step broke"),
        KfpLocalHooks(hooks(module), installed_release=KFP_RELEASE),
    ):
        assert module.construct_executor_input() == "replaced"
        assert module.LocalCache().get("k") == "replaced"
        raise RuntimeError("a step broke")
    assert module.construct_executor_input(1, 2, 3, 4) == "original"
    assert module.LocalCache().get("k") == "original"


def test_another_kfp_release_is_refused_before_anything_changes():
    module = internals()
    with pytest.raises(HookError, match=rf"kfp 2\.18\.0 is installed; .* of kfp {KFP_RELEASE}"):
        enter(module, "2.18.0")
    assert module.construct_executor_input(1, 2, 3, 4) == "original"


def test_a_renamed_internal_is_named():
    module = internals()
    del module.construct_executor_input
    with pytest.raises(HookError, match=r"kfp.local.internals.construct_executor_input: gone"):
        enter(module)
    assert module.LocalCache().get("k") == "original"  # nothing was applied


def test_a_later_hook_that_fails_its_check_leaves_the_earlier_ones_unapplied():
    """Every check before any change: the first hook passes its check, the last fails."""
    module = internals()
    del module.LocalCache.get
    with pytest.raises(HookError, match=r"kfp.local.internals.LocalCache.get: gone"):
        enter(module)
    assert module.construct_executor_input(1, 2, 3, 4) == "original"


def test_a_reshaped_internal_is_named_with_both_signatures():
    module = internals()
    module.construct_executor_input = lambda component_spec, arguments, task_root: None
    with pytest.raises(
        HookError,
        match=r"construct_executor_input: takes \(component_spec, arguments, task_root\), "
        r"the replacement was written for \(.*block_input_artifact\)",
    ):
        enter(module)
