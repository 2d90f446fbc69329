"""The model's settings and the tuner's search space (yours).

`Hyperparameters` is the class of the settings `build_model` receives as
`config`: ModelConfig's fields (hidden_units, embedding_dim, learning_rate,
dropout) and any you add. A new hyperparameter is a field here with its
default, read in `build_model` (trainer/model.py), set per variant in
pipeline/config.py (`.with_model(name=value)`), and, for the tuner to try it,
drawn in `search_space` below.

`search_space(hp)` declares each hyperparameter on KerasTuner's `hp` and
returns the `Hyperparameters` they make; the tuner builds and compiles that with
the Trainer's own code (`trainer/run.py`'s `compiled_model`), so a trial is the
Trainer's model with other settings. The winner is frozen into
`SCHEMA_DIR/hyperparameters.yaml` as these fields, which the Trainer reads
([Tuning](tuning.md)). The template reads both names through
trainer/fork/search_space_file.py.
"""

from __future__ import annotations

from trainer.config import ModelConfig

# The class of the model's settings: ModelConfig's fields as they are. To add one, make it
# a subclass with the field and its default:
#
#     @dataclass(frozen=True)
#     class Hyperparameters(ModelConfig):
#         activation: str = "relu"
Hyperparameters = ModelConfig


def search_space(hp) -> Hyperparameters:
    """Width, depth, embedding size, learning rate and dropout of the MLP."""
    width = hp.Choice("width", [32, 64, 128, 256])
    depth = hp.Int("depth", 1, 3)
    return Hyperparameters(
        # Each hidden layer half as wide as the one before, as the default (128, 64) is.
        hidden_units=tuple(max(width // 2**i, 8) for i in range(depth)),
        embedding_dim=hp.Choice("embedding_dim", [4, 8, 16]),
        learning_rate=hp.Float("learning_rate", 1e-4, 1e-2, sampling="log"),
        dropout=hp.Float("dropout", 0.0, 0.3, step=0.1),
    )
