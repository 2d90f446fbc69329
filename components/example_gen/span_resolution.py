"""Which spans an ExampleGen execution reads, and their fingerprint: TFX's resolution, without TFX.

TFX's ExampleGen driver resolves a span pattern with its
`FileBasedInputProcessor` (tfx 1.16, `tfx/components/example_gen/
input_processor.py`, which calls `tfx/components/example_gen/utils.py`) and
fingerprints the files with `tfx/utils/io_utils.py`. Both modules are inside
TFX's component package: importing either runs `tfx/components/__init__.py`,
hence TFMA and TensorFlow, and both reach files through `fileio`, hence
TensorFlow again. This module is a port of that code as this project uses it
(one span at a time, latest or a static one), each rule citing the TFX 1.16
line it reproduces, reaching files through components/store_files.py: local
paths through the OS, s3:// through boto3. tests/test_span_resolution.py runs
TFX's processor and this port on the same trees and compares the answers.

`resolve_input` is the one resolution ExampleGen's executor
(components/example_gen/executor.py) and the InputSnapshot step
(kubeflow/steps/input_snapshot/component.py) use on Kubeflow; locally TFX's driver
resolves the latest span itself and hands it over (`driver_resolved`).

Port register: docs/ports.md
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from components import store_files
from components.example_gen.input_files import Days, Partition, empty_day_message, read_days
from components.example_gen.spans import (
    SpanPattern,
    date_to_span,
    glob_root,
    present_spans,
    span_to_date,
)
from contract.dataset.span_grammar import DATE_PLACEHOLDERS

# utils.py, lines 40-62: the placeholders and the regexes that find them, with the width.
SPAN_NAME = "span"
SPAN_SPEC = "{SPAN}"
SPAN_FULL_REGEX = "{SPAN}|{SPAN:(?P<width>.*?)}"
VERSION_NAME = "version"
VERSION_SPEC = "{VERSION}"
VERSION_FULL_REGEX = "{VERSION}|{VERSION:(?P<width>.*?)}"
DATE_SPECS = DATE_PLACEHOLDERS  # The dataset spec's own, in TFX's order.
_DATE_GROUPS = ("year", "month", "day")
# io_utils.py, line 32.
NANO_PER_SEC = 1000 * 1000 * 1000


class InputPatternError(ValueError):
    """The data root holds no span the input pattern can read."""


class HasSplits(Protocol):
    """An input config: example_gen_pb2.Input, or `InputSplits` read from its JSON."""

    @property
    def splits(self) -> Iterable[Any]: ...  # each with `name` and `pattern`


@dataclass
class Split:
    """One input split: TFX's `example_gen_pb2.Input.Split`, whose pattern it rewrites."""

    name: str
    pattern: str


@dataclass(frozen=True)
class InputSplits:
    """An input config as its JSON form (`json_format.MessageToJson(Input)`) gives it."""

    splits: tuple[Split, ...]

    @classmethod
    def from_json(cls, text: str) -> InputSplits:
        # proto3's JSON leaves out an empty string: a split without a name has none.
        raw = json.loads(text)
        return cls(
            splits=tuple(
                Split(name=s.get("name", ""), pattern=s.get("pattern", ""))
                for s in raw.get("splits", [])
            )
        )


@dataclass(frozen=True)
class SpanRead:
    """One span a run reads: its number, version, and the pattern of each input split."""

    span: int
    version: int | None
    patterns: dict[str, str]  # split name -> pattern relative to the data root
    fingerprint: str


@dataclass(frozen=True)
class ResolvedInput:
    """What an ExampleGen execution reads: spans oldest first; the last is the latest."""

    spans: tuple[SpanRead, ...]
    # Span folders with no data file and no marker, left out (not part of the snapshot).
    left_out: tuple[Partition, ...] = field(default=(), compare=False)

    @property
    def latest(self) -> SpanRead:
        return self.spans[-1]

    @property
    def fingerprint(self) -> str:
        """The driver's fingerprint for one span; for a window, every span's, labelled."""
        if len(self.spans) == 1:
            return self.latest.fingerprint
        return "\n".join(f"span {s.span}:\n{s.fingerprint}" for s in self.spans)

    def to_json(self) -> str:
        return json.dumps([asdict(s) for s in self.spans], sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ResolvedInput:
        return cls(spans=tuple(SpanRead(**s) for s in json.loads(text)))


@dataclass(frozen=True)
class _Specs:
    """Which placeholders a split pattern holds (utils.py, `verify_split_pattern_specs`)."""

    span: bool
    date: bool
    version: bool


def _glob_to_regex(glob_pattern: str) -> str:
    """utils.py, lines 240-250, in its order."""
    regex = glob_pattern.replace("\\", "\\\\")
    regex = regex.replace(".", r"\.")
    regex = regex.replace("+", r"\+")
    regex = regex.replace("*", r"[^\\/]*")
    regex = regex.replace("?", r"[^\\/]")
    regex = regex.replace("(", r"\(")
    return regex.replace(")", r"\)")


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


def _specs(pattern: str) -> _Specs:
    """utils.py, `verify_split_pattern_specs` (lines 286-325), its checks in its order."""
    span_matches = re.findall(SPAN_FULL_REGEX, pattern)
    version_matches = re.findall(VERSION_FULL_REGEX, pattern)
    specs = _Specs(
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


def _checked_specs(splits: Iterable[Split], static_span: int | None) -> _Specs | None:
    """input_processor.py, `FileBasedInputProcessor.__init__` (lines 137-156): every split
    holds the same placeholders, and a static span needs a span or date placeholder."""
    found = None
    for split in splits:
        specs = _specs(split.pattern)
        if found is None:
            found = specs
        elif found != specs:
            raise ValueError(f"Spec setup should the same for all splits: {split.pattern}.")
    if found is not None and not (found.span or found.date) and static_span is not None:
        raise ValueError(
            "Span or Date spec should be specified in split pattern if RangeConfig is specified."
        )
    return found


def pattern_for_span_version(pattern: str, span: int, version: int | None) -> str:
    """utils.py, `get_pattern_for_span_version` (lines 328-345): the placeholders filled,
    zero-padded to their width; the date's parts to 4, 2 and 2 digits."""
    specs = _specs(pattern)
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


def _spec_width(spec_full_regex: str, name: str, pattern: str) -> str | None:
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


def _glob_and_regex(
    uri: str, split: Split, specs: _Specs, static_span: int | None
) -> tuple[str, str]:
    """utils.py, `_create_matching_glob_and_regex` (lines 460-562) and, for a static span,
    `_get_span_replace_glob_and_regex` (lines 427-457): the glob to list, and the regex
    whose groups take the span (or the date) and the version out of each path."""
    split_pattern = os.path.join(uri, split.pattern)  # Line 497.
    glob_pattern, regex = split_pattern, _glob_to_regex(split_pattern)
    if specs.span:  # Lines 501-522: greedy `.*`, or `.{width}`.
        glob_replace, regex_replace = "*", ".*"
        width_str = _spec_width(SPAN_FULL_REGEX, SPAN_NAME, split.pattern)
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
        for spec, replace, group in zip(DATE_SPECS, regex_replaces, _DATE_GROUPS, strict=True):
            regex = regex.replace(spec, f"(?P<{group}>{replace})")
    if specs.version:  # Lines 546-560.
        width_regex = ".*"
        width_str = _spec_width(VERSION_FULL_REGEX, VERSION_NAME, split.pattern)
        if width_str:
            width_regex = f".{{{width_str}}}"
        glob_pattern = re.sub(VERSION_FULL_REGEX, "*", glob_pattern)
        regex = re.sub(VERSION_FULL_REGEX, f"(?P<{VERSION_NAME}>{width_regex})", regex)
    return glob_pattern, regex


def _matched(path: str, regex: str, specs: _Specs) -> tuple[list[str], int, str | None, int | None]:
    """utils.py, `_find_matched_span_version_from_path` (lines 361-406): the span's tokens
    and number, the version's token and number, of one listed path (`re.search`). Called
    for a pattern with a span or a date (`_target_span_version` returns before, else)."""
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
        tokens = [result.group(name) for name in _DATE_GROUPS]
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


def _target_span_version(
    uri: str, split: Split, static_span: int | None
) -> tuple[int | None, int | None]:
    """utils.py, `_get_target_span_version` (lines 565-659): the latest span among the
    listed paths and, for it, the latest version; `split.pattern` gets their tokens as
    matched (zero padding and all)."""
    specs = _specs(split.pattern)
    if not specs.span and not specs.date:
        return None, None
    glob_pattern, regex = _glob_and_regex(uri, split, specs, static_span)
    latest_tokens: list[str] = []
    latest_span: int | None = None
    latest_version: str | None = None
    latest_version_int: int | None = None
    for path in store_files.glob(glob_pattern):  # Lines 626-642.
        tokens, span, version, version_int = _matched(path, regex, specs)
        if latest_span is None or span > latest_span:
            latest_tokens, latest_span = tokens, span
            latest_version, latest_version_int = version, version_int
        elif latest_span == span and (
            # With a version placeholder, both are numbers once `latest_version` is set.
            latest_version is None
            or (version_int is not None and version_int >= (latest_version_int or 0))
        ):
            latest_version, latest_version_int = version, version_int
    if latest_span is None or (specs.version and latest_version is None):  # Lines 644-646.
        raise ValueError(f"Cannot find matching for split {split.name} based on {split.pattern}")
    if specs.span:  # Lines 649-657.
        split.pattern = re.sub(SPAN_FULL_REGEX, latest_tokens[0], split.pattern)
    elif specs.date:
        for spec, value in zip(DATE_SPECS, latest_tokens, strict=True):
            split.pattern = split.pattern.replace(spec, value)
    if specs.version:
        split.pattern = re.sub(VERSION_FULL_REGEX, str(latest_version), split.pattern)
    return latest_span, latest_version_int


def file_fingerprint(split_name: str, file_pattern: str) -> str:
    """io_utils.py, `generate_fingerprint` (lines 202-220): the files' count, total size,
    and xor and sum of their modification times in whole seconds."""
    files = store_files.glob(file_pattern)
    total_bytes = xor_checksum = sum_checksum = 0
    for path in files:
        found = store_files.stat(path)
        total_bytes += found.length
        mtime = int(found.mtime_nsec / NANO_PER_SEC)  # Line 215: true division, truncated.
        xor_checksum ^= mtime
        sum_checksum += mtime
    return (
        f"split:{split_name},num_files:{len(files)},total_bytes:{total_bytes},"
        f"xor_checksum:{xor_checksum},sum_checksum:{sum_checksum}"
    )


def splits_fingerprint_span_and_version(
    uri: str, splits: Iterable[Split], static_span: int | None
) -> tuple[str, int, int | None]:
    """utils.py, `calculate_splits_fingerprint_span_and_version` (lines 662-725), on copies
    of the splits (input_processor.py, lines 163-167): (fingerprint, span, version)."""
    fingerprints = []
    select_span, select_version = 0, None
    for split in (copy.deepcopy(s) for s in splits):
        target_span, target_version = _target_span_version(uri, split, static_span)
        target_span = target_span or 0  # Line 704.
        if select_span == 0 and select_version is None:  # Lines 709-711.
            select_span, select_version = target_span, target_version
        if select_span != target_span:
            raise ValueError("Latest span should be the same for each split")
        if select_version != target_version:
            raise ValueError("Latest version should be the same for each split")
        fingerprints.append(file_fingerprint(split.name, os.path.join(uri, split.pattern)))
    return "\n".join(fingerprints), select_span, select_version


def pattern_error(
    input_base: str,
    splits: Iterable[Any],
    err: ValueError,
    glob: Callable[[str], Iterable[str]],
) -> InputPatternError:
    """TFX's error resolving `splits` (each with `pattern`) as one line naming the data
    root and the pattern: no file there at all, or TFX's reason."""
    patterns = [s.pattern for s in splits]
    if not any(SpanPattern(p).relative_matches(input_base, glob) for p in patterns):
        return InputPatternError(
            f"no files under {input_base} match the input pattern {', '.join(patterns)} "
            "(the dataset spec's input.pattern)"
        )
    return InputPatternError(
        f"input pattern {', '.join(patterns)} under {input_base} "
        f"(the dataset spec's input.pattern): {err}"
    )


def _resolve_span(input_base: str, splits: list[Split], span: int | None) -> SpanRead:
    """One span (None: the latest) exactly as TFX's ExampleGen driver resolves it: a
    `FileBasedInputProcessor` on the escaped root (TFX globs the root and the pattern
    joined), its `resolve_span_and_version`, `get_pattern_for_span_version` and
    `get_input_fingerprint` (input_processor.py, lines 120-193)."""
    uri = glob_root(input_base)
    _checked_specs(splits, span)
    try:
        fingerprint, resolved_span, version = splits_fingerprint_span_and_version(uri, splits, span)
    except ValueError as err:
        raise pattern_error(input_base, splits, err, store_files.glob) from None
    return SpanRead(
        span=resolved_span,
        version=version,
        patterns={
            s.name: pattern_for_span_version(s.pattern, resolved_span, version) for s in splits
        },
        fingerprint=fingerprint,
    )


def _earlier_spans(input_base: str, pattern: str, latest: int, count: int) -> list[int]:
    """Up to `count` (>= 1) span numbers present below `latest`, oldest first."""
    span_pattern = SpanPattern(pattern)
    paths = span_pattern.relative_matches(input_base, store_files.glob)
    return [s.span for s in present_spans(span_pattern, paths) if s.span < latest][-count:]


def resolve_input(
    input_base: str,
    input_config: HasSplits,
    window: dict[str, Any],
    driver_resolved: SpanRead | None = None,
) -> ResolvedInput:
    """The spans an execution reads, with TFX's resolution; `driver_resolved`: the latest,
    when TFX's driver has already resolved it (locally)."""
    splits = [Split(name=s.name, pattern=s.pattern) for s in input_config.splits]
    days = _days(input_base, window)
    latest = driver_resolved or _resolve_span(input_base, splits, None)
    if not window.get("pattern") or window.get("spans", 1) <= 1:
        return ResolvedInput(spans=(latest,), left_out=days.left_out)
    earlier = _earlier_spans(input_base, window["pattern"], latest.span, window["spans"] - 1)
    raw_splits = [Split(name=s.name, pattern=window["pattern"]) for s in splits]
    return ResolvedInput(
        spans=(*(_resolve_span(input_base, raw_splits, s) for s in earlier), latest),
        left_out=days.left_out,
    )


def _days(input_base: str, window: dict[str, Any]) -> Days:
    """What the span folders say of the window (components/example_gen/input_files.py `read_days`):
    InputPatternError for an empty day a writer marked complete, which TFX's resolution,
    matching data files, would pass over for the day before. Where every day holds a
    data file, TFX's resolution above is left as it is."""
    if not window.get("pattern"):
        return Days()
    days = read_days(
        SpanPattern(window["pattern"]), input_base, store_files.glob, window.get("spans", 1)
    )
    if days.empty:
        raise InputPatternError(empty_day_message(input_base, days.empty[-1]))
    return days
