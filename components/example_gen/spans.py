"""Span directories under a data root: which spans are there, read without TFX.

The dataset spec's `input.pattern` uses TFX's placeholders (`{SPAN}`,
`{SPAN:N}`, `{YYYY}`/`{MM}`/`{DD}`, `{VERSION}`, `{VERSION:N}`; see
`contract.dataset.sections.InputSpec`). Which span a run reads is decided by TFX's own
code: its ExampleGen driver locally, our ExampleGen executor on Kubeflow
(components/example_gen/executor.py). This module only lists the spans present, for
two callers TFX has nothing for: the runner's check of the data root before
anything heavy is imported, and the rolling window of the last N spans
(TFX's ExampleGen reads one span per run).

Paths are matched as TFX matches them: the pattern is a glob relative to the
data root, and the span and version are the numbers in the placeholders'
places. Paths that match the glob but hold no number there are not spans.
The data root itself is a path, never a pattern: `glob_root` escapes it
wherever it is joined to one.
"""

from __future__ import annotations

import datetime
import glob
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from contract.dataset.span_grammar import DATE_PLACEHOLDERS, SPAN_PLACEHOLDER, VERSION_PLACEHOLDER

_EPOCH = datetime.date(1970, 1, 1)
_DATE_GROUPS = {"{YYYY}": ("year", 4), "{MM}": ("month", 2), "{DD}": ("day", 2)}
_TOKEN = re.compile(r"\{SPAN(?::\d+)?\}|\{VERSION(?::\d+)?\}|\{YYYY\}|\{MM\}|\{DD\}")


def date_to_span(year: int, month: int, day: int) -> int:
    """TFX's span number for a date: days since 1970-01-01."""
    return (datetime.date(year, month, day) - _EPOCH).days


def span_to_date(span: int) -> datetime.date:
    return _EPOCH + datetime.timedelta(days=span)


def glob_root(root: str) -> str:
    """`root` escaped for a glob joined to it: a data root named `data[1]` is that folder,
    not `data1`. `glob.escape`'s form (`[[]`) is also what TensorFlow's file systems
    (fnmatch), Beam's and TFX's span regex read as the character itself."""
    return glob.escape(root)


def _glob_piece_to_regex(piece: str) -> str:
    """A glob fragment (no placeholders) as a regex; `*` and `?` stay within a directory."""
    out = []
    for char in piece:
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(char))
    return "".join(out)


@dataclass(frozen=True)
class SpanPattern:
    """A checked `input.pattern` (contract.dataset.parse validates it when the spec is read)."""

    pattern: str

    @property
    def is_date(self) -> bool:
        return DATE_PLACEHOLDERS[0] in self.pattern

    @property
    def has_version(self) -> bool:
        return VERSION_PLACEHOLDER.search(self.pattern) is not None

    def glob(self) -> str:
        """The pattern with every placeholder as `*`: what to list under the data root."""
        return _TOKEN.sub("*", self.pattern)

    def folder(self) -> SpanPattern | None:
        """The pattern of the folders that hold a span's files (`dt={YYYY}-{MM}-{DD}` of
        `dt={YYYY}-{MM}-{DD}/*.parquet`): when the span's number (or its whole date) is
        in a folder's name, the folder is the span's partition; else None."""
        folder = posixpath.dirname(self.pattern)
        if SPAN_PLACEHOLDER.search(folder) or all(d in folder for d in DATE_PLACEHOLDERS):
            return SpanPattern(folder)
        return None

    def _regex(self) -> re.Pattern[str]:
        parts = []
        position = 0
        for match in _TOKEN.finditer(self.pattern):
            parts.append(_glob_piece_to_regex(self.pattern[position : match.start()]))
            token = match.group(0)
            width = token.split(":")[1].rstrip("}") if ":" in token else None
            digits = rf"\d{{{width}}}" if width else r"\d+"
            if token.startswith("{SPAN"):
                parts.append(rf"(?P<span>{digits})")
            elif token.startswith("{VERSION"):
                parts.append(rf"(?P<version>{digits})")
            else:
                group, size = _DATE_GROUPS[token]
                parts.append(rf"(?P<{group}>\d{{{size}}})")
            position = match.end()
        parts.append(_glob_piece_to_regex(self.pattern[position:]))
        return re.compile("".join(parts))

    def relative_matches(self, root: str, glob: Callable[[str], Iterable[str]]) -> list[str]:
        """Paths under `root` that `glob()` finds (`glob`: the filesystem's), relative to it,
        sorted: a local glob lists in directory order, which differs between filesystems."""
        base = root.rstrip("/")
        return sorted(path[len(base) + 1 :] for path in glob(f"{glob_root(base)}/{self.glob()}"))

    def matches_unpadded(self, relative_path: str) -> bool:
        """Whether the path would be a date span with {MM} and {DD} of one digit too
        (Spark's `month=1/day=5`), which TFX's placeholders do not match."""
        if not self.is_date:
            return False
        loose = self._regex().pattern.replace(r"(?P<month>\d{2})", r"(?P<month>\d{1,2})")
        loose = loose.replace(r"(?P<day>\d{2})", r"(?P<day>\d{1,2})")
        return re.fullmatch(loose, relative_path) is not None

    def match(self, relative_path: str) -> tuple[int, int | None] | None:
        """(span, version) of a path relative to the data root, or None if it is no span's."""
        found = self._regex().fullmatch(relative_path)
        if found is None:
            return None
        if self.is_date:
            try:
                span = date_to_span(
                    int(found.group("year")), int(found.group("month")), int(found.group("day"))
                )
            except ValueError:  # Not a calendar date (2024-13-40).
                return None
        else:
            span = int(found.group("span"))
        return span, int(found.group("version")) if self.has_version else None

    def for_span(self, span: int, version: int | None) -> str:
        """The pattern with the span (and version) filled in, zero-padded as TFX pads them."""

        def number(spec: re.Pattern[str], value: int, text: str) -> str:
            match = spec.search(text)
            width = match.group(1) if match else None
            return str(value).zfill(int(width)) if width else str(value)

        resolved = self.pattern
        if self.is_date:
            date = span_to_date(span)
            for token, value in zip(
                DATE_PLACEHOLDERS, (date.year, date.month, date.day), strict=True
            ):
                resolved = resolved.replace(token, str(value).zfill(_DATE_GROUPS[token][1]))
        else:
            resolved = SPAN_PLACEHOLDER.sub(number(SPAN_PLACEHOLDER, span, resolved), resolved)
        if self.has_version:
            if version is None:
                raise ValueError(f"{self.pattern}: span {span} needs a version")
            resolved = VERSION_PLACEHOLDER.sub(
                number(VERSION_PLACEHOLDER, version, resolved), resolved
            )
        return resolved


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
