"""The one name each raw column goes by inside the model (`model_name`), its Transform
output's (`transformed_name`), and the label's (`LABEL_KEY`)."""

from __future__ import annotations

from collections.abc import Iterable

from contract.dataset.error import DatasetSpecError

# Transform's name for the label; TFMA and the Trainer read it. Raw columns
# never end in `_xf` in Transform's output, so it cannot collide with one.
LABEL_KEY = "label_xf"


def model_name(column: str) -> str:
    """The one name raw column `column` goes by inside the model and its serving contract.

    Its Transform output is this plus `_xf` (`transformed_name`), its vocabulary
    file this, its JSON signature input this (trainer/json_signature.py). CSV
    headers hold spaces, punctuation and other scripts ("Body Mass (g)",
    "価格"); TensorFlow op, Keras input and file names may not. So an ASCII
    letter, digit or `_` stays, another ASCII character becomes `_`, any other
    character its code point (`é` becomes `u00e9`, so names in another script
    stay apart), and leading `_` go (an op name cannot start with one).
    tf.Transform's own vocabulary-file sanitizing leaves such a name as it is.
    Two columns with one model name are refused by `model_names`.
    """
    return "".join(
        (c if c.isalnum() or c == "_" else "_") if c.isascii() else f"u{ord(c):04x}" for c in column
    ).lstrip("_")


def transformed_name(column: str) -> str:
    """Name of the Transform output computed from raw column `column`."""
    return model_name(column) + "_xf"


def model_names(columns: Iterable[str], where: str = "features") -> dict[str, str]:
    """Each column's `model_name`, or DatasetSpecError naming both columns where two share
    one (they would share a model input, a vocabulary file and a signature input), and
    naming a column that has none, or whose Transform output would be the label's."""
    names: dict[str, str] = {}
    by_name: dict[str, str] = {}
    for column in columns:
        name = model_name(column)
        if not name:
            raise DatasetSpecError(
                f"{where}.{column}: column {column!r} has no letter or digit to name its "
                "model input by; rename the column"
            )
        if transformed_name(column) == LABEL_KEY:
            raise DatasetSpecError(
                f"{where}.{column}: column {column!r} would become model input {LABEL_KEY!r}, "
                "the label's name inside the model; rename the column"
            )
        other = by_name.setdefault(name, column)
        if other != column:
            raise DatasetSpecError(
                f"{where}.{column}: {column!r} and {other!r} both become model input "
                f"{transformed_name(column)!r} (and vocabulary file and serving input "
                f"{name!r}); rename a column or ignore one"
            )
        names[column] = name
    return names
