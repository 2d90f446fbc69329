"""Span directories under a data root: which spans are there, read without TFX.

The dataset spec's `input.pattern` uses TFX's placeholders (`{SPAN}`,
`{SPAN:N}`, `{YYYY}`/`{MM}`/`{DD}`, `{VERSION}`, `{VERSION:N}`; see
`contract.dataset.sections.InputSpec`). Which span a run reads is decided by TFX's
resolution: its ExampleGen driver locally, our ExampleGen executor on Kubeflow
(components/example_gen/span_resolution.py, the window's earlier spans too).
This module lists the spans present for the runner's check of the data root
before anything heavy is imported (the latest, or the window of the last N) and
for the schema draft.

A path is read as TFX reads it, by the one matcher (contract/dataset/span_grammar.py):
the pattern's glob lists it, and the regex made from the pattern takes the span
and the version out of it. A listed path TFX reads no span from fails TFX's
resolution of the whole data root; `SpanPattern.refusal` says why, so that the
check says it before the run. The data root itself is a path, never a pattern:
`glob_root` escapes it wherever it is joined to one, and `root_problem` names a
root that TFX's regex, made from the escaped root and the pattern together,
would not read as itself.
"""

from __future__ import annotations

import fnmatch
import glob
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

from contract.dataset.span_grammar import (
    DATE_SPECS,
    SPAN_FULL_REGEX,
    VERSION_FULL_REGEX,
    PatternSpecs,
    glob_and_regex,
    glob_to_regex,
    pattern_for_span_version,
    pattern_specs,
    read_span_version,
)

# The characters of a root that TFX's regex reads as its own (`*` and `?` even escaped:
# `glob.escape` makes them `[*]`, which `glob_to_regex` rewrites).
_ROOT_REGEX_CHARACTERS = "*?^$|{}"


def glob_root(root: str) -> str:
    """`root` escaped for a glob joined to it: a data root named `data[1]` is that folder,
    not `data1`. `glob.escape`'s form (`[[]`) is also what TensorFlow's file systems
    (fnmatch), Beam's and TFX's span regex read as the character itself."""
    return glob.escape(root)


def root_problem(root: str) -> str | None:
    """What of `root` TFX's ExampleGen would not read as the folder's name beside a span
    pattern, which it makes into one regex with the escaped root (`glob_and_regex`), its
    placeholders filled wherever they are: the characters that regex reads as its own, or a
    placeholder; None when it reads the root as it is."""
    full_regexes = (SPAN_FULL_REGEX, VERSION_FULL_REGEX)
    if any(re.search(r, root) for r in full_regexes) or any(d in root for d in DATE_SPECS):
        return "a span placeholder"
    try:
        if re.fullmatch(glob_to_regex(glob_root(root)), root):
            return None
    except re.error:
        pass
    return ", ".join(repr(c) for c in _ROOT_REGEX_CHARACTERS if c in root) or repr(root)


@dataclass(frozen=True)
class SpanPattern:
    """A checked `input.pattern` (contract.dataset.parse validates it when the spec is read),
    read as TFX reads it."""

    pattern: str

    @cached_property
    def specs(self) -> PatternSpecs:
        return pattern_specs(self.pattern)

    @cached_property
    def _glob_and_regex(self) -> tuple[str, str]:
        # The pattern alone: relative paths, under a root that reads as itself (root_problem).
        return glob_and_regex("", self.pattern, self.specs, None)

    @property
    def is_date(self) -> bool:
        return self.specs.date

    @property
    def has_version(self) -> bool:
        return self.specs.version

    def glob(self) -> str:
        """The pattern with every placeholder as `*`: what TFX lists under the data root."""
        return self._glob_and_regex[0]

    def folder(self) -> SpanPattern | None:
        """The pattern of the folders that hold a span's files (`dt={YYYY}-{MM}-{DD}` of
        `dt={YYYY}-{MM}-{DD}/*.parquet`): when the span's number (or its whole date) is
        in a folder's name, the folder is the span's partition; else None."""
        folder = posixpath.dirname(self.pattern)
        if re.search(SPAN_FULL_REGEX, folder) or all(d in folder for d in DATE_SPECS):
            return SpanPattern(folder)
        return None

    def relative_matches(self, root: str, glob: Callable[[str], Iterable[str]]) -> list[str]:
        """Paths under `root` that `glob()` finds (`glob`: the filesystem's), relative to it,
        sorted: a local glob lists in directory order, which differs between filesystems."""
        base = root.rstrip("/")
        return sorted(path[len(base) + 1 :] for path in glob(f"{glob_root(base)}/{self.glob()}"))

    def lists(self, relative_path: str) -> bool:
        """Whether the glob lists the path: each of its names matches the glob's, whose `*`,
        `?` and `[...]` match within one name (fnmatch, as TensorFlow's file systems)."""
        names, globs = relative_path.split("/"), self.glob().split("/")
        return len(names) == len(globs) and all(
            fnmatch.fnmatchcase(name, part) for name, part in zip(names, globs, strict=True)
        )

    def refusal(self, relative_path: str) -> str | None:
        """TFX's reason for reading no span from a path its glob lists (TFX's resolution then
        fails for the whole data root: span_grammar.read_span_version); None where it reads
        one."""
        try:
            read_span_version(relative_path, self._glob_and_regex[1], self.specs)
        except ValueError as err:
            return str(err)
        return None

    def match(self, relative_path: str) -> tuple[int, int | None] | None:
        """(span, version) of a path relative to the data root, or None if it is no span's:
        the glob does not list it, or TFX reads no span from it (`refusal`)."""
        if not self.lists(relative_path):
            return None
        try:
            _, span, _, version = read_span_version(
                relative_path, self._glob_and_regex[1], self.specs
            )
        except ValueError:
            return None
        return span, version

    def matches_unpadded(self, relative_path: str) -> bool:
        """Whether the path would be a date span with {MM} and {DD} of one digit too
        (Spark's `month=1/day=5`), which TFX's placeholders do not match."""
        if not self.is_date:
            return False
        loose = self._glob_and_regex[1].replace("(?P<month>.{2})", r"(?P<month>\d{1,2})")
        loose = loose.replace("(?P<day>.{2})", r"(?P<day>\d{1,2})")
        return re.fullmatch(loose, relative_path) is not None

    def for_span(self, span: int, version: int | None) -> str:
        """The pattern with the span (and version) filled in, zero-padded as TFX pads them."""
        return pattern_for_span_version(self.pattern, span, version)


@dataclass(frozen=True)
class Span:
    """One span present under the data root, in its latest version, and its files."""

    span: int
    version: int | None
    files: tuple[str, ...]  # relative to the data root, sorted


def present_spans(pattern: SpanPattern, relative_paths: Iterable[str]) -> list[Span]:
    """The spans among `relative_paths`, oldest first, each in its latest version."""
    by_span: dict[int, dict[int | None, list[str]]] = {}
    for path in relative_paths:
        found = pattern.match(path)
        if found is not None:
            span, version = found
            by_span.setdefault(span, {}).setdefault(version, []).append(path)
    spans = []
    for span in sorted(by_span):
        versions = by_span[span]
        latest = max(versions, key=lambda v: -1 if v is None else v)
        spans.append(Span(span=span, version=latest, files=tuple(sorted(versions[latest]))))
    return spans


def latest_spans(pattern: SpanPattern, relative_paths: Iterable[str], count: int) -> list[Span]:
    """The newest `count` spans present (fewer if there are fewer), oldest first."""
    return present_spans(pattern, relative_paths)[-count:]
