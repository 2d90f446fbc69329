"""Where and with what a Kubernetes pod runs: the placement forms of the settings.

A step's pod and a TFJob's replicas alike get resources (requests, limits,
GPUs), node selectors and tolerations; kubeflow/settings.py reads them from
kubeflow/pipeline.yaml, and each renders itself as core/v1 has it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

# What open-source KFP and the NVIDIA device plugin call a GPU.
DEFAULT_ACCELERATOR = "nvidia.com/gpu"


def quantity_value(text: str) -> Decimal:
    """A quantity's value (cores, bytes), parsed as Kubernetes' own client parses it."""
    return parse_quantity(text)


@dataclass(frozen=True)
class Resources:
    """Kubernetes requests/limits for one component. Quantities use Kubernetes syntax."""

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
    """Where and with what one component runs."""

    resources: Resources = field(default_factory=Resources)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
