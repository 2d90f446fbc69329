"""Reading the fields of a file a user writes, with errors that name the field.

One kit for both such files: the dataset spec (contract/dataset/spec.py) and the
Kubeflow settings (kubeflow/settings/). Pure Python, so a file is checked
before anything heavy starts.

* Checks. `check.mapping(values, "label")`, `check.integer(value,
  "input.spans", minimum=1)`, `check.no_unknown(values, known, "input")`: each
  returns the value as the field holds it, or raises the family's error with
  the field's path first.
* Declarations. A dataclass field declared once, `field(default=...,
  metadata=declare(kind, "what it means"))`, is read by `check.read(Class,
  values, where)` (which also refuses unknown fields and fills defaults),
  written back by `plain()`, and listed by `declared_fields()` for the docs'
  field reference and for the schema draft.

A family binds the kit to its error class (`Checks(DatasetSpecError)`); the
error class words the three problems every section shares: a value of the
wrong kind, a value outside its choices, an unknown field.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar, get_args

T = TypeVar("T")
# Where a text value or key was written unquoted and YAML read it as something else.
YAML_TEXT_HINT = (
    "; unquoted, YAML reads 2024, 1.5, 2024-06-01, no, off and null as a number, a date, "
    "a boolean or null: quote it ('no')"
)
_DECLARED = "fields.declared"
# What `Kind.read` makes of None where None is refused.
_REFUSED: Any = object()


class FieldError(ValueError):
    """A field is missing or malformed; the message starts with the field's path.

    A family's error subclasses it and may reword the shared problems below.
    """

    @classmethod
    def wrong_kind(cls, where: str, kind: Kind, value: object) -> FieldError:
        if kind.choices:
            return cls(f"{where}: {value!r} is not one of {', '.join(map(str, kind.choices))}")
        # A whole section or list is named by its type, not printed.
        shown = type(value).__name__ if kind.container else repr(value)
        hint = YAML_TEXT_HINT if str in kind.types and read_as_other_type(value) else ""
        return cls(f"{where}: expected {kind.words}, got {shown}{hint}")

    @classmethod
    def unknown_fields(cls, where: str, unknown: list[str], known: list[str]) -> FieldError:
        prefix = f"{where}: " if where else ""
        return cls(f"{prefix}unknown field(s) {', '.join(unknown)}; known: {', '.join(known)}")


def read_as_other_type(value: object) -> bool:
    """Whether YAML may have read `value` from text written unquoted (`no`, `2024`)."""
    return value is None or isinstance(value, (bool, int, float, datetime.date))


def one_line(text: object) -> str:
    """`text` as one printable line: each character str.isprintable refuses, bar the space
    (control, format and line-break characters: newline, U+0085, U+2028), as its
    Python escape (`\\n`, `\\x07`, `\\u2028`).

    For text from the data where a renderer reads such characters: a YAML or
    text-proto comment (a line break starts a line of its own), an SVG (XML 1.0
    holds no control characters), a chart's one-line label.
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


@dataclass(frozen=True)
class Kind:
    """What one field holds: how messages and the docs name it, and how a value is read.

    `types` are the Python types a family may name instead of `words`; `none`
    is what a missing value (None) reads as, where one is allowed; `items`
    checks each item of a list, as `where[i]`.
    """

    words: str
    types: tuple[type, ...]
    accepts: Callable[[Any], bool]
    convert: Callable[[Any], Any] = lambda value: value
    container: bool = False
    choices: tuple[Any, ...] = ()
    none: Any = _REFUSED
    items: Kind | None = None

    def read(self, value: Any, where: str, error: type[FieldError]) -> Any:
        if value is None and self.none is not _REFUSED:
            return self.none
        if not self.accepts(value):
            raise error.wrong_kind(where, self, value)
        if self.items is not None:
            return tuple(self.items.read(v, f"{where}[{i}]", error) for i, v in enumerate(value))
        return self.convert(value)

    def or_none(self) -> Kind:
        """This kind, or nothing (None, kept as None)."""
        return dataclasses.replace(self, none=None)


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def integer(minimum: int | None = None) -> Kind:
    """An integer (true and false are not), at least `minimum`."""
    return Kind(
        words="an integer" if minimum is None else f"an integer >= {minimum}",
        types=(int,),
        accepts=lambda v: _is_integer(v) and (minimum is None or v >= minimum),
    )


def choice(choices: Any) -> Kind:
    """One of `choices`: a sequence, or a `Literal` type's values."""
    values = tuple(choices) if isinstance(choices, (tuple, list)) else get_args(choices)
    return Kind(
        words="one of " + ", ".join(map(str, values)),
        types=(type(values[0]),),
        accepts=lambda v: v in values,
        choices=values,
    )


def typed(*types: type) -> Kind:
    """Any value of `types` (an int is not a bool): no more is asked of it."""
    return Kind(
        words="a " + " or ".join(t.__name__ for t in types),
        types=types,
        accepts=lambda v: isinstance(v, types) and not (types == (int,) and isinstance(v, bool)),
    )


MAPPING = Kind("a mapping", (dict,), lambda v: isinstance(v, Mapping), container=True)
# A list (a tuple too: a default written in Python), read as a tuple.
LIST = Kind("a list", (list,), lambda v: isinstance(v, (list, tuple)), tuple, container=True)
STRING = Kind("a non-empty string", (str,), lambda v: isinstance(v, str) and bool(v))
# A list of non-empty strings, read as a tuple; absent, an empty one.
STRINGS = dataclasses.replace(LIST, none=(), items=STRING)
NUMBER = Kind(
    "a number",
    (int, float),
    lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    float,
)
BOOLEAN = Kind("true or false", (bool,), lambda v: isinstance(v, bool))


@dataclass(frozen=True)
class Declared:
    """A dataclass field's declaration: its kind, what it means, and where it goes.

    `serialized`: `plain()` writes it. `defaults_by`: defaults that depend on
    another field's value (a feature setting's default for each feature kind);
    a variant the mapping lacks does not have the field, and one mapped to None
    has it with no default (required, where the kind refuses None).
    """

    kind: Kind
    doc: str
    serialized: bool = True
    defaults_by: Mapping[str, Any] = MappingProxyType({})


def declare(
    kind: Kind,
    doc: str,
    *,
    serialized: bool = True,
    defaults_by: Mapping[str, Any] | None = None,
) -> dict[str, Declared]:
    """A field's metadata: `field(default=1, metadata=declare(integer(1), "how many"))`."""
    declared = Declared(kind, doc, serialized, MappingProxyType(dict(defaults_by or {})))
    return {_DECLARED: declared}


@dataclass(frozen=True)
class DeclaredField:
    """One declared field of a dataclass, as the docs and the drafter read it."""

    name: str
    declared: Declared
    default: Any  # dataclasses.MISSING when the field is required

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING

    @property
    def kind(self) -> Kind:
        return self.declared.kind

    @property
    def doc(self) -> str:
        return self.declared.doc


def declared_fields(cls: type) -> tuple[DeclaredField, ...]:
    """The declared fields of dataclass `cls`, in order."""
    found = []
    for f in dataclasses.fields(cls):
        if _DECLARED not in f.metadata:
            continue
        default = f.default
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        found.append(DeclaredField(f.name, f.metadata[_DECLARED], default))
    return tuple(found)


def field_names(cls: type) -> list[str]:
    """Every field name of dataclass `cls`, in order: the keys its section may hold."""
    return [f.name for f in dataclasses.fields(cls)]


def path(where: str, name: object) -> str:
    """`name` under `where` (the top level has no path)."""
    return f"{where}.{name}" if where else str(name)


def plain(value: Any) -> Any:
    """`value` as plain values (dicts, lists, scalars), as a file would hold it.

    A dataclass gives its serialized fields; a value inside it with a
    `to_dict()` gives that.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain_item(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if _DECLARED not in f.metadata or f.metadata[_DECLARED].serialized
        }
    if isinstance(value, Mapping):
        return {k: _plain_item(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain_item(v) for v in value]
    return value


def _plain_item(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else plain(value)


def without_defaults(values: Mapping[str, Any], cls: type) -> dict[str, Any]:
    """`values` (a `plain()` of a `cls`) without the fields left at their default."""
    defaults = {f.name: plain(f.default) for f in declared_fields(cls)}
    return {k: v for k, v in values.items() if k not in defaults or v != defaults[k]}


@dataclass(frozen=True)
class Checks:
    """The kit, raising `error` (a FieldError) worded as that family words it."""

    error: type[FieldError]

    def kind(self, value: Any, kind: Kind, where: str) -> Any:
        return kind.read(value, where, self.error)

    def mapping(self, value: Any, where: str) -> Mapping[str, Any]:
        return self.kind(value, MAPPING, where)

    def typed(self, value: Any, types: type | tuple[type, ...], where: str) -> Any:
        return self.kind(value, typed(*(types if isinstance(types, tuple) else (types,))), where)

    def named(self, values: Any, where: str) -> Mapping[str, Any]:
        """A mapping whose keys are names (columns): text, never YAML's `no` or `2024`."""
        values = self.mapping(values, where)
        for key in values:
            if not isinstance(key, str):
                raise self.error(
                    f"{where}: the key {key!r} is a {type(key).__name__}, not a name"
                    + (YAML_TEXT_HINT if read_as_other_type(key) else "")
                )
        return values

    def string(self, value: Any, where: str) -> str:
        return self.kind(value, STRING, where)

    def strings(self, value: Any, where: str) -> tuple[str, ...]:
        return self.kind(value, STRINGS, where)

    def integer(self, value: Any, where: str, *, minimum: int | None = None) -> int:
        return self.kind(value, integer(minimum), where)

    def number(self, value: Any, where: str) -> float:
        return self.kind(value, NUMBER, where)

    def boolean(self, value: Any, where: str) -> bool:
        return self.kind(value, BOOLEAN, where)

    def choice(self, value: Any, choices: Any, where: str) -> Any:
        """`value`, one of `choices` (a sequence, or a `Literal`, so typed as that Literal)."""
        return self.kind(value, choice(choices), where)

    def no_unknown(self, values: Mapping[str, Any], known: Iterable[str], where: str) -> None:
        known = list(known)
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise self.error.unknown_fields(where, unknown, known)

    def read(self, cls: type[T], values: Any, where: str, **given: Any) -> T:
        """A `cls` from a section's values: its declared fields read by their kinds.

        Fields in `given` are set by the caller (read or derived elsewhere); a
        field absent from `values` takes its default, a required one reads None
        (which its kind refuses, naming the field). Keys that are no field of
        `cls` are refused.
        """
        values = self.mapping(values, where)
        self.no_unknown(values, field_names(cls), where)
        arguments = dict(given)
        for f in declared_fields(cls):
            if f.name in given:
                continue
            if f.name in values or f.required:
                arguments[f.name] = self.kind(values.get(f.name), f.kind, path(where, f.name))
        return cls(**arguments)


def defaults_by(cls: type, variant: str) -> dict[str, Any]:
    """The fields a `variant` of `cls` has (see Declared.defaults_by), with their defaults."""
    return {
        f.name: f.declared.defaults_by[variant]
        for f in declared_fields(cls)
        if variant in f.declared.defaults_by
    }


def describe_default(f: DeclaredField) -> str:
    """A field's default as the docs write it."""
    if f.declared.defaults_by:
        return ", ".join(
            f"{variant}: {_shown_default(default, f.kind)}"
            for variant, default in f.declared.defaults_by.items()
        )
    return "required" if f.required else _shown(f.default)


def _shown_default(default: Any, kind: Kind) -> str:
    # None where the kind refuses None: the field must be given.
    return "required" if default is None and kind.none is _REFUSED else _shown(default)


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


REFERENCE_HEADER = ("| Field | Holds | Default | Meaning |", "|---|---|---|---|")


def reference_rows(cls: type, where: str) -> list[str]:
    """A Markdown table row per declared field of `cls` (path, kind, default, meaning),
    leaving out sections (mappings), which have rows of their own."""
    return [
        f"| `{path(where, f.name)}` | {f.kind.words} | {describe_default(f)} | {f.doc} |"
        for f in declared_fields(cls)
        if f.kind is not MAPPING
    ]
