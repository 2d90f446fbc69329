"""Spans: listed without TFX, resolved with TFX's own code, read by our ExampleGen executor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tfx.components.example_gen import input_processor
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen.csv_example_gen import executor as stock_csv_executor
from tfx.proto import example_gen_pb2
from tfx.utils import proto_utils

from components import artifact_names
from components.example_gen.component import ExampleGen
from components.example_gen.executor import INPUT_WINDOW_KEY, SpanResolvingExecutor
from components.example_gen.input_settings import input_config, input_window
from components.example_gen.span_resolution import InputPatternError, resolve_input
from components.example_gen.spans import SpanPattern, latest_spans, present_spans
from contract.dataset.span_grammar import date_to_span
from tests.conftest import read_taxi_rows, write_csv
from tests.harness import run_example_gen, split_records


def touch(root: Path, *paths: str) -> Path:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("a,b\n1,2\n")
    return root


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("span-{SPAN}/*.csv", "span-12/part.csv", (12, None)),
        ("span-{SPAN:3}/*.csv", "span-012/part.csv", (12, None)),
        ("span-{SPAN:3}/*.csv", "span-12/part.csv", None),  # not three digits
        ("span-{SPAN}/*.csv", "span-x/part.csv", None),  # no number: not a span
        ("span-{SPAN}/*.csv", "span-1/sub/part.csv", None),  # * stays in one directory
        ("span-{SPAN}/part-[0-9].csv", "span-3/part-2.csv", (3, None)),  # a class
        ("events-{SPAN}-*.csv", "events-7-part-0.csv", None),  # TFX's {SPAN}: `7-part`
        ("{YYYY}-{MM}-{DD}/*.csv", "2024-02-29/a.csv", (date_to_span(2024, 2, 29), None)),
        ("{YYYY}-{MM}-{DD}/*.csv", "2023-02-29/a.csv", None),  # no such day
        ("span-{SPAN}/v{VERSION}/*.csv", "span-3/v10/a.csv", (3, 10)),
    ],
)
def test_span_pattern_matches_paths_as_tfx_patterns_read(pattern, path, expected):
    assert SpanPattern(pattern).match(path) == expected


def test_a_span_is_read_in_its_latest_version_and_the_window_is_the_newest_spans():
    pattern = SpanPattern("span-{SPAN}/v{VERSION}/*.csv")
    paths = ["span-1/v1/a.csv", "span-3/v1/a.csv", "span-3/v2/a.csv", "span-3/v2/b.csv"]
    paths += ["span-4/v1/a.csv", "notes.txt"]
    assert [(s.span, s.version) for s in present_spans(pattern, paths)] == [(1, 1), (3, 2), (4, 1)]
    (three, four) = latest_spans(pattern, paths, 2)
    assert three.files == ("span-3/v2/a.csv", "span-3/v2/b.csv") and four.span == 4
    assert pattern.for_span(3, 2) == "span-3/v2/*.csv"
    assert SpanPattern("{YYYY}-{MM}-{DD}/*.csv").for_span(date_to_span(2024, 1, 5), None) == (
        "2024-01-05/*.csv"
    )
    assert SpanPattern("s{SPAN:4}/*.csv").for_span(7, None) == "s0007/*.csv"


@pytest.mark.parametrize(
    ("pattern", "layout"),
    [
        ("span-{SPAN}/*.csv", ["span-1/a.csv", "span-2/a.csv", "span-10/a.csv"]),
        ("{YYYY}-{MM}-{DD}/*.csv", ["2024-12-31/a.csv", "2025-01-02/a.csv"]),
        (
            "span-{SPAN:2}/v{VERSION}/*.csv",
            ["span-01/v1/a.csv", "span-02/v1/a.csv", "span-02/v3/a.csv"],
        ),
    ],
)
def test_the_latest_span_listed_here_is_the_one_tfxs_driver_resolves(tmp_path, pattern, layout):
    root = touch(tmp_path, *layout)
    ours = latest_spans(SpanPattern(pattern), layout, 1)[0]
    split = example_gen_pb2.Input.Split(name="single_split", pattern=pattern)
    processor = input_processor.FileBasedInputProcessor(str(root), [split])
    span, version = processor.resolve_span_and_version()
    assert (ours.span, ours.version) == (span, version)
    assert SpanPattern(pattern).for_span(span, version) == processor.get_pattern_for_span_version(
        pattern, span, version
    )


def test_resolve_input_reads_the_window_of_present_spans(tmp_path):
    root = touch(tmp_path, "span-1/a.csv", "span-3/a.csv", "span-4/a.csv")
    config = input_config("span-{SPAN}/*.csv")
    resolved = resolve_input(str(root), config, {"pattern": "span-{SPAN}/*.csv", "spans": 2})
    assert [(s.span, s.patterns) for s in resolved.spans] == [
        (3, {"single_split": "span-3/*.csv"}),
        (4, {"single_split": "span-4/*.csv"}),
    ]
    assert resolved.fingerprint.startswith("span 3:\nsplit:single_split,num_files:1")
    # One span: TFX's own fingerprint, as its driver records it.
    latest = resolve_input(str(root), config, {"pattern": "span-{SPAN}/*.csv", "spans": 1})
    fingerprint, span, _ = example_gen_utils.calculate_splits_fingerprint_span_and_version(
        str(root), config.splits
    )
    assert (latest.latest.span, latest.fingerprint) == (span, fingerprint)


def test_a_data_root_named_like_a_glob_is_read_as_a_path(tmp_path):
    """TFX joins the data root and the pattern into one glob: handed `data[1]` as it is, its
    processor finds nothing (it matches `data1`). The driver (local runs), the executor's own
    resolution (Kubeflow) and the span listing hand it over escaped."""
    from tfx.dsl.io import fileio

    from components.example_gen.component import RootEscapingDriver

    pattern = "span-{SPAN}/*.csv"
    root = str(touch(tmp_path / "data[1]", "span-1/a.csv", "span-2/a.csv"))
    split = example_gen_pb2.Input.Split(name="single_split", pattern=pattern)
    with pytest.raises(ValueError, match="Cannot find matching"):
        input_processor.FileBasedInputProcessor(root, [split]).resolve_span_and_version()
    processor = RootEscapingDriver(None).get_input_processor([split], None, root)
    assert processor.resolve_span_and_version() == (2, None)
    resolved = resolve_input(root, input_config(pattern), {"pattern": pattern, "spans": 2})
    assert [s.span for s in resolved.spans] == [1, 2]
    assert resolved.fingerprint.startswith("span 1:\nsplit:single_split,num_files:1")
    assert SpanPattern(pattern).relative_matches(root, fileio.glob) == [
        "span-1/a.csv",
        "span-2/a.csv",
    ]
    assert ExampleGen.DRIVER_CLASS is RootEscapingDriver


def test_no_matching_files_names_the_pattern_and_the_directory(tmp_path):
    touch(tmp_path, "other/a.csv")
    with pytest.raises(InputPatternError, match=r"no files under .* match the input pattern"):
        resolve_input(
            str(tmp_path), input_config("span-{SPAN}/*.csv"), {"pattern": "span-{SPAN}/*.csv"}
        )
    try:
        resolve_input(str(tmp_path), input_config("span-{SPAN}/*.csv"), {})
    except InputPatternError as err:
        assert str(tmp_path) in str(err) and "span-{SPAN}/*.csv" in str(err)
    # A file the glob finds without a span number: TFX's own error, with pattern and root.
    touch(tmp_path, "span-1/a.csv", "span-x/a.csv")
    with pytest.raises(InputPatternError, match=r"input pattern span-\{SPAN\}/\*\.csv under .*"):
        resolve_input(str(tmp_path), input_config("span-{SPAN}/*.csv"), {})


# --- the executor, on real rows --------------------------------------------------


@pytest.fixture(scope="module")
def span_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("span_root")
    header, rows = read_taxi_rows(limit=300)
    for span, part in ((1, rows[:100]), (2, rows[100:200]), (3, rows[200:])):
        write_csv(root / f"span-{span}" / "data.csv", header, part)
    return root


@pytest.mark.slow  # two ExampleGen Beam pipelines
def test_without_a_driver_the_executor_resolves_the_latest_span_and_records_it(span_root, tmp_path):
    pattern = "span-{SPAN}/*.csv"
    ours = run_example_gen(
        SpanResolvingExecutor,
        span_root,
        tmp_path / "ours",
        {  # As open-source KFP hands them over: the raw pattern, no span.
            "input_config": proto_utils.proto_to_json(input_config(pattern)),
            INPUT_WINDOW_KEY: input_window(pattern, 1),
        },
    )
    assert ours.get_int_custom_property("span") == 3
    assert ours.get_string_custom_property("spans") == "3"
    assert ours.get_string_custom_property("input_fingerprint").startswith(
        "split:single_split,num_files:1"
    )
    # Identical examples per split to TFX's executor given the span its driver resolves.
    stock = run_example_gen(
        stock_csv_executor.Executor,
        span_root,
        tmp_path / "stock",
        {"input_config": proto_utils.proto_to_json(input_config("span-3/*.csv"))},
    )
    assert split_records(ours) == split_records(stock)
    assert sum(len(r) for r in split_records(ours).values()) == 100


def test_after_the_driver_the_executor_keeps_its_span_and_reads_the_window(span_root, tmp_path):
    pattern = "span-{SPAN}/*.csv"
    # Under a data root named like a glob (`data[1]`): the reader escapes it too.
    root = tmp_path / "data[1]"
    shutil.copytree(span_root, root)
    examples = run_example_gen(
        SpanResolvingExecutor,
        root,
        tmp_path / "window",
        {  # As TFX's local driver hands them over: span 3 resolved.
            "input_config": proto_utils.proto_to_json(input_config("span-3/*.csv")),
            "span": 3,
            "version": None,
            "input_fingerprint": "fingerprint of span 3",
            INPUT_WINDOW_KEY: input_window(pattern, 2),
        },
    )
    assert examples.get_int_custom_property("span") == 3
    assert examples.get_string_custom_property("spans") == "2,3"
    assert "span 3:\nfingerprint of span 3" in examples.get_string_custom_property(
        "input_fingerprint"
    )
    assert sum(len(r) for r in split_records(examples).values()) == 200
    assert json.loads(input_window(None, 1)) == {"pattern": None, "spans": 1}


def test_the_shared_property_names_are_tfx_own():
    # components/artifact_names.py spells them out, away from TFX's component package.
    assert artifact_names.SPAN_PROPERTY == example_gen_utils.SPAN_PROPERTY_NAME
    assert artifact_names.VERSION_PROPERTY == example_gen_utils.VERSION_PROPERTY_NAME
    assert artifact_names.FINGERPRINT_PROPERTY == example_gen_utils.FINGERPRINT_PROPERTY_NAME
