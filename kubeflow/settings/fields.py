"""The Kubeflow settings' error, the field kit bound to it, and what the sections
share beyond it: a few field forms and the name patterns Kubernetes allows.

The kit itself (checks, declarations) is contract/fields.py, the one the dataset
spec reads with too; SettingsError words its messages as the settings always
have (`must be a int, got 'x'`, `unknown field(s) ['replicas']`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from contract.fields import Checks, FieldError, Kind

LABEL_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
# A Kubernetes Secret's name (DNS subdomain), as a service account's is.
SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# A namespace (DNS-1123 label).
NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class SettingsError(FieldError):
    """A Kubeflow setting is missing or malformed; the message names the field."""

    @classmethod
    def wrong_kind(cls, where: str, kind: Kind, value: object) -> FieldError:
        if kind.choices:
            return cls(f"{where}: must be one of {kind.choices}, got {value!r}")
        names = " or ".join(t.__name__ for t in kind.types)
        return cls(f"{where}: must be a {names}, got {value!r}")

    @classmethod
    def unknown_fields(cls, where: str, unknown: list[str], known: list[str]) -> FieldError:
        return cls(f"{where}: unknown field(s) {unknown}; known: {sorted(known)}")


check = Checks(SettingsError)


def namespace_and_service_account(raw: Mapping[str, Any], where: str) -> dict[str, str | None]:
    """`namespace` and `service_account` of a section that starts pods (`training:`,
    `tuning:`), each checked as Kubernetes names it, None where not set."""
    names: dict[str, str | None] = {}
    for name, pattern, what in (
        ("namespace", NAMESPACE, "a namespace"),
        ("service_account", SECRET_NAME, "a service account name"),
    ):
        value = raw.get(name)
        if value is not None and (not isinstance(value, str) or not pattern.match(value)):
            raise SettingsError(f"{where}.{name}: {value!r} is not {what}")
        names[name] = value
    return names


def required_str(values: Mapping[str, Any], key: str) -> str:
    value = values.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise SettingsError(f"{key}: required")
    return check.typed(value, str, key)


def absolute_path(value: object, key: str) -> str:
    path: str = check.typed(value, str, key)
    if not PurePosixPath(path).is_absolute():
        raise SettingsError(f"{key}: {path!r} must be an absolute path")
    return path.rstrip("/") or "/"


def component_entries(value: Any, where: str, component_ids: set[str]) -> dict[str, Any]:
    """`value`, a mapping from the pipeline's component ids to their own settings."""
    entries = check.typed(value or {}, dict, where)
    unknown = sorted(set(entries) - component_ids)
    if unknown:
        raise SettingsError(
            f"{where}: unknown component id(s) {unknown}; the pipeline has {sorted(component_ids)}"
        )
    return entries
