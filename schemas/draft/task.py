"""Task inference: what the label makes of the task, and the naive model it is gated against."""

from __future__ import annotations

import statistics

from contract.dataset.sections import Task
from schemas.draft.profiles import ColumnProfile, DraftError, finite, number

# An int label with at most this many values is a class; more is a quantity.
MAX_INT_CLASSES = 20
# A string label with more values than this is not a classification target.
MAX_STRING_CLASSES = 100


def infer_task(label: ColumnProfile, requested: Task | None) -> Task:
    """The task for `label`: 2 values binary; a few strings or ints multiclass; else regression.

    A classification label's classes must be ones the schema can close
    (`check_closable_classes`), so that a new label value stops a run.
    """
    task = _task(label, requested)
    if task != "regression":
        check_closable_classes(label, task)
    return task


def check_closable_classes(label: ColumnProfile, task: str) -> None:
    """DraftError unless the schema can list `label`'s classes and no other value.

    Text classes go in a string domain, consecutive integers in an int range;
    the ExampleValidator then names a new value, and the data gate stops the
    run. A float label, or integers with gaps, the schema can only bound by a
    range, and a new value inside it would train as no class (index -1: a
    TensorFlow error for multiclass, silently wrong for binary).
    """
    if label.value_type == "float":
        shown = ", ".join(number(v) for v in sorted(finite(label.counts))[:5])
        raise DraftError(
            f"label {label.name!r} holds decimal numbers ({shown}) for a {task} task: a "
            "schema cannot close a float column's classes, so a new value would train as no "
            "class; write the classes as integers or text (1, not 1.0), or draft with "
            "--task regression"
        )
    if label.value_type == "int":
        values = sorted(int(v) for v in label.counts)
        gaps = sorted(set(range(values[0], values[-1] + 1)) - set(values))
        if gaps:
            raise DraftError(
                f"label {label.name!r} holds the integer classes {values}, with gaps: a "
                f"schema closes integer classes only as a range ({values[0]}..{values[-1]}), "
                f"so a new {gaps[0]} would train as no class; recode the classes as "
                "consecutive integers or as text"
            )


def _task(label: ColumnProfile, requested: Task | None) -> Task:
    if label.missing:
        raise DraftError(
            f"label {label.name!r} is empty in {label.missing} of {label.rows} rows: "
            "drop those rows (a label is required in training data)"
        )
    if label.distinct < 2:
        only = next(iter(label.counts), "")
        raise DraftError(
            f"label {label.name!r} has one value ({only!r}) in all {label.rows} rows: "
            "nothing to learn"
        )
    if requested:
        if requested == "regression" and label.value_type == "string":
            raise DraftError(f"--task regression: label {label.name!r} holds strings")
        if requested == "binary" and label.distinct != 2:
            raise DraftError(
                f"--task binary: label {label.name!r} has {label.distinct} values, not 2"
            )
        if requested == "multiclass" and label.distinct < 3:
            raise DraftError(
                f"--task multiclass: label {label.name!r} has {label.distinct} values "
                "(a multiclass label needs at least 3; with 2 it is binary)"
            )
        if requested != "regression" and label.distinct > MAX_STRING_CLASSES:
            raise DraftError(
                f"--task {requested}: label {label.name!r} has {label.distinct} values, "
                f"more than {MAX_STRING_CLASSES} classes"
            )
        return requested
    if label.distinct == 2:
        return "binary"
    if label.value_type == "string":
        if label.distinct > MAX_STRING_CLASSES:
            raise DraftError(
                f"label {label.name!r} holds {label.distinct} distinct strings: too many "
                f"classes (at most {MAX_STRING_CLASSES}); is it the right column?"
            )
        return "multiclass"
    if label.value_type == "int" and label.distinct <= MAX_INT_CLASSES:
        return "multiclass"
    return "regression"


def class_names(label: ColumnProfile) -> list[str]:
    """The classes in index order: sorted, so a binary label's positive class is the larger."""
    return [str(v) for v in sorted(label.counts)]


def naive_value(label: ColumnProfile, task: str) -> tuple[float, str]:
    """The gate metric of a naive model on the data, and what that model is."""
    if task == "regression":
        std = statistics.pstdev(label.numbers())
        return std, "always predicting the mean: its RMSE is the std dev"
    value, count = label.counts.most_common(1)[0]
    share = count / label.present
    return share, f"always answering {str(value)!r} ({count} of {label.present} rows)"
