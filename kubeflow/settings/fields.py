"""What every section of the Kubeflow settings is checked with: the error, the
field-naming checks, and the name patterns Kubernetes allows."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

LABEL_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
# A Kubernetes Secret's name (DNS subdomain), as a service account's is.
SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# A namespace (DNS-1123 label).
NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class SettingsError(ValueError):
    """A Kubeflow setting is missing or malformed; the message names the field."""


def expect(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SettingsError(f"{where}: must be a {names}, got {value!r}")
    return value


def no_unknown(values: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(values) - known)
    if unknown:
        raise SettingsError(f"{where}: unknown field(s) {unknown}; known: {sorted(known)}")


def required_str(values: Mapping[str, Any], key: str) -> str:
    value = values.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise SettingsError(f"{key}: required")
    return expect(value, str, key)


def absolute_path(value: object, key: str) -> str:
    path: str = expect(value, str, key)
    if not PurePosixPath(path).is_absolute():
        raise SettingsError(f"{key}: {path!r} must be an absolute path")
    return path.rstrip("/") or "/"


def component_entries(value: Any, where: str, component_ids: set[str]) -> dict[str, Any]:
    """`value`, a mapping from the pipeline's component ids to their own settings."""
    entries = expect(value or {}, dict, where)
    unknown = sorted(set(entries) - component_ids)
    if unknown:
        raise SettingsError(
            f"{where}: unknown component id(s) {unknown}; the pipeline has {sorted(component_ids)}"
        )
    return entries
