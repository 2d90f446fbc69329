"""The Kubeflow settings file as each package reads it, and the store paths each writes.

One kubeflow/pipeline.yaml serves the three packages (training, scoring,
tuning): it may name the steps of any of them, and each package applies the
entries of its own steps, with the retries its own steps take by default.
"""

from __future__ import annotations

import dataclasses
import posixpath
from pathlib import Path

from kubeflow.package_dags import TUNING_DIR, scores_root
from kubeflow.settings import KubeflowSettings, load_settings
from kubeflow.settings.retries import DEFAULT_RETRY, RetryRoles
from kubeflow.step_ids import TUNE, settings_step_ids
from pipeline.steps import DAG_STEPS, SCORING_STEPS


def pipeline_step_ids() -> set[str]:
    """Every step of a Kubeflow run: the ids the settings may name."""
    from kubeflow.pipeline_steps import KUBEFLOW_STEPS

    return set(KUBEFLOW_STEPS.ids)


def pipeline_retry_roles() -> RetryRoles:
    from kubeflow.pipeline_steps import RETRY_ROLES

    return RETRY_ROLES


def load_package_settings(path: Path) -> KubeflowSettings:
    """The settings file every package reads: it may name the steps of any of the three
    (training, scoring, tuning), so that one kubeflow/pipeline.yaml serves them all; a
    package applies the entries of its own steps. An id no package has is refused."""
    roles = pipeline_retry_roles()
    return load_settings(
        path,
        settings_step_ids(),
        set(DAG_STEPS.beam_ids) | set(SCORING_STEPS.beam_ids),
        RetryRoles(
            retried_by_default=roles.retried_by_default
            | frozenset(SCORING_STEPS.retried_by_default),
            never_retried={**roles.never_retried, **SCORING_STEPS.never_retried},
        ),
    )


def load_scoring_settings(path: Path) -> KubeflowSettings:
    """The settings file read for the scoring package: its steps may be named too.

    The training package's settings name only training's steps, so the steps
    only scoring has and that retry by default (the scorer: its commit makes a
    retry safe, docs/batch-scoring.md) get DEFAULT_RETRY unless named.
    """
    settings = load_package_settings(path)
    scoring_only = set(SCORING_STEPS.retried_by_default) - pipeline_step_ids()
    unnamed = {s: DEFAULT_RETRY for s in scoring_only if s not in settings.retries.components}
    retries = dataclasses.replace(
        settings.retries, components={**settings.retries.components, **unnamed}
    )
    return dataclasses.replace(settings, retries=retries)


def load_tuning_settings(path: Path) -> KubeflowSettings:
    """The settings read for the tuning package: `components:` and `retries:` may name Tune.

    Unnamed, Tune retries as DEFAULT_RETRY does, within its `tuning.deadline`: a retry
    resumes the search from its directory on the object store (docs/tuning.md).
    """
    settings = load_package_settings(path)
    if TUNE in settings.retries.components:
        return settings
    retries = dataclasses.replace(
        settings.retries, components={**settings.retries.components, TUNE: DEFAULT_RETRY}
    )
    return dataclasses.replace(settings, retries=retries)


def store_paths(settings: KubeflowSettings, package: str) -> list[tuple[str, str, str]]:
    """Every store path the package's steps write or read: (setting, path, how it is derived)."""
    paths = [
        ("pipeline_root", settings.pipeline_root, ""),
        ("parameters.data_root", settings.data_root, ""),
        ("serving_model_dir", settings.serving_model_dir, ""),
    ]
    if settings.serving is not None:
        paths.append(("serving.storage_root", settings.serving.storage_root, ""))
    if package == "scoring":
        paths.append(
            ("serving_model_dir", scores_root(settings), " (the scores, beside serving_model_dir)")
        )
    if package == "tuning":
        search = posixpath.join(settings.pipeline_root, TUNING_DIR)
        paths.append(("pipeline_root", search, " (the tuning search, under pipeline_root)"))
    return paths


def check_store_paths(settings: KubeflowSettings, package: str) -> None:
    """Refuses a path the object store's credentials may not write, naming its setting
    (with the kubeflow-platform preset: outside the namespace's prefixes)."""
    store = settings.object_store
    if store is None:
        return
    for where, path, why in store_paths(settings, package):
        store.check_writable(where, path, why)
