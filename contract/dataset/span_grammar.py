"""The span pattern of a dataset spec's `input.pattern`: its placeholders, and how a file's
path reads against it, as TFX's ExampleGen reads them.

`{SPAN}` (or `{SPAN:N}`, zero-padded to N digits), the date `{YYYY}`, `{MM}`,
`{DD}` (the span is the day's number since 1970-01-01), and `{VERSION}` (or
`{VERSION:N}`). TFX 1.16 makes a pattern into a glob, which lists the files,
and a regex, which takes each listed path's span and version out of it
(`tfx/components/example_gen/utils.py`): this module is that code, ported
without TFX (its module imports TFX's component package, so TFMA and
TensorFlow), each rule citing the line it reproduces, so that one matcher
serves every reader of a pattern: the spec's check (contract/dataset/parse.py),
the runner's check of the data root and the window's earlier spans
(components/example_gen/spans.py) and the port of TFX's resolution
(components/example_gen/span_resolution.py).

TFX's rule is not a glob's: its regex escapes only `\\ . + ( )`, so `[0-9]` is
a character class to both, but `[!0]` is a class of `!` and `0` to the regex,
and `^ $ |` are the regex's own (`unreadable` names them); `{SPAN}` takes as
much of a name as the rest allows (`.*`), and a path the glob lists whose span
is no number fails the whole resolution, as TFX's does.

Port register: docs/ports.md
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass

# utils.py, lines 40-62: each placeholder, its group's name, and the regex that finds it
# with or without a width (`{SPAN:x}` captures `x`, whatever it is).
SPAN_NAME, SPAN_SPEC = "span", "{SPAN}"
SPAN_FULL_REGEX = "{SPAN}|{SPAN:(?P<width>.*?)}"
VERSION_NAME, VERSION_SPEC = "version", "{VERSION}"
VERSION_FULL_REGEX = "{VERSION}|{VERSION:(?P<width>.*?)}"
# The date's placeholders in TFX's order of importance, and their groups (lines 524-544).
DATE_SPECS = ("{YYYY}", "{MM}", "{DD}")
DATE_GROUPS = ("year", "month", "day")
# The forms a dataset spec may write: TFX's, with a width it reads without an error
# (`spec_width`: a positive integer).
SPAN_PLACEHOLDER = re.compile(r"\{SPAN(?::(0*[1-9]\d*))?\}")
VERSION_PLACEHOLDER = re.compile(r"\{VERSION(?::(0*[1-9]\d*))?\}")
# utils.py, line 76.
_EPOCH = datetime.date(1970, 1, 1)


def glob_to_regex(glob_pattern: str) -> str:
    """utils.py, `_glob_to_regex` (lines 240-250), in its order."""
    regex = glob_pattern.replace("\\", "\\\\")
    regex = regex.replace(".", r"\.")
    regex = regex.replace("+", r"\+")
    regex = regex.replace("*", r"[^\\/]*")
    regex = regex.replace("?", r"[^\\/]")
    regex = regex.replace("(", r"\(")
    return regex.replace(")", r"\)")


def date_to_span(year: int, month: int, day: int) -> int:
    """utils.py, `date_to_span_number` (lines 253-255): days since 1970-01-01."""
    return (datetime.date(year, month, day) - _EPOCH).days


def span_to_date(span: int) -> datetime.date:
    """utils.py, `span_number_to_date` (lines 258-261)."""
    return _EPOCH + datetime.timedelta(days=span)


@dataclass(frozen=True)
class PatternSpecs:
    """Which placeholders a pattern holds (utils.py, `verify_split_pattern_specs`)."""

    span: bool
    date: bool
    version: bool


def pattern_specs(pattern: str) -> PatternSpecs:
    """utils.py, `verify_split_pattern_specs` (lines 286-325), its checks in its order."""
    span_matches = re.findall(SPAN_FULL_REGEX, pattern)
    version_matches = re.findall(VERSION_FULL_REGEX, pattern)
    specs = PatternSpecs(
        span=bool(span_matches),
        date=any(spec in pattern for spec in DATE_SPECS),
        version=bool(version_matches),
    )
    if specs.span and specs.date:
        raise ValueError(
            f"Either span spec or date specs must be specified exclusively in {pattern}"
        )
    if specs.span and len(span_matches) != 1:
        raise ValueError(f"Only one {SPAN_SPEC} is allowed in {pattern}")
    if specs.date and not all(pattern.count(spec) == 1 for spec in DATE_SPECS):
        raise ValueError(
            "Exactly one of each date spec ({}, {}, {}) is required in {}".format(
                *DATE_SPECS, pattern
            )
        )
    if specs.version and not (specs.span or specs.date):
        raise ValueError(
            f"Version spec provided, but Span or Date spec is not present in {pattern}"
        )
    if specs.version and len(version_matches) != 1:
        raise ValueError(f"Only one {VERSION_SPEC} is allowed in {pattern}")
    return specs


def _zero_padded(spec_full_regex: str, pattern: str, value: int | None) -> str:
    """utils.py, `_make_zero_padding_spec_value` (lines 264-283)."""
    match = re.search(spec_full_regex, pattern)
    assert match, f"No {spec_full_regex} found in split {pattern}"
    width_str = match.group("width")
    if not width_str:
        return str(value)
    try:
        width = int(width_str)
    except ValueError:
        raise ValueError(f"Width modifier is not a integer: {pattern}") from None
    if width <= 0:
        raise ValueError(f"Width modifier is not positive: {pattern}")
    if width < len(str(value)):
        raise ValueError(f"Spec width is less than number of digits in spec: ({width}, {value})")
    return str(value).zfill(width)


def pattern_for_span_version(pattern: str, span: int, version: int | None) -> str:
    """utils.py, `get_pattern_for_span_version` (lines 328-345): the placeholders filled,
    zero-padded to their width; the date's parts to 4, 2 and 2 digits."""
    specs = pattern_specs(pattern)
    if specs.span:
        pattern = re.sub(SPAN_FULL_REGEX, _zero_padded(SPAN_FULL_REGEX, pattern, span), pattern)
    elif specs.date:
        date = span_to_date(span)
        tokens = (str(date.year).zfill(4), str(date.month).zfill(2), str(date.day).zfill(2))
        for spec, value in zip(DATE_SPECS, tokens, strict=True):
            pattern = pattern.replace(spec, value)
    if specs.version:
        token = _zero_padded(VERSION_FULL_REGEX, pattern, version)
        pattern = re.sub(VERSION_FULL_REGEX, token, pattern)
    return pattern


def read_span_version(
    path: str, regex: str, specs: PatternSpecs
) -> tuple[list[str], int, str | None, int | None]:
    """utils.py, `_find_matched_span_version_from_path` (lines 361-406): the span's tokens
    and number, the version's token and number, of one listed path (`re.search`), or
    TFX's ValueError. For a pattern with a span or a date (TFX reads no other)."""
    result = re.search(regex, path)
    if result is None:
        raise ValueError("Glob pattern does not match regex pattern")
    version_token, version = None, None
    if specs.span:
        tokens = [result.group(SPAN_NAME)]
        try:
            span = int(tokens[0])
        except ValueError:
            raise ValueError(
                f"Cannot find {SPAN_NAME} number from {path} based on {regex}"
            ) from None
    else:
        tokens = [result.group(name) for name in DATE_GROUPS]
        try:
            numbers = [int(token) for token in tokens]
        except ValueError:
            raise ValueError(
                f"Cannot find {SPAN_NAME} number using date from {path} based on {regex}"
            ) from None
        try:
            span = date_to_span(*numbers)
        except ValueError:
            raise ValueError(f"Retrieved date is invalid for file: {path}") from None
    if specs.version:
        version_token = result.group(VERSION_NAME)
        try:
            version = int(version_token)
        except ValueError:
            raise ValueError(
                f"Cannot find {VERSION_NAME} number from {path} based on {regex}"
            ) from None
    return tokens, span, version_token, version


def spec_width(spec_full_regex: str, name: str, pattern: str) -> str | None:
    """utils.py, `_get_spec_width` (lines 409-424)."""
    match = re.search(spec_full_regex, pattern)
    assert match, f"No {name} found in split {pattern}"
    width_str = match.group("width")
    if width_str:
        try:
            if int(width_str) <= 0:
                raise ValueError("Not a positive integer.")
        except ValueError:
            raise ValueError(
                f"Width modifier in {name} spec is not a positive integer: {pattern}"
            ) from None
    return width_str


def glob_and_regex(
    uri: str, pattern: str, specs: PatternSpecs, static_span: int | None
) -> tuple[str, str]:
    """utils.py, `_create_matching_glob_and_regex` (lines 460-562) and, for a static span,
    `_get_span_replace_glob_and_regex` (lines 427-457): the glob to list under `uri` (TFX
    joins it as it is: an escaped root), and the regex whose groups take the span (or the
    date) and the version out of each listed path."""
    split_pattern = os.path.join(uri, pattern)  # Line 497.
    glob_pattern, regex = split_pattern, glob_to_regex(split_pattern)
    if specs.span:  # Lines 501-522: greedy `.*`, or `.{width}`.
        glob_replace, regex_replace = "*", ".*"
        width_str = spec_width(SPAN_FULL_REGEX, SPAN_NAME, pattern)
        if width_str:
            regex_replace = f".{{{width_str}}}"
        if static_span is not None:  # Lines 432-444: the span, zero-padded to the width.
            span_str = str(static_span)
            if width_str:
                if int(width_str) < len(span_str):
                    raise ValueError(
                        "Span spec width is less than number of digits in span: "
                        f"({int(width_str)}, {span_str})"
                    )
                span_str = span_str.zfill(int(width_str))
            glob_replace = regex_replace = span_str
        glob_pattern = re.sub(SPAN_FULL_REGEX, glob_replace, glob_pattern)
        regex = re.sub(SPAN_FULL_REGEX, f"(?P<{SPAN_NAME}>{regex_replace})", regex)
    elif specs.date:  # Lines 524-544.
        glob_replaces: tuple[str, ...] = ("*", "*", "*")
        regex_replaces: tuple[str, ...] = (".{4}", ".{2}", ".{2}")
        if static_span is not None:  # Lines 446-452.
            date = span_to_date(static_span)
            glob_replaces = regex_replaces = (
                str(date.year).zfill(4),
                str(date.month).zfill(2),
                str(date.day).zfill(2),
            )
        for spec, replace in zip(DATE_SPECS, glob_replaces, strict=True):
            glob_pattern = glob_pattern.replace(spec, replace)
        for spec, replace, group in zip(DATE_SPECS, regex_replaces, DATE_GROUPS, strict=True):
            regex = regex.replace(spec, f"(?P<{group}>{replace})")
    if specs.version:  # Lines 546-560.
        width_regex = ".*"
        width_str = spec_width(VERSION_FULL_REGEX, VERSION_NAME, pattern)
        if width_str:
            width_regex = f".{{{width_str}}}"
        glob_pattern = re.sub(VERSION_FULL_REGEX, "*", glob_pattern)
        regex = re.sub(VERSION_FULL_REGEX, f"(?P<{VERSION_NAME}>{width_regex})", regex)
    return glob_pattern, regex


# Characters `glob_to_regex` leaves for the regex to read as its own syntax, where a glob
# reads the character (`^`, `$`, `|`) or a negated class (`[!`).
_REGEX_SYNTAX = ("^", "$", "|", "[!")


def unreadable(pattern: str) -> str | None:
    """Why TFX's ExampleGen could read no span of `pattern` (one with placeholders TFX
    accepts), whatever the files: what its regex reads as syntax, or a regex that does not
    compile or holds no group for a placeholder (a `[` with no `]` takes it in); None if
    it can read one."""
    held = [syntax for syntax in _REGEX_SYNTAX if syntax in pattern]
    if held:
        return (
            f"it holds {', '.join(map(repr, held))}, which TFX's ExampleGen reads as a "
            "regex's, not as a glob's (it escapes only \\ . + ( ) of a pattern)"
        )
    specs = pattern_specs(pattern)
    try:
        groups = set(re.compile(glob_and_regex("", pattern, specs, None)[1]).groupindex)
    except (ValueError, re.error) as err:
        return f"TFX's ExampleGen makes it into a regex that is invalid ({err})"
    wanted = {SPAN_NAME} if specs.span else set(DATE_GROUPS)
    if specs.version:
        wanted.add(VERSION_NAME)
    if not wanted <= groups:
        return "a '[' with no ']' takes in a placeholder of TFX's regex"
    return None
