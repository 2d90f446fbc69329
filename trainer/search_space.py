"""The model's search space (yours): which model settings the tuner tries.

`search_space(hp)` declares each hyperparameter on KerasTuner's `hp` and
returns the `ModelConfig` they make; the tuner builds and compiles that with
the Trainer's own code (`trainer/run.py`'s `compiled_model`), so a trial is the
Trainer's model with other settings. The winner is frozen into
`SCHEMA_DIR/hyperparameters.yaml` as `ModelConfig` fields, which the Trainer
reads ([Tuning](tuning.md)). Change the ranges here; a field that
`ModelConfig` lacks must be added there first (and to `build_model`).
"""

from __future__ import annotations

from trainer.config import ModelConfig


def search_space(hp) -> ModelConfig:
    """Width, depth, embedding size, learning rate and dropout of the MLP."""
    width = hp.Choice("width", [32, 64, 128, 256])
    depth = hp.Int("depth", 1, 3)
    return ModelConfig(
        # Each hidden layer half as wide as the one before, as the default (128, 64) is.
        hidden_units=tuple(max(width // 2**i, 8) for i in range(depth)),
        embedding_dim=hp.Choice("embedding_dim", [4, 8, 16]),
        learning_rate=hp.Float("learning_rate", 1e-4, 1e-2, sampling="log"),
        dropout=hp.Float("dropout", 0.0, 0.3, step=0.1),
    )
