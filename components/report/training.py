"""The training section of a run report: the Trainer's per-epoch curves, from its
TensorBoard logs, and the runtime it resolved, from the configuration it wrote.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from components import store_files
from components.report.event_scalars import scalar_events

# Keras' TensorBoard callback writes `epoch_<metric>`; our multi-worker loop
# writes validation metrics as `epoch_val_<metric>` next to the training ones.
_EPOCH_TAG_PREFIX = "epoch_"
_VALIDATION_PREFIX = "val_"


@dataclass(frozen=True)
class TrainingCurves:
    """metric -> [(epoch, value)], for the training and the validation data."""

    train: dict[str, tuple[tuple[int, float], ...]] = field(default_factory=dict)
    validation: dict[str, tuple[tuple[int, float], ...]] = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        return sorted(set(self.train) | set(self.validation))

    @property
    def epochs(self) -> int:
        series = list(self.train.values()) + list(self.validation.values())
        return max((len(s) for s in series), default=0)


def read_training_curves(model_run_uri: str) -> TrainingCurves:
    """Per-epoch metrics from the Trainer's TensorBoard logs (`train/`, `validation/`)."""
    series: dict[str, dict[str, dict[int, float]]] = {"train": {}, "validation": {}}
    for subdir in ("train", "validation"):
        directory = os.path.join(model_run_uri, subdir)
        if not store_files.isdir(directory):
            continue
        for tag, step, value in scalar_events(directory):
            if not tag.startswith(_EPOCH_TAG_PREFIX):
                continue
            metric = tag[len(_EPOCH_TAG_PREFIX) :]
            target = subdir
            if metric.startswith(_VALIDATION_PREFIX):
                metric, target = metric[len(_VALIDATION_PREFIX) :], "validation"
            if metric == "learning_rate":
                continue
            # Epochs count from 1 in Keras' own progress lines.
            series[target].setdefault(metric, {})[step + 1] = value
    return TrainingCurves(
        train={m: tuple(sorted(v.items())) for m, v in series["train"].items()},
        validation={m: tuple(sorted(v.items())) for m, v in series["validation"].items()},
    )


TRAINER_CONFIG_FILE = "trainer_config.json"


def read_resolved_runtime(model_run_uri: str) -> dict[str, object]:
    """The runtime the Trainer resolved (devices, strategy, precision, global batch)."""
    path = os.path.join(model_run_uri, TRAINER_CONFIG_FILE)
    if not store_files.exists(path):
        return {}
    with store_files.open(path, "r") as f:
        config = json.load(f)
    return dict(config.get("resolved_runtime", {}))
