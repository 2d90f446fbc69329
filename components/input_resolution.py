"""Which spans an ExampleGen execution reads: TFX's driver's resolution, as a function.

`resolve_input` resolves the latest span (and the window's earlier ones) with
TFX's own input processor, as TFX's ExampleGen driver does, and returns each
span's version, patterns and fingerprint. ExampleGen's executor
(components/example_gen.py) reads what it returns; the InputSnapshot step
(kubeflow/steps/input_snapshot.py) runs it before ExampleGen on Kubeflow, so
that the data's fingerprint enters ExampleGen's cache key there too.

Kept apart from the module that defines ExampleGen, which imports TFX's
ExampleGen executor and Beam. TFX's input processor and its default input
config are inside TFX's component package, so this module still imports
`tfx/components/__init__.py`, and TFMA with it (docs/kubeflow.md, "What a
step loads").
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass
from typing import Any

from tfx.components.example_gen import input_processor
from tfx.components.example_gen import utils as example_gen_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2, range_config_pb2

from components.spans import SpanPattern, glob_root, present_spans


class InputPatternError(ValueError):
    """The data root holds no span the input pattern can read."""


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


def input_window(
    pattern: str | None,
    spans: int,
    format: str | None = None,
    ignore: tuple[str, ...] = (),
    text: tuple[str, ...] = (),
    skip_unsupported: bool = False,
) -> str:
    """The `input_window` execution property: the raw pattern and the window size; the
    files' format where the dataset spec names one (`input.format`), the columns it
    ignores (a Parquet column no feature can hold is skipped only if ignored), and the
    columns read as the text written (scoring's keys: a CSV's `007` stays `007`);
    `skip_unsupported` (scoring): every column no feature can hold is skipped, as if
    ignored, since the model never read one."""
    window: dict[str, Any] = {"pattern": pattern, "spans": spans}
    if format is not None:
        window["format"] = format
    if ignore:
        window["ignore"] = sorted(ignore)
    if text:
        window["text"] = sorted(text)
    if skip_unsupported:
        window["skip_unsupported"] = True
    return json.dumps(window, sort_keys=True)


# Format -> its reader: (pipeline root, files, ignored columns) -> (batches of typed
# columns, each column's kind: a dict or a side input).
def input_config(pattern: str | None) -> example_gen_pb2.Input:
    """ExampleGen's input config: one split, `pattern` or (None) every file under the root."""
    if pattern is None:
        return example_gen_utils.make_default_input_config()
    return example_gen_pb2.Input(
        splits=[example_gen_pb2.Input.Split(name="single_split", pattern=pattern)]
    )


def _static_range(span: int) -> range_config_pb2.RangeConfig:
    return range_config_pb2.RangeConfig(
        static_range=range_config_pb2.StaticRange(start_span_number=span, end_span_number=span)
    )


def _resolve_span(
    input_base: str, splits: list[example_gen_pb2.Input.Split], span: int | None
) -> SpanRead:
    """One span (None: the latest) exactly as TFX's ExampleGen driver resolves it."""
    # TFX globs the root and the pattern joined: the root goes in escaped.
    processor = input_processor.FileBasedInputProcessor(
        glob_root(input_base), splits, _static_range(span) if span is not None else None
    )
    try:
        resolved_span, version = processor.resolve_span_and_version()
    except ValueError as err:
        patterns = ", ".join(s.pattern for s in splits)
        if not any(
            SpanPattern(s.pattern).relative_matches(input_base, fileio.glob) for s in splits
        ):
            raise InputPatternError(
                f"no files under {input_base} match the input pattern {patterns} "
                "(the dataset spec's input.pattern)"
            ) from None
        raise InputPatternError(
            f"input pattern {patterns} under {input_base} (the dataset spec's input.pattern): {err}"
        ) from None
    return SpanRead(
        span=resolved_span,
        version=version,
        patterns={
            s.name: processor.get_pattern_for_span_version(s.pattern, resolved_span, version)
            for s in splits
        },
        fingerprint=processor.get_input_fingerprint(resolved_span, version),
    )


def _earlier_spans(input_base: str, pattern: str, latest: int, count: int) -> list[int]:
    """Up to `count` (>= 1) span numbers present below `latest`, oldest first."""
    span_pattern = SpanPattern(pattern)
    paths = span_pattern.relative_matches(input_base, fileio.glob)
    return [s.span for s in present_spans(span_pattern, paths) if s.span < latest][-count:]


def resolve_input(
    input_base: str,
    input_config: example_gen_pb2.Input,
    window: dict[str, Any],
    driver_resolved: SpanRead | None = None,
) -> ResolvedInput:
    """The spans an execution reads, with TFX's resolution; `driver_resolved`: the latest,
    when TFX's driver has already resolved it (locally)."""
    splits = [copy.deepcopy(s) for s in input_config.splits]
    latest = driver_resolved or _resolve_span(input_base, splits, None)
    if not window.get("pattern") or window.get("spans", 1) <= 1:
        return ResolvedInput(spans=(latest,))
    earlier = _earlier_spans(input_base, window["pattern"], latest.span, window["spans"] - 1)
    raw_splits = [
        example_gen_pb2.Input.Split(name=s.name, pattern=window["pattern"]) for s in splits
    ]
    return ResolvedInput(
        spans=(*(_resolve_span(input_base, raw_splits, s) for s in earlier), latest)
    )
