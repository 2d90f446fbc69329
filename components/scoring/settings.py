"""What a scoring run writes and tolerates (ScoringSettings), and its output's column names.

Apart from components/scoring/executor.py, which scores with Beam and TensorFlow: the
scoring report (components/report/scoring_report.py) and the light ScoringReport
step read these without either (docs/kubeflow.md, "What a step loads").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from components.scoring.output import FORMATS

# Rows per call of the signature: every batch but a bundle's last has exactly this many.
DEFAULT_BATCH_SIZE = 1024
MODEL_VERSION_COLUMN = "model_version"
CLASS_COLUMN = "class"
PREDICTION_COLUMN = "prediction"
REASON_COLUMN = "reason"
KEY_TYPES = ("int", "string")


class ScoringInputError(ValueError):
    """The keys or settings do not fit the data or the model."""


@dataclass(frozen=True)
class ScoringSettings:
    """What a scoring run writes and tolerates; the same on both runners."""

    keys: tuple[str, ...]
    output_format: str = "parquet"
    max_error_share: float = 0.001
    allow_duplicate_keys: bool = False
    batch_size: int = DEFAULT_BATCH_SIZE

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", tuple(self.keys))
        if not self.keys:
            raise ScoringInputError(
                "keys: name at least one id column (--key COLUMN, or keys: in the dataset spec)"
            )
        twice = sorted({k for k in self.keys if self.keys.count(k) > 1})
        if twice:
            raise ScoringInputError(f"keys: {twice} named more than once")
        if self.output_format not in FORMATS:
            raise ScoringInputError(
                f"format: {self.output_format!r} is not one of {', '.join(FORMATS)}"
            )
        if not 0 <= self.max_error_share <= 1:
            raise ScoringInputError(
                f"max_error_share: {self.max_error_share} is not a share between 0 and 1"
            )
        if self.batch_size < 1:
            raise ScoringInputError(f"batch_size: {self.batch_size} is not a positive integer")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ScoringSettings:
        return cls(**json.loads(text))
