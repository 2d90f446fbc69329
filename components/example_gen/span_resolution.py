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
paths through the OS, s3:// through boto3. The placeholders, a pattern's glob and
regex and the reading of each listed path are contract/dataset/span_grammar.py's,
the one matcher the runner's check reads with too: here it resolves the latest span
(or a static one) and finds the window's earlier spans among the same files.
tests/test_span_resolution.py runs TFX's processor and this port on the same trees
and compares the answers.

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
from components.example_gen.spans import SpanPattern, glob_root
from contract.dataset.span_grammar import (
    DATE_SPECS,
    SPAN_FULL_REGEX,
    VERSION_FULL_REGEX,
    PatternSpecs,
    glob_and_regex,
    pattern_for_span_version,
    pattern_specs,
    read_span_version,
)

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


def _checked_specs(splits: Iterable[Split], static_span: int | None) -> PatternSpecs | None:
    """input_processor.py, `FileBasedInputProcessor.__init__` (lines 137-156): every split
    holds the same placeholders, and a static span needs a span or date placeholder."""
    found = None
    for split in splits:
        specs = pattern_specs(split.pattern)
        if found is None:
            found = specs
        elif found != specs:
            raise ValueError(f"Spec setup should the same for all splits: {split.pattern}.")
    if found is not None and not (found.span or found.date) and static_span is not None:
        raise ValueError(
            "Span or Date spec should be specified in split pattern if RangeConfig is specified."
        )
    return found


def _listed(
    uri: str, pattern: str, specs: PatternSpecs, static_span: int | None
) -> list[tuple[list[str], int, str | None, int | None]]:
    """utils.py, `_get_target_span_version` (lines 609-631): every path TFX's glob lists
    under `uri`, read by its regex (contract/dataset/span_grammar.py), in the listing's
    order; TFX's ValueError at the first it reads no span from."""
    glob_pattern, regex = glob_and_regex(uri, pattern, specs, static_span)
    return [read_span_version(path, regex, specs) for path in store_files.glob(glob_pattern)]


def _target_span_version(
    uri: str, split: Split, static_span: int | None
) -> tuple[int | None, int | None]:
    """utils.py, `_get_target_span_version` (lines 565-659): the latest span among the
    listed paths and, for it, the latest version; `split.pattern` gets their tokens as
    matched (zero padding and all)."""
    specs = pattern_specs(split.pattern)
    if not specs.span and not specs.date:
        return None, None
    latest_tokens: list[str] = []
    latest_span: int | None = None
    latest_version: str | None = None
    latest_version_int: int | None = None
    for tokens, span, version, version_int in _listed(  # Lines 626-642.
        uri, split.pattern, specs, static_span
    ):
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
    """Up to `count` (>= 1) span numbers below `latest` among the files, oldest first: read
    with the rule that resolved the latest (`_listed`), so that both see the same spans."""
    try:
        listed = _listed(glob_root(input_base), pattern, pattern_specs(pattern), None)
    except ValueError as err:
        raise pattern_error(input_base, [Split("", pattern)], err, store_files.glob) from None
    return sorted({span for _, span, _, _ in listed if span < latest})[-count:]


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
