"""Issue 61's defects on files a new user's exporter wrote (pandas 3 and a current pyarrow,
tests/data/exports/make_exports.py): the draft, the runner's check, ExampleGen and
scoring, each on the fewest rows that show the defect.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.inputs import InputDataError, check_data_root
from schemas.draft import DraftError, draft
from tests.conftest import REPO_ROOT

EXPORTS = REPO_ROOT / "tests" / "data" / "exports"
HIVE_PATTERN = "dt={YYYY}-{MM}-{DD}/*.parquet"
LABEL = "species"


def exported(tmp_path: Path, name: str) -> Path:
    """A copy of one exported folder (the draft and the runs write nothing into it)."""
    return shutil.copytree(EXPORTS / name, tmp_path / name)


def one_line(text: str) -> str:
    assert "\n" not in text and "Traceback" not in text, text
    return text


# --- D7: an empty newest span -------------------------------------------------


def test_an_empty_newest_span_stops_the_run_naming_it(tmp_path):
    """A 0-row file with _SUCCESS in the newest partition: the window would be one span
    short. The runner's check (training, tuning, scoring, the draft) stops, naming it."""
    root = exported(tmp_path, "empty_newest")
    with pytest.raises(InputDataError) as raised:
        check_data_root(root, HIVE_PATTERN, 2)
    message = one_line(str(raised.value))
    assert "span 19724 (dt=2024-01-02) holds no rows" in message
    assert "remove the empty partition" in message
    # Its _SUCCESS alone is the same empty day (issue 71); the partition removed, the
    # older span alone reads: the check is about the span, not the layout.
    (root / "dt=2024-01-02" / "part-0.parquet").unlink()
    with pytest.raises(InputDataError, match=r"span 19724 \(dt=2024-01-02\) under .* no rows"):
        check_data_root(root, HIVE_PATTERN, 2)
    shutil.rmtree(root / "dt=2024-01-02")
    assert [s.span for s in check_data_root(root, HIVE_PATTERN, 2).spans] == [19723]


def test_scoring_an_empty_newest_span_says_the_same(tmp_path):
    """Scoring reads the newest span alone (spans=1): the same line, not a split's."""
    root = exported(tmp_path, "empty_newest")
    with pytest.raises(InputDataError, match=r"span 19724 \(dt=2024-01-02\) holds no rows"):
        check_data_root(root, HIVE_PATTERN, 1)


@pytest.mark.slow  # imports TFX
def test_examplegen_stops_on_an_empty_span_where_no_runner_checked(tmp_path):
    """On Kubeflow no runner's check runs before ExampleGen: its read stops on the span."""
    import apache_beam as beam

    from components.example_gen.read_examples import ReadExamples
    from components.example_gen.span_resolution import InputPatternError

    root = exported(tmp_path, "empty_newest")
    patterns = ["dt=2024-01-01/*.parquet", "dt=2024-01-02/*.parquet"]
    with pytest.raises(InputPatternError, match=r"dt=2024-01-02/\*\.parquet holds no rows"):
        _ = beam.Pipeline() | ReadExamples(str(root), patterns, {"pattern": HIVE_PATTERN})


# --- D4: every draft refusal is one line --------------------------------------


@pytest.mark.parametrize(
    ("folder", "message"),
    [
        ("empty_newest/dt=2024-01-02", r"data root .* holds no rows: .*part-0.parquet has 0 rows"),
        ("refuse_ns_timestamp", r"column 'seen_at' holds 2023-11-14 22:13:20.000001001 "),
        ("refuse_uint64", r"column 'counter' holds 9223372036854775808 \(uint64\)"),
        ("refuse_decimal", r"column 'account' holds 1000000000000000000000000 \(decimal\)"),
    ],
)
def test_every_draft_refusal_is_one_line(tmp_path, folder, message):
    root = exported(tmp_path, folder.split("/")[0]) / "/".join(folder.split("/")[1:])
    with pytest.raises(DraftError, match=message) as raised:
        draft(root, LABEL, tmp_path / "schema")
    text = one_line(str(raised.value))
    if folder in UNCONVERTIBLE:  # the flag to pass, with the column, said once
        assert text.endswith(f"(the draft: --ignore {UNCONVERTIBLE[folder]})"), text
        assert text.count("--ignore") == 1, text


# --- D5: CSV keys are read as written -----------------------------------------


@pytest.mark.slow  # runs ExampleGen
def test_csv_keys_are_read_as_written(tmp_path):
    """`07`, `007`, `7` are three keys and `00042` stays `00042`: scoring's ExampleGen
    reads its key columns as text (pipeline/scoring_pipeline.py), never typed as numbers."""
    import tensorflow as tf
    from tfx.utils import proto_utils

    from components.example_gen.executor import SpanResolvingExecutor
    from components.example_gen.input_settings import input_config, input_window
    from tests.harness import run_example_gen, split_records

    root = exported(tmp_path, "csv_keys")
    properties = {
        "input_config": proto_utils.proto_to_json(input_config(None)),
        "input_window": input_window(None, 1, text=("penguin_id",)),
    }
    examples = run_example_gen(SpanResolvingExecutor, root, tmp_path / "examples", properties)
    parsed = [
        tf.train.Example.FromString(record).features.feature
        for records in split_records(examples).values()
        for record in records
    ]
    assert sorted(f["penguin_id"].bytes_list.value[0] for f in parsed) == [
        b"00042",
        b"007",
        b"07",
        b"7",
    ]
    # Other columns keep the type rule: numbers stay numbers.
    assert all(f["flipper_length_mm"].int64_list.value for f in parsed)


def test_the_scoring_dag_reads_its_keys_as_text(tmp_path, taxi_spec):
    import json

    from components.scoring.executor import ScoringSettings
    from pipeline.scoring_pipeline import create_scoring_pipeline
    from pipeline.steps import EXAMPLE_GEN

    pipeline = create_scoring_pipeline(
        dataset=taxi_spec,
        pipeline_root=str(tmp_path / "root"),
        data_root=str(tmp_path / "data"),
        schema_path=str(tmp_path / "schema.pbtxt"),
        serving_model_dir=str(tmp_path / "serving"),
        output_dir=str(tmp_path / "scores"),
        settings=ScoringSettings(keys=("trip_id", "pickup_id")),
        model_version="1",
    )
    (example_gen,) = [c for c in pipeline.components if c.id == EXAMPLE_GEN]
    window = json.loads(example_gen.exec_properties["input_window"])
    assert window["text"] == ["pickup_id", "trip_id"]


# --- D2: a column ignored from the draft, by `ignore:` alone, and at scoring ----------


def drafted(tmp_path: Path, folder: str, **options) -> tuple[dict, str]:
    """The draft of one exported folder: its dataset.yaml read, and schema.pbtxt's text."""
    import yaml

    out = tmp_path / "schema"
    draft(exported(tmp_path, folder), LABEL, out, **options)
    return yaml.safe_load((out / "dataset.yaml").read_text()), (out / "schema.pbtxt").read_text()


@pytest.mark.slow  # the draft runs TFDV
def test_the_draft_ignores_a_struct_column_asked_with_ignore(tmp_path):
    spec, schema = drafted(tmp_path, "struct_column", ignore=["trip", "island"])
    assert {"trip", "island"} <= set(spec["ignore"])
    assert "trip" not in spec["features"] and "island" not in spec["features"]
    assert '"trip"' not in schema  # no schema entry: ExampleGen never reads it
    with pytest.raises(DraftError, match=r"--ignore 'tirp' is not a column of the data") as raised:
        draft(EXPORTS / "struct_column", LABEL, tmp_path / "other", ignore=["trip", "tirp"])
    # Every column of the folder is listed, the struct one never read included (issue 71).
    assert str(raised.value).endswith(
        "(columns: bill_length_mm, flipper_length_mm, island, species, trip)"
    )
    with pytest.raises(DraftError, match=r"column 'trip' .* \(here: pass --ignore COLUMN\)$"):
        draft(EXPORTS / "struct_column", LABEL, tmp_path / "other")


def test_ignore_alone_lets_a_run_read_a_struct_column_s_folder(tmp_path):
    """`ignore: [trip]` in dataset.yaml, with no schema entry for `trip` (a struct has
    none): the spec's check against the schema and the runner's check both pass."""
    from contract.dataset.parse import parse_spec

    checked = check_data_root(EXPORTS / "struct_column", ignore=("trip",))
    assert checked.parquet is not None and checked.parquet.skipped == ("trip",)
    spec = parse_spec(
        {
            "name": "penguins",
            "label": {
                "task": "multiclass",
                "column": LABEL,
                "classes": ["Adelie", "Chinstrap", "Gentoo"],
            },
            "features": {"island": {"kind": "categorical"}},
            "ignore": ["trip", "bill_length_mm", "flipper_length_mm"],
            "evaluation": {"metric": "accuracy", "naive_value": 0.5},
        }
    )
    schema_columns = {
        "island": "string",
        LABEL: "string",
        "bill_length_mm": "float",
        "flipper_length_mm": "int",
    }
    spec.check_against_columns(schema_columns)


def test_scoring_skips_an_extra_struct_column_the_model_never_read():
    with pytest.raises(InputDataError, match=r"column 'trip' .* is struct"):
        check_data_root(EXPORTS / "struct_column")
    checked = check_data_root(EXPORTS / "struct_column", skip_unsupported=True)
    assert checked.parquet is not None and checked.parquet.skipped == ("trip",)
    assert "trip" not in checked.header


@pytest.mark.slow  # runs ExampleGen
@pytest.mark.parametrize(
    "window", [{"ignore": ("trip",)}, {"skip_unsupported": True}], ids=["ignore", "scoring"]
)
def test_examplegen_reads_a_struct_column_s_folder_without_it(tmp_path, window):
    examples = example_gen_features(tmp_path, "struct_column", **window)
    assert len(examples) == 24
    assert all("trip" not in f and "island" in f for f in examples)


def example_gen_features(tmp_path: Path, folder: str, **window) -> list:
    """ExampleGen's examples of one exported folder, each as its feature map."""
    import tensorflow as tf
    from tfx.utils import proto_utils

    from components.example_gen.executor import SpanResolvingExecutor
    from components.example_gen.input_settings import input_config, input_window
    from tests.harness import run_example_gen, split_records

    properties = {
        "input_config": proto_utils.proto_to_json(input_config(None)),
        "input_window": input_window(None, 1, **window),
    }
    root = exported(tmp_path, folder)
    examples = run_example_gen(SpanResolvingExecutor, root, tmp_path / "examples", properties)
    return [
        tf.train.Example.FromString(record).features.feature
        for records in split_records(examples).values()
        for record in records
    ]


# --- D3: pandas' index columns are never features --------------------------------


@pytest.mark.slow  # the draft runs TFDV
@pytest.mark.parametrize(
    ("folder", "index"), [("index_nonunique", "__index_level_0__"), ("index_named", "row")]
)
def test_pandas_index_columns_are_never_features(tmp_path, folder, index):
    """pd.concat(...).to_parquet() (a non-unique index) crashed the draft; a filtered
    frame's named index became a numeric feature."""
    spec, _ = drafted(tmp_path, folder)
    assert index in spec["ignore"] and index not in spec["features"]
    assert set(spec["features"]) == {"bill_length_mm", "flipper_length_mm", "island"}


# --- D6: the draft and ExampleGen agree on "" ; item 8: list columns --------------


@pytest.mark.slow  # the draft runs TFDV, and ExampleGen
def test_the_draft_reads_parquet_empty_strings_as_values_as_examplegen_does(tmp_path):
    spec, _ = drafted(tmp_path, "empty_strings")
    assert spec["features"]["note"]["kind"] == "categorical"
    examples = example_gen_features(tmp_path / "eg", "empty_strings")
    notes = [tuple(f["note"].bytes_list.value) for f in examples]
    assert (notes.count((b"",)), notes.count((b"x",)), notes.count(())) == (12, 9, 3)


@pytest.mark.slow  # the draft runs TFDV
def test_the_draft_says_why_it_ignores_a_list_column(tmp_path):
    import yaml

    out = tmp_path / "schema"
    draft(exported(tmp_path, "empty_strings"), LABEL, out)
    text = (out / "dataset.yaml").read_text()
    assert "tags" in yaml.safe_load(text)["ignore"]
    (line,) = [t for t in text.splitlines() if t.strip().startswith("- tags")]
    assert "a list column" in line and "always empty" not in line


# --- Item 8: confusing errors say what to do ---------------------------------------


def test_a_hive_folder_without_a_pattern_is_told_the_pattern_to_pass(tmp_path):
    root = exported(tmp_path, "empty_newest")
    with pytest.raises(InputDataError) as raised:
        check_data_root(root)
    assert one_line(str(raised.value)).endswith(
        "read them as spans with --input-pattern 'dt={YYYY}-{MM}-{DD}/*.parquet' "
        "(input.pattern in the dataset spec)"
    )
    (root / "dt=2024-01-01").rename(root / "span=3")
    shutil.rmtree(root / "dt=2024-01-02")
    with pytest.raises(InputDataError, match=r"--input-pattern 'span=\{SPAN\}/\*\.parquet'"):
        check_data_root(root)


def test_scoring_s_gate_names_no_split_and_hints_the_cast_of_an_int_with_a_nan():
    """pandas writes an int column with a missing value as float64; a model trained from
    CSV has it INT. The scoring gate says the cast, speaks of no train or eval split,
    and a small input that leaves one split empty is no problem."""
    import pandas as pd
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2

    from components.gates.data_validation.executor import DataValidationError, check_data
    from components.gates.serving_data.executor import serving_anomalies

    schema = schema_pb2.Schema()
    schema.feature.add(name="flipper_length_mm", type=schema_pb2.INT)
    frame = pd.read_parquet(EXPORTS / "empty_newest" / "dt=2024-01-01" / "part-0.parquet")
    frame["flipper_length_mm"] = frame["flipper_length_mm"].where(frame.index > 0)  # float64
    statistics = tfdv.generate_statistics_from_dataframe(frame[["flipper_length_mm"]])
    anomalies = serving_anomalies(statistics, schema, [])
    with pytest.raises(DataValidationError) as raised:
        check_data({"train": anomalies, "eval": anomalies}, {"train": 24, "eval": 0}, scoring=True)
    message = one_line(str(raised.value))
    assert "df[column].astype('Int64')" in message
    assert "split" not in message and "1 problem(s)" in message
    with pytest.raises(DataValidationError, match=r"the data to score has no rows$"):
        check_data({"train": anomalies_pb2.Anomalies()}, {"train": 0}, scoring=True)


def test_a_column_added_in_a_later_partition_is_told_where_to_declare_it():
    import pandas as pd
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import schema_pb2

    from components.gates.data_validation.executor import DataValidationError, check_data

    schema = schema_pb2.Schema()
    schema.feature.add(name="island", type=schema_pb2.BYTES)
    later = pd.DataFrame({"island": ["Dream", "Biscoe"], "tags": ["a", "b"]})
    anomalies = tfdv.validate_statistics(tfdv.generate_statistics_from_dataframe(later), schema)
    with pytest.raises(DataValidationError) as raised:
        check_data({"train": anomalies}, {"train": 2})
    assert "feature 'tags': New column" in str(raised.value)
    assert "add it to schema.pbtxt and to dataset.yaml, as a feature or under ignore:" in str(
        raised.value
    )


# --- Item 8: the scores directory, read whole ---------------------------------------


def test_a_reader_of_the_scores_directory_gets_each_key_once_per_question(tmp_path):
    """Versions 1, 2 and 10 scored span 3; span 4 has only version 1 complete (version 2's
    run was killed before `_SUCCESS`). The whole directory holds span 3's keys three times;
    the newest complete partition per span holds each key once."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from components.scoring.output import Manifest, commit, latest_partitions, partition_dir

    out = tmp_path / "scores"

    def scored(span: int, version: str, keys: list[str], complete: bool = True) -> None:
        attempt = tmp_path / f"attempt-{span}-{version}"
        attempt.mkdir()
        table = pa.table({"penguin_id": keys, "model_version": [version] * len(keys)})
        pq.write_table(table, attempt / "part-00000-of-00001.parquet")
        partition = partition_dir(str(out), span, version)
        manifest = Manifest(
            span,
            version,
            "d" * 64,
            f"input {span}",
            len(keys),
            0,
            ("penguin_id",),
            "parquet",
            ("part-00000-of-00001.parquet",),
        )
        commit(str(attempt), partition, manifest)
        if not complete:
            (Path(partition) / "_SUCCESS").unlink()

    scored(3, "1", ["07", "007"])
    scored(3, "2", ["07", "007"])
    scored(3, "10", ["07", "007"])  # versions are numbers: 10 is newer than 2
    scored(4, "1", ["7"])
    scored(4, "2", ["7"], complete=False)
    whole = ds.dataset(out, format="parquet").to_table()
    assert whole.num_rows == 8  # every version, and incomplete partitions too

    latest = latest_partitions(str(out))
    assert [Path(p).relative_to(out).as_posix() for p in latest] == [
        "span=3/version=10",
        "span=4/version=1",
    ]
    rows = ds.dataset([ds.dataset(p, format="parquet") for p in latest]).to_table().to_pylist()
    assert sorted((r["penguin_id"], r["model_version"]) for r in rows) == [
        ("007", "10"),
        ("07", "10"),
        ("7", "1"),
    ]


def test_scoring_takes_an_input_pattern_of_its_own(tmp_path):
    """A model trained on dt= partitions scores a flat folder (`--input-pattern none`),
    and a flat-trained one a Hive folder."""
    import score_runner

    def scoring_pattern(*flags: str) -> str | None:
        argv = ["--data-root", str(tmp_path), "--output-dir", str(tmp_path / "s"), "--key", "k"]
        argv += flags
        return score_runner.options_from_args(score_runner.parse_args(argv)).dataset.input.pattern

    assert scoring_pattern() is None  # the embedded task's spec reads a flat folder
    assert scoring_pattern("--input-pattern", HIVE_PATTERN) == HIVE_PATTERN
    assert scoring_pattern("--input-pattern", "none") is None
    with pytest.raises(
        ValueError, match=r"--input-pattern: input.pattern: '/abs/\{SPAN\}/\*' must"
    ):
        scoring_pattern("--input-pattern", "/abs/{SPAN}/*")


def test_scores_of_another_flat_folder_replaced_say_so():
    from pipeline.local.score import ScoreSummary

    summary = ScoreSummary("replaced", "scores/span=0/version=1", 4, 0, "1", "d" * 64, 0)
    assert "replaced (the span's input changed)" in summary.text()
    flat = ScoreSummary("replaced", "scores/span=0/version=1", 4, 0, "1", "d" * 64, 0, flat=True)
    assert "give each folder its own --output-dir" in one_line(flat.text())


# --- Issue 71: partitions, not files, decide which days exist --------------------

DAY_FILE = EXPORTS / "empty_newest" / "dt=2024-01-01" / "part-0.parquet"  # 24 rows


def days(tmp_path: Path, layout: dict[str, str]) -> Path:
    """A Hive layout of days, each `data` (a pandas 3 file and `_SUCCESS`), `success`
    (`_SUCCESS` alone: the writer's empty day), `committed` (Databricks' `_committed_*`
    alone) or `unmarked` (an empty folder: a write in progress)."""
    root = tmp_path / "days"
    for day, kind in layout.items():
        folder = root / f"dt={day}"
        folder.mkdir(parents=True)
        if kind == "data":
            shutil.copy(DAY_FILE, folder / "part-0.parquet")
        if kind in ("data", "success"):
            (folder / "_SUCCESS").write_bytes(b"")
        if kind == "committed":
            (folder / "_committed_8171").write_bytes(b"{}")
    return root


WITH_EMPTY_NEWEST = {"2024-01-01": "data", "2024-01-02": "data", "2024-01-03": "success"}


@pytest.mark.parametrize("spans", [1, 2])
def test_a_success_only_newest_partition_stops_the_run_naming_it(tmp_path, spans):
    """The writer marked the newest day complete, with no file: the run (spans 2) and the
    scoring (spans 1) never fall back to yesterday."""
    root = days(tmp_path, WITH_EMPTY_NEWEST)
    with pytest.raises(InputDataError) as raised:
        check_data_root(root, HIVE_PATTERN, spans)
    message = one_line(str(raised.value))
    assert message.startswith(f"span 19725 (dt=2024-01-03) under {root} holds no rows: "), message
    assert "the writer's _SUCCESS and no data file" in message


def test_a_committed_marker_alone_is_an_empty_day_too(tmp_path):
    root = days(tmp_path, {"2024-01-01": "data", "2024-01-02": "committed"})
    with pytest.raises(InputDataError, match=r"dt=2024-01-02\).*writer's _committed_8171"):
        check_data_root(root, HIVE_PATTERN, 1)


def test_a_success_only_partition_in_the_middle_of_the_window_stops_the_run(tmp_path):
    root = days(tmp_path, {"2024-01-01": "data", "2024-01-02": "success", "2024-01-03": "data"})
    for spans in (2, 3):
        with pytest.raises(InputDataError, match=r"^span 19724 \(dt=2024-01-02\) under "):
            check_data_root(root, HIVE_PATTERN, spans)
    # Outside the window it is not read, so nothing to refuse.
    assert [s.span for s in check_data_root(root, HIVE_PATTERN, 1).spans] == [19725]


def test_an_unmarked_empty_partition_is_left_out_in_one_line(tmp_path):
    from components.example_gen.input_files import left_out_line

    root = days(tmp_path, {**WITH_EMPTY_NEWEST, "2024-01-03": "unmarked"})
    checked = check_data_root(root, HIVE_PATTERN, 2)
    assert [s.span for s in checked.spans] == [19723, 19724]
    line = one_line(left_out_line(str(root), checked.left_out))
    assert line == (
        f"left out dt=2024-01-03 under {root}: no data file and no writer's marker "
        "(_SUCCESS, _committed_*), so a write in progress; not read as a day"
    )
    # One older than the window changes nothing the run reads: not said.
    (root / "dt=2024-01-03").rmdir()
    (root / "dt=2023-12-31").mkdir()
    assert check_data_root(root, HIVE_PATTERN, 2).left_out == ()


def test_examplegen_refuses_the_empty_day_where_no_runner_checked(tmp_path):
    """Kubeflow: ExampleGen's (and InputSnapshot's) resolution stops on it, in one line;
    an unmarked one is left out and said on the examples' properties."""
    from components.example_gen.input_settings import input_config
    from components.example_gen.span_resolution import InputPatternError, resolve_input

    def resolved(root: Path, spans: int):
        window = {"pattern": HIVE_PATTERN, "spans": spans}
        return resolve_input(str(root), input_config(HIVE_PATTERN), window)

    root = days(tmp_path, WITH_EMPTY_NEWEST)
    for spans in (1, 2):
        with pytest.raises(InputPatternError) as raised:
            resolved(root, spans)
        assert "span 19725 (dt=2024-01-03)" in one_line(str(raised.value))
    (root / "dt=2024-01-03" / "_SUCCESS").unlink()
    answer = resolved(root, 2)
    assert [s.span for s in answer.spans] == [19723, 19724]
    assert [p.folder for p in answer.left_out] == ["dt=2024-01-03"]
    # Where every day holds a file, the answer is TFX's: the same as with no empty folder.
    (root / "dt=2024-01-03").rmdir()
    assert resolved(root, 2) == answer and resolved(root, 2).left_out == ()


@pytest.mark.slow  # the draft runs TFDV
def test_run_score_and_draft_refuse_a_success_only_newest_day_each_in_one_line(tmp_path, capsys):
    """The three commands a user types, on the layout of the issue: each ends with one
    `error:` line naming the partition, before any step runs."""
    import local_runner
    import score_runner
    from schemas.draft import main as draft_main

    root = days(tmp_path, {**WITH_EMPTY_NEWEST, "2024-01-03": "unmarked"})
    schema_dir = tmp_path / "schema"
    common = ["--data-root", str(root)]
    spans = ["--label", LABEL, "--input-pattern", HIVE_PATTERN, "--spans", "2"]
    assert draft_main([*common, *spans, "--output-dir", str(schema_dir)]) == 0
    printed = capsys.readouterr().out
    assert f"  left out dt=2024-01-03 under {root}: no data file" in printed
    (root / "dt=2024-01-03" / "_SUCCESS").write_bytes(b"")
    named = f"span 19725 (dt=2024-01-03) under {root} holds no rows"
    scoring = ["--key", "island", "--serving-dir", str(tmp_path / "serving")]
    commands = {
        "draft": lambda: draft_main([*common, *spans, "--output-dir", str(tmp_path / "again")]),
        "run": lambda: local_runner.main(
            [*common, "--schema-dir", str(schema_dir), "--output-dir", str(tmp_path / "run")]
        ),
        "score": lambda: score_runner.main(
            [
                *common,
                *scoring,
                "--schema-dir",
                str(schema_dir),
                "--output-dir",
                str(tmp_path / "s"),
            ]
        ),
    }
    for command, call in commands.items():
        code = call()
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == (2 if command == "draft" else 1), (command, err)
        assert err[-1].startswith("error: ") and named in err[-1], (command, err)
        assert "Traceback" not in "\n".join(err)
    assert not (tmp_path / "run" / "metadata.sqlite").exists()  # before any step


# --- Issue 71: a column the model does not read is never converted ------------

# Each folder's one column whose values no feature can take (tests/data/exports).
UNCONVERTIBLE = {
    "refuse_uint64": "counter",  # uint64 above 2^63-1
    "refuse_ns_timestamp": "seen_at",  # timestamp[ns] with sub-microsecond digits
    "refuse_decimal": "account",  # decimal128(25, 0) beyond int64
}


@pytest.mark.parametrize("folder", sorted(UNCONVERTIBLE))
def test_an_ignored_or_unread_column_is_never_planned_whatever_it_holds(folder):
    """The runner's check plans only the columns read: an ignored one (training, the
    draft) and one outside the scoring's columns are left out, listed as not read."""
    column = UNCONVERTIBLE[folder]
    for checked in (
        check_data_root(EXPORTS / folder, ignore=(column,)),
        check_data_root(EXPORTS / folder, columns=("island", "bill_length_mm", LABEL)),
    ):
        assert checked.parquet is not None and column not in checked.header
        assert column in checked.parquet.not_read


@pytest.mark.slow  # runs ExampleGen
@pytest.mark.parametrize("folder", sorted(UNCONVERTIBLE))
@pytest.mark.parametrize("how", ["ignore", "scoring"])
def test_examplegen_never_converts_a_column_it_does_not_read(tmp_path, folder, how):
    column = UNCONVERTIBLE[folder]
    window = (
        {"ignore": (column,)}
        if how == "ignore"
        else {"skip_unsupported": True, "columns": ("island", "flipper_length_mm", LABEL)}
    )
    examples = example_gen_features(tmp_path, folder, **window)
    assert len(examples) == 24
    assert all(column not in f and "island" in f for f in examples)
    if how == "scoring":
        assert all("bill_length_mm" not in f for f in examples)  # outside the columns


@pytest.mark.slow  # the draft runs TFDV
@pytest.mark.parametrize("folder", sorted(UNCONVERTIBLE))
def test_the_draft_with_ignore_never_reads_the_column(tmp_path, folder):
    column = UNCONVERTIBLE[folder]
    spec, schema = drafted(tmp_path, folder, ignore=[column])
    assert column in spec["ignore"] and f'"{column}"' not in schema


def test_a_schema_that_requires_an_ignored_column_is_refused_with_the_fix(tmp_path):
    """An ignored column is never in the examples: a schema entry that requires it would
    be "Column dropped" at validation; the schema dir's check says what to write."""
    from contract.dataset.error import DatasetSpecError
    from schemas import load_schema_dir
    from tests.harness import taxi_schema_dir_copy

    schema_dir = taxi_schema_dir_copy(tmp_path)
    load_schema_dir(schema_dir)  # the example's: its ignored columns are DEPRECATED
    schema = schema_dir / "schema.pbtxt"
    schema.write_text(schema.read_text().replace("  lifecycle_stage: DEPRECATED\n", "", 1))
    with pytest.raises(DatasetSpecError) as raised:
        load_schema_dir(schema_dir)
    message = one_line(str(raised.value))
    assert "ignore: 'trip_start_timestamp' is never read" in message
    assert "add `lifecycle_stage: DEPRECATED` to its entry in schema.pbtxt" in message


# --- Issue 71: a value no feature can take is refused before anything starts -----

REFUSED = {
    "refuse_uint64": (
        "column 'counter' holds 9223372036854775808 (uint64), beyond int64 (2^63-1)",
        "df['counter'] = df['counter'].astype('string')",
    ),
    "refuse_ns_timestamp": (
        "column 'seen_at' holds 2023-11-14 22:13:20.000001001 (timestamp[ns])",
        "df['seen_at'] = df['seen_at'].dt.floor('us').astype('datetime64[us]')",
    ),
    "refuse_decimal": (
        "column 'account' holds 1000000000000000000000000 (decimal), beyond int64",
        "df['account'] = df['account'].astype('string')",
    ),
}


@pytest.mark.parametrize("folder", sorted(REFUSED))
def test_a_bad_value_in_a_used_column_is_refused_by_the_check_with_the_fix(folder):
    """The runner's check (run, draft, scoring) finds the first bad value from the footer's
    statistics and a scan of that column alone: one line, file, column, value, the cast."""
    value, cast = REFUSED[folder]
    with pytest.raises(InputDataError) as raised:
        check_data_root(EXPORTS / folder)
    message = one_line(str(raised.value))
    assert message.startswith(f"{EXPORTS / folder / 'part-0.parquet'}: {value}"), message
    assert cast in message and f"(the draft: --ignore {UNCONVERTIBLE[folder]})" in message


def test_statistics_clear_a_column_and_a_bad_value_past_them_is_found_by_the_scan(tmp_path):
    """Row groups whose statistics show int64 values are not read; one whose do not is
    scanned, and the first bad value in it named (here the second group's first row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "part-0.parquet"
    values = [1, 2, 3, 2**63 + 5, 2**63 + 9, 4]
    table = pa.table({"u": pa.array(values, pa.uint64()), LABEL: ["a"] * 6})
    pq.write_table(table, path, row_group_size=3)
    with pytest.raises(InputDataError, match=r"column 'u' holds 9223372036854775813 \(uint64\)"):
        check_data_root(tmp_path)
    pq.write_table(table.slice(0, 3), path)  # every value within int64: nothing to refuse
    assert check_data_root(tmp_path).header == ("u", LABEL)


def test_the_run_refuses_a_bad_value_before_any_step_in_one_line(tmp_path, capsys):
    import local_runner

    output_dir = tmp_path / "out"
    root = exported(tmp_path, "refuse_uint64")
    code = local_runner.main(["--data-root", str(root), "--output-dir", str(output_dir)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 1 and "Traceback" not in "\n".join(err)
    assert err[-1].startswith("error: InputDataError: ") and REFUSED["refuse_uint64"][0] in err[-1]
    assert not (output_dir / "metadata.sqlite").exists()


@pytest.mark.slow  # runs ExampleGen
def test_examplegen_refuses_the_same_value_where_no_runner_checked(tmp_path):
    """Kubeflow: ExampleGen's reader runs the same check before its pipeline runs, so its
    line has no Beam `[while running ...]` suffix."""
    from components.example_gen.parquet_files import ParquetError

    with pytest.raises(ParquetError) as raised:
        example_gen_features(tmp_path, "refuse_decimal")
    message = one_line(str(raised.value))
    assert REFUSED["refuse_decimal"][0] in message and "[while running" not in message


def test_a_row_group_whose_statistics_show_a_bad_value_is_scanned_past_the_bound(
    monkeypatch,
):
    """With no rows left to scan (SCAN_ROWS 0), the uint64 export is still refused by the
    check: its footer's statistics show a value beyond int64, so its row group is read."""
    from components.example_gen import parquet_columns

    monkeypatch.setattr(parquet_columns, "SCAN_ROWS", 0)
    with pytest.raises(InputDataError) as raised:
        check_data_root(EXPORTS / "refuse_uint64")
    assert REFUSED["refuse_uint64"][0] in one_line(str(raised.value))


@pytest.mark.slow  # runs ExampleGen
def test_a_bad_value_past_the_check_s_scan_stops_examplegen_with_the_same_line(
    tmp_path, monkeypatch
):
    """A timestamp's sub-microsecond digits are in no statistic: past the scan (SCAN_ROWS
    0 here; 2^20 rows a file) the check lets the file through, and ExampleGen's read
    stops on the value with the check's line, the cast, and no Beam step in it."""
    from components.example_gen import parquet_columns
    from components.example_gen.parquet_files import ParquetError

    monkeypatch.setattr(parquet_columns, "SCAN_ROWS", 0)
    check_data_root(EXPORTS / "refuse_ns_timestamp")  # nothing scanned, nothing refused
    with pytest.raises(ParquetError) as raised:
        example_gen_features(tmp_path, "refuse_ns_timestamp")
    message = one_line(str(raised.value))
    value, cast = REFUSED["refuse_ns_timestamp"]
    assert value in message and cast in message, message
    assert message.endswith("(the draft: --ignore seen_at)"), message


def test_the_left_out_line_reaches_the_run_summary_and_its_report():
    """ExampleGen records the line on its examples (`left_out`); the closing summary
    shows it under `Input:`, the HTML report in the Input section."""
    import markupsafe

    from components.report.contents import InputData, RunReport
    from components.report.render import render_html
    from pipeline.local.run_summary import summary_text

    line = "left out dt=2024-01-03 under /data: no data file and no writer's marker"
    data = InputData.from_properties({"span": 19724, "spans": "19723,19724", "left_out": line})
    report = RunReport(pipeline_name="p", run_id="r", steps=(), input=data)
    assert f"Input: spans 19723, 19724\n  {line}" in summary_text(report)
    escaped = markupsafe.escape(line)
    assert f'<td id="left-out">{escaped}</td>' in render_html(report)


# --- Issue 71: hostile text in what the data names ------------------------------

# A folder name a writer (or a user) can make: markup, shell and regex characters, a
# terminal's escape sequence, a newline and a Unicode line separator. Not a backslash:
# TFX's span regex reads a `*` as `[^\\/]*`, so TFX's ExampleGen, and the check with it,
# reads no span under such a folder (tests/test_span_resolution.py READINGS).
HOSTILE = "src=<blink>&\"'$(id)[#\x1b[2J\n\u2028"


def test_hostile_folder_names_in_the_left_out_line_stay_one_line_and_are_escaped(tmp_path):
    """The left-out line quotes the data's folder names and the data root: on the console
    (the run's summary, the draft's output) it is one printable line, each control or
    line-break character as its escape; the HTML report escapes its markup."""
    import markupsafe

    from components.example_gen.input_files import left_out_line
    from components.report.contents import InputData, RunReport
    from components.report.render import render_html
    from pipeline.local.run_summary import summary_text

    root = tmp_path / "root<b>\x1b[31m"
    for source in ("src=a", HOSTILE):
        for day in ("2024-01-01", "2024-01-02"):
            folder = root / source / f"dt={day}"
            folder.mkdir(parents=True)
            shutil.copy(DAY_FILE, folder / "part-0.parquet")
            (folder / "_SUCCESS").write_bytes(b"")
    (root / HOSTILE / "dt=2024-01-03").mkdir()
    checked = check_data_root(root, "src=*/dt={YYYY}-{MM}-{DD}/*.parquet", 2)
    assert [p.folder for p in checked.left_out] == [f"{HOSTILE}/dt=2024-01-03"]
    line = left_out_line(str(root), checked.left_out)
    assert line.isprintable(), repr(line)
    assert "src=<blink>&\"'$(id)[#\\x1b[2J\\n\\u2028/dt=2024-01-03" in line
    assert "root<b>\\x1b[31m:" in line
    data = InputData.from_properties({"span": 19724, "spans": "19723,19724", "left_out": line})
    report = RunReport(pipeline_name="p", run_id="r", steps=(), input=data)
    assert f"\n  {line}\n" in summary_text(report) + "\n"
    html = render_html(report)
    assert f'<td id="left-out">{markupsafe.escape(line)}</td>' in html and "<blink>" not in html


def test_an_error_naming_a_hostile_path_is_one_printable_line(tmp_path, capsys):
    """The runner's last line quotes what the user passed (here a data root with a
    newline and an escape sequence in its name): one line, escaped, nothing run."""
    import local_runner

    root = tmp_path / "no such\n\x1b[2Jroot"
    output_dir = tmp_path / "out"
    code = local_runner.main(["--data-root", str(root), "--output-dir", str(output_dir)])
    err = capsys.readouterr().err
    last = err.rstrip("\n").split("\n")[-1]
    assert code == 1 and last.startswith("error: ") and last.isprintable(), err
    assert "no such\\n\\x1b[2Jroot" in last, last
    assert not (output_dir / "metadata.sqlite").exists()
