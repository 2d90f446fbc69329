"""What the drift gate found: `drift.json` in its DataDrift artifact, as the reports read it.

The gate itself (components/drift_gate.py) imports TFX's statistics helpers,
and with them TFX's whole component package and TFMA; the run report and the
RunReport step read the result from here without either.
"""

# No `from __future__ import annotations`: TFX reads the artifact class's
# annotations as objects.

import json
import os
from dataclasses import asdict, dataclass, field

from tfx import types
from tfx.dsl.io import fileio

DRIFT_FILE = "drift.json"


@dataclass(frozen=True)
class FeatureComparison:
    """One feature's drift measure against its threshold."""

    feature: str
    measure: str
    threshold: float
    mode: str
    value: "float | None"  # None: TFDV could not measure it (absent from one side)

    @property
    def drifted(self) -> bool:
        return self.value is not None and self.value > self.threshold

    @property
    def status(self) -> str:
        if self.value is None:
            return "not measured"
        if not self.drifted:
            return "ok"
        return "drift" if self.mode == "fail" else "drift (warn)"

    def describe(self) -> str:
        return (
            f"feature '{self.feature}': {self.measure} {self.value:.4g} > threshold "
            f"{self.threshold:g}"
        )


@dataclass(frozen=True)
class DriftResult:
    """The drift check of one run, as the report shows it."""

    # The served version whose training statistics were compared; None if nothing is served.
    baseline_version: "str | None" = None
    baseline_statistics: "str | None" = None
    note: str = ""
    comparisons: "tuple[FeatureComparison, ...]" = field(default_factory=tuple)

    @property
    def failures(self) -> "list[FeatureComparison]":
        return [c for c in self.comparisons if c.drifted and c.mode == "fail"]

    @property
    def warnings(self) -> "list[FeatureComparison]":
        return [c for c in self.comparisons if c.drifted and c.mode == "warn"]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "DriftResult":
        values = json.loads(text)
        comparisons = tuple(FeatureComparison(**c) for c in values.pop("comparisons"))
        return cls(comparisons=comparisons, **values)


def read_result(uri: str) -> DriftResult:
    with fileio.open(os.path.join(uri, DRIFT_FILE)) as f:
        return DriftResult.from_json(f.read())


class DataDrift(types.Artifact):
    """A directory holding `drift.json`: a DriftResult."""

    # TFX's Kubeflow V2 compiler writes TYPE_NAME as the schema title, which
    # must be `<namespace>.<Title>`, and its container entrypoint imports the
    # class back from that title. So it is an import path: `components`
    # exports this class. (A title that is no import path compiles, and the
    # step then fails; kubeflow/reference/run_compiled.py caught one.)
    TYPE_NAME = "components.DataDrift"
