"""The field kit (contract/fields.py) the dataset spec and the Kubeflow settings both read with.

A field declared once is read, checked, defaulted, refused when misspelled and
written back; each family words the shared problems as it always has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from contract.dataset.error import DatasetSpecError
from contract.dataset.error import check as spec_check
from contract.fields import (
    NUMBER,
    STRINGS,
    choice,
    declare,
    declared_fields,
    defaults_by,
    describe_default,
    integer,
    plain,
    reference_rows,
    without_defaults,
)
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.fields import check as settings_check


@dataclass(frozen=True)
class Shelf:
    """A toy section: one required field, defaults, a per-variant setting, a hidden one."""

    kind: str = field(metadata=declare(choice(("wood", "steel")), "what it is made of"))
    boards: int = field(default=3, metadata=declare(integer(minimum=1), "how many boards"))
    labels: tuple[str, ...] = field(default=(), metadata=declare(STRINGS, "what is on it"))
    load: float | None = field(
        default=None,
        metadata=declare(NUMBER.or_none(), "the most it holds", defaults_by={"steel": 80.0}),
    )
    note: str = field(default="", metadata=declare(STRINGS, "for people", serialized=False))


def test_a_declared_section_is_read_with_defaults_and_written_back():
    shelf = spec_check.read(Shelf, {"kind": "wood", "labels": ["a"]}, "shelf")
    assert shelf == Shelf(kind="wood", boards=3, labels=("a",))
    assert plain(shelf) == {"kind": "wood", "boards": 3, "labels": ["a"], "load": None}
    assert without_defaults(plain(shelf), Shelf) == {"kind": "wood", "labels": ["a"]}
    assert defaults_by(Shelf, "steel") == {"load": 80.0}
    assert [describe_default(f) for f in declared_fields(Shelf)][:4] == [
        "required",
        "3",
        "[]",
        "steel: 80.0",
    ]
    assert reference_rows(Shelf, "shelf")[1] == (
        "| `shelf.boards` | an integer >= 1 | 3 | how many boards |"
    )


@pytest.mark.parametrize(
    ("values", "spec_message", "settings_message"),
    [
        ({}, "shelf.kind: None is not one of wood, steel", "shelf.kind: must be one of"),
        (
            {"kind": "wood", "boards": 0},
            "shelf.boards: expected an integer >= 1, got 0",
            "shelf.boards: must be a int, got 0",
        ),
        (
            {"kind": "wood", "boards": True},
            "shelf.boards: expected an integer >= 1, got True",
            "shelf.boards: must be a int, got True",
        ),
        (
            {"kind": "wood", "labels": "a"},
            "shelf.labels: expected a list, got str",
            "shelf.labels: must be a list, got 'a'",
        ),
        (
            {"kind": "wood", "labels": ["a", ""]},
            "shelf.labels[1]: expected a non-empty string, got ''",
            "shelf.labels[1]: must be a str, got ''",
        ),
        (
            {"kind": "wood", "board": 2},
            "shelf: unknown field(s) board; known: kind, boards, labels, load, note",
            "shelf: unknown field(s) ['board']; known: ['boards', 'kind', 'labels', 'load',",
        ),
        ([], "shelf: expected a mapping, got list", "shelf: must be a dict, got []"),
    ],
)
def test_each_family_words_a_bad_field_its_own_way_naming_it(
    values, spec_message, settings_message
):
    with pytest.raises(DatasetSpecError) as spec_error:
        spec_check.read(Shelf, values, "shelf")
    assert str(spec_error.value).startswith(spec_message)
    with pytest.raises(SettingsError) as settings_error:
        settings_check.read(Shelf, values, "shelf")
    assert str(settings_error.value).startswith(settings_message)


def test_given_fields_are_the_callers_and_not_read():
    shelf = spec_check.read(Shelf, {"boards": 2}, "shelf", kind="steel")
    assert (shelf.kind, shelf.boards) == ("steel", 2)
