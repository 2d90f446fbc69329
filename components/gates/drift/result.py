"""What the drift gate found: `drift.json` in its DataDrift artifact, as the reports read it.

The gate (components/gates/drift/executor.py) writes it, and the run report and the
RunReport step read it from here, without TFX and without TensorFlow (the
artifact class, a TFX type, is in components/gates/drift/artifact.py).
"""

import json
import os
from dataclasses import asdict, dataclass, field

from components import store_files

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
    with store_files.open(os.path.join(uri, DRIFT_FILE)) as f:
        return DriftResult.from_json(f.read())
