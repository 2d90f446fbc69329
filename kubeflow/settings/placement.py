"""Where and with what a Kubernetes pod runs: the placement forms of the settings.

A step's pod and a TFJob's replicas alike get resources (requests, limits,
GPUs), node selectors and tolerations; this module reads them from
kubeflow/pipeline.yaml (`defaults:`, `components:`, `training.tfjob`), and
each renders itself as core/v1 has it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from contract.fields import choice, field_names
from kubeflow.settings.fields import LABEL_NAME, SettingsError, check

# What open-source KFP and the NVIDIA device plugin call a GPU.
DEFAULT_ACCELERATOR = "nvidia.com/gpu"
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
TOLERATION_OPERATORS = ("Equal", "Exists")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def quantity_value(text: str) -> Decimal:
    """A quantity's value (cores, bytes), parsed as Kubernetes' own client parses it."""
    return parse_quantity(text)


@dataclass(frozen=True)
class Resources:
    """Kubernetes requests/limits for one step. Quantities use Kubernetes syntax."""

    cpu_request: str | None = None
    cpu_limit: str | None = None
    memory_request: str | None = None
    memory_limit: str | None = None
    gpu: int = 0
    accelerator: str = DEFAULT_ACCELERATOR

    def to_kubernetes(self) -> dict[str, dict[str, str]]:
        """A container's core/v1 `resources`: the requests and limits that are set."""
        requests = {"cpu": self.cpu_request, "memory": self.memory_request}
        limits = {"cpu": self.cpu_limit, "memory": self.memory_limit}
        if self.gpu:
            # Kubernetes takes extended resources (GPUs) as limits only.
            limits[self.accelerator] = str(self.gpu)
        resources = {
            name: {k: v for k, v in values.items() if v is not None}
            for name, values in (("limits", limits), ("requests", requests))
        }
        return {name: values for name, values in resources.items() if values}


@dataclass(frozen=True)
class Toleration:
    key: str | None = None
    operator: str = "Equal"
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None

    def to_kubernetes(self) -> dict[str, Any]:
        """A core/v1 Toleration (also kfp-kubernetes' form): the fields that are set."""
        return {
            key: value
            for key, value in (
                ("key", self.key),
                ("operator", self.operator),
                ("value", self.value),
                ("effect", self.effect),
                ("tolerationSeconds", self.toleration_seconds),
            )
            if value is not None
        }


@dataclass(frozen=True)
class Placement:
    """Where and with what one step runs."""

    resources: Resources = field(default_factory=Resources)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()


def _quantity(values: Mapping[str, Any], key: str, where: str) -> str | None:
    if values.get(key) is None:
        return None
    text = str(values[key])
    if not _QUANTITY.match(text):
        raise SettingsError(
            f"{where}.{key}: {text!r} is not a Kubernetes quantity (e.g. 500m, 4, 16Gi)"
        )
    return text


def _request_within_limit(resources: Resources, where: str) -> None:
    """Kubernetes refuses a pod whose request exceeds its limit; say so at compile time."""
    for resource in ("cpu", "memory"):
        request = getattr(resources, f"{resource}_request")
        limit = getattr(resources, f"{resource}_limit")
        if (
            request is not None
            and limit is not None
            and quantity_value(request) > quantity_value(limit)
        ):
            raise SettingsError(
                f"{where}.{resource}_request: {request} is more than "
                f"{resource}_limit {limit}; Kubernetes refuses such a pod "
                "(a request must not exceed its limit)"
            )


def _resources(values: Any, where: str) -> Resources:
    values = check.typed(values or {}, dict, where)
    check.no_unknown(values, field_names(Resources), where)
    gpu = check.typed(values.get("gpu", 0), int, f"{where}.gpu")
    if gpu < 0:
        raise SettingsError(f"{where}.gpu: must be >= 0, got {gpu}")
    accelerator = check.typed(
        values.get("accelerator", DEFAULT_ACCELERATOR), str, f"{where}.accelerator"
    )
    if not LABEL_NAME.match(accelerator):
        raise SettingsError(f"{where}.accelerator: {accelerator!r} is not a resource name")
    resources = Resources(
        cpu_request=_quantity(values, "cpu_request", where),
        cpu_limit=_quantity(values, "cpu_limit", where),
        memory_request=_quantity(values, "memory_request", where),
        memory_limit=_quantity(values, "memory_limit", where),
        gpu=gpu,
        accelerator=accelerator,
    )
    _request_within_limit(resources, where)
    return resources


def _node_selector(values: Any, where: str) -> dict[str, str]:
    values = check.typed(values or {}, dict, where)
    for key, value in values.items():
        if not isinstance(key, str) or not LABEL_NAME.match(key):
            raise SettingsError(f"{where}: {key!r} is not a Kubernetes label name")
        if not isinstance(value, str) or not _LABEL_VALUE.match(value):
            raise SettingsError(
                f"{where}.{key}: {value!r} is not a Kubernetes label value (quote it)"
            )
    return dict(values)


def _toleration(values: Any, where: str) -> Toleration:
    values = check.typed(values, dict, where)
    check.no_unknown(values, field_names(Toleration), where)
    operator = check.choice(
        values.get("operator", "Equal"), TOLERATION_OPERATORS, f"{where}.operator"
    )
    effect = check.kind(
        values.get("effect"), choice(TOLERATION_EFFECTS).or_none(), f"{where}.effect"
    )
    key = values.get("key")
    if key is not None and (not isinstance(key, str) or not LABEL_NAME.match(key)):
        raise SettingsError(f"{where}.key: {key!r} is not a Kubernetes taint key")
    value = values.get("value")
    if operator == "Exists" and value is not None:
        raise SettingsError(f"{where}.value: must be empty when operator is Exists")
    if operator == "Equal" and key is None:
        raise SettingsError(f"{where}.key: required when operator is Equal")
    seconds = values.get("toleration_seconds")
    if seconds is not None:
        check.typed(seconds, int, f"{where}.toleration_seconds")
        if effect != "NoExecute":
            raise SettingsError(f"{where}.toleration_seconds: only valid with effect NoExecute")
    return Toleration(
        key=key, operator=operator, value=value, effect=effect, toleration_seconds=seconds
    )


def parse_placement(values: Any, where: str, fallback: Placement | None = None) -> Placement:
    values = check.typed(values or {}, dict, where)
    check.no_unknown(values, field_names(Placement), where)
    fallback = fallback or Placement()
    tolerations = check.typed(values.get("tolerations", []) or [], list, f"{where}.tolerations")
    return Placement(
        resources=(
            _resources(values["resources"], f"{where}.resources")
            if "resources" in values
            else fallback.resources
        ),
        node_selector=(
            _node_selector(values["node_selector"], f"{where}.node_selector")
            if "node_selector" in values
            else fallback.node_selector
        ),
        tolerations=(
            tuple(_toleration(t, f"{where}.tolerations[{i}]") for i, t in enumerate(tolerations))
            if "tolerations" in values
            else fallback.tolerations
        ),
    )
