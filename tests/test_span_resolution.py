"""components/example_gen/span_resolution.py answers what TFX 1.16's ExampleGen driver answers,
byte for byte.

The reference is TFX's own `FileBasedInputProcessor` and TFX's `fileio`, run
in the test on the same small trees, wrapped as the project wrapped it before
the port (its errors in `InputPatternError`'s two one-line forms): span, version, each
split's pattern and the fingerprint string, or the error's type and text.
On S3 (moto's stand-in) the port answers as on a local copy of the tree whose
files carry the store's modification times.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from components.example_gen import span_resolution
from components.example_gen.span_resolution import SpanRead, Split
from components.example_gen.spans import SpanPattern, glob_root
from contract.dataset import span_grammar

# A fixed modification time (whole seconds) and one with a fraction, which TFX truncates.
MTIME = 1_704_164_645
LATER = 1_704_251_045.7


def tfx_resolve_span(input_base: str, splits: list[Split], span: int | None) -> SpanRead:
    """The resolution as the project ran it with TFX's processor (and TFX's fileio)."""
    from tfx.components.example_gen import input_processor
    from tfx.dsl.io import fileio
    from tfx.proto import example_gen_pb2, range_config_pb2

    protos = [example_gen_pb2.Input.Split(name=s.name, pattern=s.pattern) for s in splits]
    static = None
    if span is not None:
        static = range_config_pb2.RangeConfig(
            static_range=range_config_pb2.StaticRange(start_span_number=span, end_span_number=span)
        )
    processor = input_processor.FileBasedInputProcessor(glob_root(input_base), protos, static)
    try:
        resolved_span, version = processor.resolve_span_and_version()
    except ValueError as err:
        raise span_resolution.pattern_error(input_base, splits, err, fileio.glob) from None
    return SpanRead(
        span=resolved_span,
        version=version,
        patterns={
            s.name: processor.get_pattern_for_span_version(s.pattern, resolved_span, version)
            for s in splits
        },
        fingerprint=processor.get_input_fingerprint(resolved_span, version),
    )


def answer(resolve, root: str, splits: list[Split], span: int | None):
    """A SpanRead, or the error's type and one-line text."""
    try:
        return resolve(root, [Split(s.name, s.pattern) for s in splits], span)
    except ValueError as err:
        return type(err).__name__, str(err)


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (MTIME, MTIME + len(relative)))
    return root


def one(pattern: str) -> list[Split]:
    return [Split("single_split", pattern)]


# name -> (files, splits, spans asked: None is the latest)
CASES = {
    "spans": (
        {"span-1/a.csv": "x", "span-2/a.csv": "xy", "span-2/b.csv": "", "span-10/a.csv": "xyz",
         "span-10/.hidden.csv": "h"},
        one("span-{SPAN}/*.csv"),
        (None, 1, 2, 10, 3),  # span 3 is missing
    ),
    "a span that is no number": (
        {"span-1/a.csv": "x", "span-x/a.csv": "bad"}, one("span-{SPAN}/*.csv"), (None, 1),
    ),
    "spans of a width": (
        {"span-01/a.csv": "x", "span-02/a.csv": "xy", "span-03/a.csv": "xyz"},
        one("span-{SPAN:2}/*.csv"),
        (None, 1, 2, 100),
    ),
    "a span narrower than its width": (
        {"span-01/a.csv": "x", "span-2/a.csv": "other"}, one("span-{SPAN:2}/*.csv"), (None, 1),
    ),
    "versions": (
        {"span-1/v1/a.csv": "a", "span-1/v2/a.csv": "ab", "span-2/v1/a.csv": "abc",
         "span-2/v3/a.csv": "abcd", "span-2/v10/a.csv": "abcde", "span-2/v10/b.csv": "f"},
        one("span-{SPAN}/v{VERSION}/*.csv"),
        (None, 1, 2),
    ),
    "versions of a width": (
        {"s01/v001/a": "a", "s01/v002/a": "ab", "s02/v001/a": "abc"},
        one("s{SPAN:2}/v{VERSION:3}/*"),
        (None, 1, 2),
    ),
    "a span without a version": (
        {"span-1/v1/a.csv": "a", "span-2/a.csv": "b"},
        one("span-{SPAN}/v{VERSION}/*.csv"),
        (None, 2),
    ),
    "dates": (
        {"2024/01/30/a.parquet": "a", "2024/02/01/a.parquet": "bb", "2024/02/01/b.parquet": "c",
         "2023/12/31/a.parquet": "d"},
        one("{YYYY}/{MM}/{DD}/*.parquet"),
        (None, 19752, 19754, 19753),
    ),
    "dates in one name, versioned": (
        {"day=2024-01-30/v1/a": "a", "day=2024-01-30/v2/a": "ab", "day=2024-01-29/v9/a": "c"},
        one("day={YYYY}-{MM}-{DD}/v{VERSION}/*"),
        (None, 19751),
    ),
    "not a date": (
        {"2024-13-40/a": "a"},
        one("{YYYY}-{MM}-{DD}/*"),
        (None,),
    ),
    "several splits": (
        {"train/span-1/a": "a", "train/span-2/a": "ab", "eval/span-1/a": "c", "eval/span-2/a": "d",
         "eval/span-2/b": "e"},
        [Split("train", "train/span-{SPAN}/*"), Split("eval", "eval/span-{SPAN}/*")],
        (None, 1),
    ),
    "splits at different latest spans": (
        {"train/span-1/a": "a", "train/span-2/a": "ab", "eval/span-1/a": "c"},
        [Split("train", "train/span-{SPAN}/*"), Split("eval", "eval/span-{SPAN}/*")],
        (None, 1),
    ),
    "no placeholder": (
        {"a.csv": "a", "b.csv": "bb", "sub/c.csv": "c", ".d.csv": "d"},
        one("*.csv"),
        (None, 1),
    ),
    "every file": ({"a.csv": "a", "sub/c.csv": "c"}, one("*"), (None,)),
    "no match": ({"other/a.csv": "a"}, one("span-{SPAN}/*.csv"), (None, 1)),
    "two span placeholders": (
        {"span-1/a.csv": "a"}, one("span-{SPAN}/{SPAN}/*.csv"), (None,),
    ),
    "a span and a date": ({"1/2024/a": "a"}, one("{SPAN}/{YYYY}{MM}{DD}/*"), (None,)),
    "a version without a span": ({"v1/a": "a"}, one("v{VERSION}/*"), (None,)),
    "a width that is no number": ({"span-1/a": "a"}, one("span-{SPAN:x}/*"), (None,)),
}  # fmt: skip


@pytest.mark.slow  # TFX's processor imports TensorFlow
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_port_answers_as_tfx_processor(case, tmp_path):
    files, splits, spans = CASES[case]
    root = str(write_tree(tmp_path / "data[1]", files))  # a root that is no glob
    for span in spans:
        reference = answer(tfx_resolve_span, root, splits, span)
        assert answer(span_resolution._resolve_span, root, splits, span) == reference, span


@pytest.mark.slow  # TFX's processor imports TensorFlow
def test_a_file_rewritten_in_place_changes_the_fingerprint_as_tfx_sees_it(tmp_path):
    root = write_tree(tmp_path / "data", {"span-1/a.csv": "x", "span-1/b.csv": "yy"})
    splits = one("span-{SPAN}/*.csv")
    before = answer(span_resolution._resolve_span, str(root), splits, None)
    (root / "span-1/a.csv").write_text("rewritten")
    os.utime(root / "span-1/a.csv", (LATER, LATER))
    after = answer(span_resolution._resolve_span, str(root), splits, None)
    assert after == answer(tfx_resolve_span, str(root), splits, None)
    assert after.fingerprint != before.fingerprint
    assert "total_bytes:11" in after.fingerprint


@pytest.mark.slow  # TFX's processor imports TensorFlow
def test_a_window_resolves_each_span_as_tfx_does(tmp_path):
    from tfx.proto import example_gen_pb2

    pattern = "span-{SPAN}/v{VERSION}/*.csv"
    files = {"span-1/v1/a.csv": "a", "span-3/v1/a.csv": "b", "span-3/v2/a.csv": "bc",
             "span-4/v7/a.csv": "d", "span-6/v1/a.csv": "e"}  # fmt: skip
    root = str(write_tree(tmp_path / "data", files))
    config = example_gen_pb2.Input(
        splits=[example_gen_pb2.Input.Split(name="single_split", pattern=pattern)]
    )
    resolved = span_resolution.resolve_input(root, config, {"pattern": pattern, "spans": 3})
    assert [s.span for s in resolved.spans] == [3, 4, 6]  # span 5 is missing
    for span in resolved.spans[:-1]:
        assert span == tfx_resolve_span(root, one(pattern), span.span)
    assert resolved.latest == tfx_resolve_span(root, one(pattern), None)


@pytest.mark.slow  # TFX's processor imports TensorFlow
def test_a_window_reads_its_earlier_spans_with_the_matcher_of_its_latest(tmp_path):
    """One resolution, one matcher: the latest span and the window's earlier spans are read
    from the files by TFX's rule. A `[0-9]` of the pattern is a character class to TFX's
    regex (utils.py `_glob_to_regex` leaves `[` and `]` as they are); a matcher that read it
    as the three characters found no earlier span, and the window held the latest alone."""
    pattern = "span-{SPAN}/part-[0-9].csv"
    files = {"span-1/part-0.csv": "a", "span-2/part-1.csv": "bb", "span-3/part-2.csv": "c",
             "span-3/part-x.csv": "not listed"}  # fmt: skip
    root = str(write_tree(tmp_path / "data[1]", files))
    config = span_resolution.InputSplits(splits=tuple(one(pattern)))
    resolved = span_resolution.resolve_input(root, config, {"pattern": pattern, "spans": 3})
    assert [s.span for s in resolved.spans] == [1, 2, 3]
    for span in resolved.spans[:-1]:
        assert span == tfx_resolve_span(root, one(pattern), span.span)
    assert resolved.latest == tfx_resolve_span(root, one(pattern), None)


# A pattern and a path its glob lists: TFX's regex reads the span and the version out of
# it, or fails (then TFX's resolution fails for the whole data root).
READINGS = [
    ("span-{SPAN}/*.csv", "span-12/part.csv"),
    ("span-{SPAN:3}/*.csv", "span-012/part.csv"),
    ("span-{SPAN:3}/*.csv", "span-12x/part.csv"),  # three characters, not a number
    ("span-{SPAN}/*.csv", "span-x/part.csv"),
    ("span-{SPAN}/*.csv", "span--1/part.csv"),  # a number to int(): span -1
    ("span-{SPAN}/part-[0-9].csv", "span-3/part-2.csv"),  # a class, as the glob's
    ("events-{SPAN}-*.csv", "events-7-part-0.csv"),  # `.*` takes `7-part`
    ("s{SPAN}/[!a]*.csv", "s1/b.csv"),  # `[!a]`: a class of `!` and `a` to the regex
    ("src=*/{SPAN}.csv", "src=a\\b/1.csv"),  # `*` is `[^\\/]*` to the regex: no backslash
    ("{YYYY}-{MM}-{DD}/*.csv", "2024-02-29/a.csv"),
    ("{YYYY}-{MM}-{DD}/*.csv", "2023-02-29/a.csv"),  # no such day
    ("{YYYY}{MM}{DD}/*", "2024ab01/a"),
    ("span-{SPAN}/v{VERSION}/*.csv", "span-3/v10/a.csv"),
    ("span-{SPAN}/v{VERSION:2}/*.csv", "span-3/vxx/a.csv"),
]


def outcome(read):
    try:
        return read()
    except ValueError as err:
        return str(err)


@pytest.mark.slow  # TFX's utils.py imports TensorFlow
@pytest.mark.parametrize(("pattern", "path"), READINGS)
def test_the_matcher_reads_a_path_as_tfx_reads_it(pattern, path):
    """contract/dataset/span_grammar.py makes TFX's glob and regex of a pattern, and reads a
    listed path with them as TFX does; the runner's check (SpanPattern) reads it alike."""
    from tfx.components.example_gen import utils
    from tfx.proto import example_gen_pb2

    split = example_gen_pb2.Input.Split(name="single_split", pattern=pattern)
    root, listed = glob_root("data[1]"), f"data[1]/{path}"
    tfx_specs = utils.verify_split_pattern_specs(split)
    tfx_glob, tfx_regex = utils._create_matching_glob_and_regex(root, split, *tfx_specs, None)
    tfx_read = outcome(
        lambda: utils._find_matched_span_version_from_path(listed, tfx_regex, *tfx_specs)
    )
    specs = span_grammar.pattern_specs(pattern)
    assert (specs.span, specs.date, specs.version) == tfx_specs
    assert span_grammar.glob_and_regex(root, pattern, specs, None) == (tfx_glob, tfx_regex)
    assert outcome(lambda: span_grammar.read_span_version(listed, tfx_regex, specs)) == tfx_read
    read = None if isinstance(tfx_read, str) else (tfx_read[1], tfx_read[3])
    assert SpanPattern(pattern).match(path) == read
    assert (SpanPattern(pattern).refusal(path) is None) == (read is not None)


def test_the_input_config_is_read_from_its_json():
    from google.protobuf import json_format

    from components.example_gen.input_settings import input_config

    text = json_format.MessageToJson(input_config("span-{SPAN}/*"), sort_keys=True)
    assert span_resolution.InputSplits.from_json(text).splits == (
        Split("single_split", "span-{SPAN}/*"),
    )


# --- S3 ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store():
    from tests.s3_standin import s3_standin

    with s3_standin() as standin:
        yield standin


@pytest.mark.slow  # an S3 server (moto) in this process
@pytest.mark.parametrize("case", ["spans", "versions", "dates", "several splits", "no match"])
def test_s3_answers_as_a_local_copy_with_the_store_times(case, store, tmp_path, monkeypatch):
    for name, value in store.shell_environment(tmp_path).items():
        if name not in ("PATH", "HOME"):
            monkeypatch.setenv(name, value)
    files, splits, spans = CASES[case]
    client = store.client()
    prefix = f"{tmp_path.name}/data"
    local = write_tree(tmp_path / "data", files)
    for relative, text in files.items():
        client.put_object(Bucket=store.bucket, Key=f"{prefix}/{relative}", Body=text.encode())
        stored = client.head_object(Bucket=store.bucket, Key=f"{prefix}/{relative}")
        seconds = stored["LastModified"].timestamp()
        os.utime(local / relative, (seconds, seconds))
    remote = f"s3://{store.bucket}/{prefix}"
    for span in spans:
        on_s3 = answer(span_resolution._resolve_span, remote, splits, span)
        on_disk = answer(span_resolution._resolve_span, str(local), splits, span)
        if isinstance(on_disk, SpanRead):
            assert on_s3 == on_disk, span
        else:  # The same error, naming its own root.
            assert on_s3 == (on_disk[0], on_disk[1].replace(str(local), remote)), span
