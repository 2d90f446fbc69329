"""The dataset spec and its drafter: every guard names the field, and a draft is runnable."""

from __future__ import annotations

import copy
import datetime
import re
import shutil
from pathlib import Path

import pytest
import yaml
from tensorflow_metadata.proto.v0 import schema_pb2

import local_runner
from contract.dataset.error import DatasetSpecError
from contract.dataset.parse import parse_spec
from contract.dataset.reference import field_reference
from pipeline.local import run as local_run
from schemas import DEFAULT_SCHEMA_DIR, load_schema_dir, read_schema
from schemas.draft import DraftError, draft, main
from schemas.draft.noise import DRIFT_FLOORS
from schemas.draft.profiles import read_profiles
from schemas.draft.task import infer_task
from tests.conftest import REPO_ROOT, update_goldens
from tests.synthetic import TASK_LABELS, write_dataset

VALID = {
    "name": "shop",
    "label": {"task": "multiclass", "column": "y", "classes": ["a", "b", "c"]},
    "features": {
        "size": {"kind": "numeric"},
        "color": {"kind": "categorical"},
        "level": {"kind": "id", "num_values": 5},
    },
    "ignore": ["row_id"],
    "slices": ["color"],
    "evaluation": {"metric": "accuracy", "naive_value": 0.4, "margin": 0.1, "max_drop": 0.01},
}
COLUMNS = {"size": "float", "color": "string", "level": "int", "row_id": "int", "y": "string"}


def changed(path: str, value) -> dict:
    """VALID with the field at dotted `path` set to `value` (None deletes it)."""
    values = copy.deepcopy(VALID)
    *parents, last = path.split(".")
    node = values
    for key in parents:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return values


def test_the_valid_spec_parses_and_round_trips():
    spec = parse_spec(VALID)
    spec.check_against_columns(COLUMNS)
    assert spec.evaluation.threshold == pytest.approx(1 - 0.9 * 0.6)
    assert parse_spec(spec.to_dict()) == spec
    assert spec.model_input_sizes() == {"size_xf": None, "color_xf": 1010, "level_xf": 5}


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("features.color.kind", "categorial", r"features\.color\.kind: 'categorial' is not one of"),
        ("evaluation.margin", 1.5, r"evaluation\.margin: .* in \[0, 1\]; got 1\.5"),
        ("evaluation.naive_value", 1.3, r"evaluation\.naive_value: accuracy is in \[0, 1\]"),
        ("evaluation.max_drop", -0.1, r"evaluation\.max_drop: must be >= 0"),
        ("evaluation.metric", "auc", r"evaluation\.metric: a multiclass task is gated on accuracy"),
        ("label.classes", ["a"], r"label\.classes: a multiclass label needs at least 3 classes"),
        ("label.classes", ["a", "b"], r"needs at least 3 classes.*with 2 classes the task is bin"),
        ("label.classes", ["a", "a", "b"], r"label\.classes: duplicates"),
        ("label.task", "ranking", r"label\.task: 'ranking' is not one of"),
        ("label.column", None, r"label: give exactly one of `column`"),
        ("features.level.num_values", None, r"features\.level\.num_values: required for kind id"),
        ("features.size.buckets", 4, r"features\.size: unknown field\(s\) buckets"),
        ("features.level.num_values", 0, r"features\.level\.num_values: expected an integer >= 2"),
        ("name", "My_Shop", r"name: 'My_Shop' must match"),
        (
            "features.size.missing_markers",
            "NA",
            r"features\.size\.missing_markers: expected a list",
        ),
        (
            "features",
            {"a b": {"kind": "numeric"}, "a_b": {"kind": "numeric"}},
            r"features\.a_b: 'a_b' and 'a b' both become model input 'a_b_xf'",
        ),
        ("slices", "color", r"slices: expected a list"),
        ("ignore", ["size"], r"ignore: \['size'\] are also used"),
        ("features", {}, r"features: the model needs at least one feature"),
        ("colour", 1, r"unknown field\(s\) colour"),
        ("input", {"pattern": "data/*.csv"}, r"input\.pattern: 'data/\*\.csv' has no span"),
        ("input", {"pattern": "/abs/{SPAN}/*.csv"}, r"input\.pattern: .* must be relative"),
        ("input", {"pattern": "s3://b/{SPAN}/*.csv"}, r"input\.pattern: .* must be relative"),
        ("input", {"pattern": "{SPAN}/{SPAN}.csv"}, r"input\.pattern: .* more than once"),
        ("input", {"pattern": "{YYYY}-{MM}/*.csv"}, r"needs all of \{YYYY\}, \{MM\}, \{DD\}"),
        ("input", {"pattern": "{SPAN}/{YYYY}-{MM}-{DD}"}, r"both \{SPAN\} and date"),
        ("input", {"pattern": "{SPAN}/{HOUR}/*.csv"}, r"a placeholder other than"),
        # What TFX's ExampleGen refuses or cannot read (contract/dataset/span_grammar.py).
        ("input", {"pattern": "s{SPAN:0}/*.csv"}, r"a placeholder other than .*a width of 1"),
        ("input", {"pattern": "s{SPAN}/a|b.csv"}, r"input\.pattern: .* reads no span: .*'\|'"),
        ("input", {"pattern": "s{SPAN}/[!_]*.csv"}, r"reads no span: it holds '\[!'"),
        ("input", {"pattern": "s[0/{SPAN}/*.csv"}, r"reads no span: a '\[' with no '\]'"),
        ("input", {"pattern": "{SPAN}/*.csv", "spans": 0}, r"input\.spans: expected an integer"),
        ("input", {"spans": 3}, r"input\.spans: a window of spans needs input\.pattern"),
        ("input", {"span": 3}, r"input: unknown field\(s\) span"),
        ("drift", {"features": {"weight": {"l_infinity": 0.1}}}, r"drift\.features\.weight: "),
        ("drift", {"features": {"size": {}}}, r"drift\.features\.size: give exactly one of"),
        (
            "drift",
            {"features": {"size": {"l_infinity": 0.1, "jensen_shannon": 0.1}}},
            r"drift\.features\.size: give exactly one of",
        ),
        (
            "drift",
            {"features": {"size": {"jensen_shannon": 0}}},
            r"drift\.features\.size\.jensen_shannon: a threshold in \(0, 1\]",
        ),
        (
            "drift",
            {"features": {"size": {"jensen_shannon": 0.1, "mode": "stop"}}},
            r"drift\.features\.size\.mode: 'stop' is not one of fail, warn",
        ),
        ("drift", {"mode": "loud"}, r"drift\.mode: 'loud' is not one of"),
        (
            "drift",
            {"features": {"size": {"quantile_shift": 150}}},
            r"drift\.features\.size\.quantile_shift: a threshold in \(0, 100\]",
        ),
        ("features.color.closed", "yes", r"features\.color\.closed: expected true or false"),
        ("features.size.closed", True, r"features\.size: unknown field\(s\) closed"),
        # Text YAML read as another type, unquoted: each error says to quote it.
        ("name", datetime.date(2024, 6, 1), r"name: expected .*, got datetime\.date.*: quote it"),
        ("name", 2024, r"name: expected a non-empty string, got 2024; unquoted, YAML reads"),
        ("label.classes", [False, True, "x"], r"label\.classes\[0\]: .*got False; unquoted"),
        ("label.classes", ["a", None, "c"], r"label\.classes\[1\]: .*got None; unquoted"),
        ("slices", [True], r"slices\[0\]: expected a non-empty string, got True; unquoted"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field(path, value, message):
    with pytest.raises(DatasetSpecError, match=message):
        parse_spec(changed(path, value))


def test_the_docs_field_reference_is_the_declarations():
    """docs/dataset-spec.md's table is made from the fields' declarations, so a field
    added to the spec without its docs fails here (UPDATE_GOLDENS=1 rewrites it)."""
    page = REPO_ROOT / "docs" / "dataset-spec.md"
    begin, end = (
        "<!-- fields: generated from contract/dataset/reference.py -->\n",
        "<!-- end of fields -->\n",
    )
    before, rest = page.read_text().split(begin)
    table, after = rest.split(end)
    if update_goldens():
        page.write_text(before + begin + field_reference() + end + after)
        table = field_reference()
    assert table == field_reference(), "rewrite the table with UPDATE_GOLDENS=1"
    assert (
        "| `features.<column>.buckets` | an integer >= 2 | bucketized: 10, hashed: 1024 |" in table
    )


def test_regression_needs_a_positive_std_and_has_no_classes():
    label = {"task": "regression", "column": "y", "mean": 1.0, "std": 0.0}
    values = changed("label", label) | {"evaluation": {"naive_value": 2.0}}
    with pytest.raises(DatasetSpecError, match=r"label\.std: must be > 0"):
        parse_spec(values)
    values["label"] = label | {"std": 1.0, "classes": ["a", "b"]}
    with pytest.raises(DatasetSpecError, match=r"label\.classes: a regression label has no"):
        parse_spec(values)
    values["label"] = label | {"std": 1.0}
    values["evaluation"] = {"naive_value": -1.0}
    with pytest.raises(DatasetSpecError, match=r"evaluation\.naive_value: an RMSE must be > 0"):
        parse_spec(values)


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({k: v for k, v in COLUMNS.items() if k != "y"}, r"label\.column: 'y' is not a column"),
        (COLUMNS | {"size": "string"}, r"features\.size\.kind: numeric needs int or float"),
        (COLUMNS | {"level": "float"}, r"features\.level\.kind: id needs int values"),
        (COLUMNS | {"y": "int"}, r"label\.classes\[0\]: 'a' is not an integer"),
        (COLUMNS | {"size": "string"}, r"list the marker in missing_markers \(e\.g\. \[NA\]\)"),
        (COLUMNS | {"weight": "float"}, r"columns \['weight'\] are in the data but neither"),
    ],
)
def test_a_spec_that_does_not_fit_the_data_is_refused(columns, message):
    with pytest.raises(DatasetSpecError, match=message):
        parse_spec(VALID).check_against_columns(columns)


def test_input_and_drift_parse_with_defaults_and_per_feature_modes():
    values = changed("input", {"pattern": "{YYYY}-{MM}-{DD}/part-*.csv", "spans": 7})
    values["drift"] = {
        "mode": "warn",
        "features": {"size": {"jensen_shannon": 0.2}, "color": {"l_infinity": 0.1, "mode": "fail"}},
    }
    spec = parse_spec(values)
    spec.check_against_columns(COLUMNS)
    assert (spec.input.pattern, spec.input.spans) == ("{YYYY}-{MM}-{DD}/part-*.csv", 7)
    assert {k: (f.measure, f.threshold, f.mode) for k, f in spec.drift.features.items()} == {
        "size": ("jensen_shannon", 0.2, "warn"),
        "color": ("l_infinity", 0.1, "fail"),
    }
    plain = parse_spec(VALID)
    assert plain.input.pattern is None and plain.input.spans == 1 and not plain.drift.features


@pytest.mark.parametrize(
    ("feature", "measure", "message"),
    [
        ("size", "l_infinity", r"drift\.features\.size: l_infinity compares string values.*jensen"),
        ("color", "jensen_shannon", r"drift\.features\.color: jensen_shannon compares int or"),
    ],
)
def test_a_drift_measure_must_suit_the_columns_values(feature, measure, message):
    spec = parse_spec(changed("drift", {"features": {feature: {measure: 0.1}}}))
    with pytest.raises(DatasetSpecError, match=message):
        spec.check_against_columns(COLUMNS)


def test_missing_markers_are_for_numbers_read_as_strings():
    spec = parse_spec(changed("features.size", {"kind": "numeric", "missing_markers": ["NA"]}))
    spec.check_against_columns(COLUMNS | {"size": "string"})
    with pytest.raises(
        DatasetSpecError,
        match=r"features\.size\.missing_markers: column 'size' holds float values already",
    ):
        spec.check_against_columns(COLUMNS)


def test_a_bad_spec_file_is_named_with_its_field(tmp_path):
    schema_dir = shutil.copytree(DEFAULT_SCHEMA_DIR, tmp_path / "taxi")
    spec_file = schema_dir / "dataset.yaml"
    spec_file.write_text(spec_file.read_text().replace("kind: hashed", "kind: hashing"))
    with pytest.raises(DatasetSpecError) as raised:
        load_schema_dir(schema_dir)
    assert str(raised.value).startswith(f"{spec_file}: features.dropoff_census_tract.kind:")


def test_the_runner_refuses_a_bad_spec_before_anything_runs(tmp_path, taxi_slice, capsys):
    schema_dir = shutil.copytree(DEFAULT_SCHEMA_DIR, tmp_path / "taxi")
    spec_file = schema_dir / "dataset.yaml"
    spec_file.write_text(spec_file.read_text().replace("margin: 0.1", "margin: 2"))
    output_dir = tmp_path / "out"
    args = ["--data-root", str(taxi_slice), "--schema-dir", str(schema_dir)]
    assert local_runner.main([*args, "--output-dir", str(output_dir)]) == local_runner.EXIT_FAILED
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert last_line.startswith(f"error: DatasetSpecError: {spec_file}: evaluation.margin:")
    assert not output_dir.exists()


def test_an_output_dir_named_like_a_glob_is_refused_before_anything_runs(
    tmp_path, taxi_slice, capsys
):
    output_dir = tmp_path / "out[1]"
    args = ["--data-root", str(taxi_slice), "--output-dir", str(output_dir)]
    assert local_runner.main(args) == local_runner.EXIT_FAILED
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert last_line == (
        f"error: OutputDirError: output dir {output_dir} holds '[': TFX's steps find their "
        "inputs under it by glob patterns, which read such a character as one; choose an "
        "--output-dir without it"
    )
    assert not output_dir.exists()


def test_a_data_root_without_the_specs_spans_is_refused_at_once(tmp_path, taxi_slice, capsys):
    from tests.span_data import span_schema_dir

    schema_dir = span_schema_dir(tmp_path / "spans")
    output_dir = tmp_path / "out"
    args = ["--data-root", str(taxi_slice), "--schema-dir", str(schema_dir)]
    assert local_runner.main([*args, "--output-dir", str(output_dir)]) == local_runner.EXIT_FAILED
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert last_line == (
        f"error: InputDataError: no files under {taxi_slice} match the input pattern "
        "'span-{SPAN}/*.csv' (input.pattern in the dataset spec)"
    )
    assert not output_dir.exists()


def test_own_data_without_its_schema_dir_is_refused_at_once(tmp_path, capsys):
    data_root = write_dataset(tmp_path / "shop", "binary", rows=60)
    output_dir = tmp_path / "out"
    args = ["--data-root", str(data_root), "--output-dir", str(output_dir)]
    assert local_runner.main(args) == local_runner.EXIT_FAILED
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "has no column 'tips', 'fare', which the label of" in last_line
    assert "pass --schema-dir SCHEMA_DIR" in last_line
    assert not output_dir.exists()


def test_an_output_dir_belongs_to_one_pipeline(tmp_path):
    local_run.claim_output_dir(tmp_path, "taxi-big-tipper")
    local_run.claim_output_dir(tmp_path, "taxi-big-tipper")
    with pytest.raises(local_run.OutputDirInUseError, match="holds pipeline 'taxi-big-tipper'"):
        local_run.claim_output_dir(tmp_path, "penguins")


# --- The drafter ---------------------------------------------------------------


def label_profile(tmp_path, values, value_type):
    """The drafter's profile of column y (beside a column x: a lone empty cell is a blank line)."""
    path = tmp_path / "data.csv"
    path.write_text("\n".join(["x,y", *(f"1,{v}" for v in values)]) + "\n")
    return read_profiles([path], {"x": "int", "y": value_type})["y"]


@pytest.mark.parametrize(
    ("values", "value_type", "task"),
    [
        (["yes", "no", "yes"], "string", "binary"),
        (["0", "1", "1"], "int", "binary"),
        (["a", "b", "c", "a"], "string", "multiclass"),
        ([str(i % 5) for i in range(30)], "int", "multiclass"),
        ([str(i) for i in range(30)], "int", "regression"),
        (["1.5", "2.5", "0.1"], "float", "regression"),
    ],
)
def test_the_task_is_inferred_from_the_label(tmp_path, values, value_type, task):
    assert infer_task(label_profile(tmp_path, values, value_type), None) == task


@pytest.mark.parametrize(
    ("values", "requested", "message"),
    [
        (["a", "a", "a"], None, r"label 'y' has one value \('a'\) in all 3 rows: nothing to learn"),
        (["a", "a", "a"], "multiclass", r"has one value"),
        (["a", "", "b"], None, r"label 'y' is empty in 1 of 3 rows"),
        (["a", "b", "a"], "multiclass", r"--task multiclass: label 'y' has 2 values"),
        (["a", "b", "c"], "regression", r"--task regression: label 'y' holds strings"),
    ],
)
def test_a_label_that_cannot_be_learned_is_refused(tmp_path, values, requested, message):
    with pytest.raises(DraftError, match=message):
        infer_task(label_profile(tmp_path, values, "string"), requested)


@pytest.mark.parametrize(
    ("values", "value_type", "requested", "message"),
    [
        (
            ["0.0", "1.0", "1.0"],
            "float",
            None,
            r"label 'y' holds decimal numbers \(0, 1\) for a "
            r"binary task: .* write the classes as integers or text \(1, not 1\.0\)",
        ),
        (["1.5", "2.5", "0.5"], "float", "multiclass", r"or draft with --task regression"),
        (
            ["0", "2", "5", "2"],
            "int",
            None,
            r"label 'y' holds the integer classes \[0, 2, 5\], "
            r"with gaps: .* range \(0\.\.5\), so a new 1 would train as no class",
        ),
    ],
)
def test_a_label_whose_classes_no_schema_can_close_is_refused(
    tmp_path, values, value_type, requested, message
):
    with pytest.raises(DraftError, match=message):
        infer_task(label_profile(tmp_path, values, value_type), requested)


@pytest.mark.parametrize(
    ("value_type", "classes", "unseen", "named"),
    [
        (
            "int",
            ["0", "1", "2"],
            "3",
            "feature 'y': Out-of-range values: Unexpectedly large value: 3",
        ),
        ("int", ["1", "2"], "0", "feature 'y': Out-of-range values: Unexpectedly small value: 0"),
        (
            "string",
            ["a", "b", "c"],
            "d",
            "feature 'y': Unexpected string values: Examples contain "
            "values missing from the schema: d",
        ),
    ],
)
# Slow only for TFDV's import: its statistics of a dozen rows are quick.
@pytest.mark.slow
def test_a_label_value_the_draft_has_not_seen_stops_the_run_naming_it(
    tmp_path, value_type, classes, unseen, named
):
    """The drafted schema closes the label's domain; ExampleValidator's anomaly on new data
    with another label value is one line of the data gate's error, naming the value."""
    import pandas as pd
    import tensorflow_data_validation as tfdv

    from components.gates.data_validation.executor import DataValidationError, check_data
    from schemas.draft.schema import curate_schema

    rows = [classes[i % len(classes)] for i in range(12)]
    path = tmp_path / "data.csv"
    path.write_text("\n".join(["x,y", *(f"{i},{v}" for i, v in enumerate(rows))]) + "\n")
    profiles = read_profiles([path], {"x": "int", "y": value_type})
    task = infer_task(profiles["y"], None)

    def statistics(labels):
        column = [int(v) for v in labels] if value_type == "int" else labels
        frame = pd.DataFrame({"x": range(len(labels)), "y": column})
        return tfdv.generate_statistics_from_dataframe(frame)

    schema = curate_schema(tfdv.infer_schema(statistics(rows)), profiles, "y", task, set(), set())
    tfdv.get_feature(schema, "x").ClearField("int_domain")
    assert not tfdv.validate_statistics(statistics(rows), schema).anomaly_info
    anomalies = tfdv.validate_statistics(statistics([*rows, unseen]), schema)
    with pytest.raises(DataValidationError) as raised:
        check_data({"train": anomalies}, {"train": len(rows) + 1})
    assert "(1 problem(s))" in str(raised.value)
    assert named in str(raised.value)


@pytest.mark.slow
def test_a_label_not_in_the_data_is_named(tmp_path, capsys):
    data_root = write_dataset(tmp_path / "data", "multiclass", rows=60)
    code = main(["--data-root", str(data_root), "--label", "colour", "--output-dir", "x"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--label 'colour' is not a column of the data (columns: row_id, size" in err


@pytest.mark.slow
def test_a_draft_is_runnable_as_written_and_never_overwrites(tmp_path):
    data_root = write_dataset(tmp_path / "shop", "multiclass", rows=200)
    out = tmp_path / "schema"
    summary = draft(data_root, TASK_LABELS["multiclass"], out)
    assert "Drafted shop: multiclass on label 'species'" in summary
    spec = load_schema_dir(out).spec
    assert spec.name == "shop"
    assert spec.label.classes == ("adelie", "chinstrap", "gentoo")
    assert {k: f.kind for k, f in spec.features.items()} == {
        "size": "numeric",
        "Body Mass (g)": "numeric",
        "color": "categorical",
        "visits": "numeric",
    }
    # Numbers with "NA" cells are strings to CSV type inference; the spec reads them back.
    assert spec.features["Body Mass (g)"].missing_markers == ("NA",)
    assert "Body_Mass__g__xf" in spec.model_input_sizes()
    assert spec.ignore == ("row_id",)  # a different value in every row
    assert spec.slices == ("color",)
    # Drift thresholds for every feature, the measure by the column's values, each
    # three times its noise between random halves of the rows, above a floor.
    assert {k: (f.measure, f.mode) for k, f in spec.drift.features.items()} == {
        "size": ("quantile_shift", "fail"),
        "Body Mass (g)": ("l_infinity", "fail"),  # numbers with "NA": string statistics
        "color": ("l_infinity", "fail"),
        "visits": ("quantile_shift", "fail"),
    }
    spec_text = (out / "dataset.yaml").read_text()
    for name, feature_drift in spec.drift.features.items():
        noise = float(re.search(rf"{re.escape(name)}.*# noise (\S+)", spec_text).group(1))
        assert feature_drift.threshold >= max(DRIFT_FLOORS[feature_drift.measure], 2.9 * noise)
    # The naive model always answers the most frequent class.
    raw = yaml.safe_load((out / "dataset.yaml").read_text())
    labels = [line.rsplit(",", 1)[1] for line in (data_root / "data.csv").read_text().splitlines()]
    labels = labels[1:]
    majority = max(labels.count(c) for c in set(labels)) / len(labels)
    assert raw["evaluation"]["naive_value"] == pytest.approx(majority, abs=1e-4)
    schema_text = (out / "schema.pbtxt").read_text()
    assert 'not_in_environment: "SERVING"' in schema_text
    with pytest.raises(DraftError, match="a draft never overwrites a curated file"):
        draft(data_root, "species", out)


@pytest.mark.parametrize("bad_row", [2, 900], ids=["near_the_start", "late"])
def test_a_draft_of_data_that_is_not_utf8_names_the_file_and_line(tmp_path, capsys, bad_row):
    """Near the start the header check meets it; later only the draft's own read does
    (TFDV's statistics failed inside Beam with neither file nor row)."""
    data_root = write_dataset(tmp_path / "shop", "multiclass", rows=1000)
    lines = (data_root / "data.csv").read_bytes().split(b"\n")
    assert len(b"\n".join(lines[:bad_row])) > 16_384 or bad_row < 10  # past any read-ahead
    lines[bad_row - 1] = lines[bad_row - 1].replace(b",", b",\xe9", 1)
    (data_root / "data.csv").write_bytes(b"\n".join(lines))
    code = main(
        ["--data-root", str(data_root), "--label", "species", "--output-dir", str(tmp_path / "s")]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {data_root / 'data.csv'}: line {bad_row} is not UTF-8")
    assert "Traceback" not in err
    assert not (tmp_path / "s").exists()


def test_a_draft_of_a_data_root_with_spans_writes_the_input_section(tmp_path):
    shop = write_dataset(tmp_path / "shop", "multiclass", rows=200)
    spans_root = tmp_path / "daily"
    for span in (1, 2):
        (spans_root / f"span-{span}").mkdir(parents=True)
        shutil.copy(shop / "data.csv", spans_root / f"span-{span}" / "data.csv")
    out = tmp_path / "schema"
    summary = draft(
        spans_root, TASK_LABELS["multiclass"], out, input_pattern="span-{SPAN}/*.csv", spans=2
    )
    assert "input: span-{SPAN}/*.csv, drafted from span(s) 1, 2" in summary
    spec = load_schema_dir(out).spec
    assert (spec.name, spec.input.pattern, spec.input.spans) == ("daily", "span-{SPAN}/*.csv", 2)
    with pytest.raises(DraftError, match=r"--input-pattern/--spans: input\.pattern: .* no span"):
        draft(spans_root, "species", tmp_path / "other", input_pattern="span-1/*.csv")
    with pytest.raises(DraftError, match=r"no files under .* match the input pattern"):
        draft(spans_root, "species", tmp_path / "other", input_pattern="day-{SPAN}/*.csv")


def test_a_closed_categorical_round_trips():
    spec = parse_spec(changed("features.color.closed", True))
    assert spec.features["color"].closed
    assert parse_spec(spec.to_dict()) == spec
    assert "closed" not in parse_spec(VALID).features["color"].to_dict()


@pytest.mark.parametrize(
    ("spec_edit", "schema_edit", "message"),
    [
        (
            (
                "company: {kind: categorical, max_values: 1000, oov_buckets: 10}",
                "company: {kind: categorical, max_values: 1000, oov_buckets: 10, closed: true}",
            ),
            None,
            r"features\.company\.closed: true, but the schema gives 'company' no string domain",
        ),
        (
            None,
            (
                '  domain: "payment_type"\n',
                '  domain: "payment_type"\n  distribution_constraints { min_domain_mass: 0.95 }\n',
            ),
            r"features\.payment_type\.closed: true, but the schema lets 5% of 'payment_type'",
        ),
        (
            (
                "trip_start_hour: {kind: id, num_values: 24}",
                "trip_start_hour: {kind: categorical, closed: true}",
            ),
            ("int_domain { min: 0 max: 23 }", "int_domain { min: 0 }"),
            r"features\.trip_start_hour\.closed: true, but the schema gives 'trip_start_hour' "
            r"no int_domain with both min and max",
        ),
    ],
)
def test_a_column_the_spec_closes_must_be_closed_in_the_schema(
    tmp_path, spec_edit, schema_edit, message
):
    schema_dir = shutil.copytree(DEFAULT_SCHEMA_DIR, tmp_path / "taxi")
    for name, edit in (("dataset.yaml", spec_edit), ("schema.pbtxt", schema_edit)):
        if edit:
            text = (schema_dir / name).read_text()
            assert edit[0] in text
            (schema_dir / name).write_text(text.replace(edit[0], edit[1]))
    with pytest.raises(DatasetSpecError, match=message):
        load_schema_dir(schema_dir)


def _two_spans(tmp_path, older_edit) -> Path:
    """Two spans of one shop dataset; `older_edit(text)` changes span 1's CSV."""
    shop = write_dataset(tmp_path / "shop", "multiclass", rows=200)
    root = tmp_path / "daily"
    for span in (1, 2):
        (root / f"span-{span}").mkdir(parents=True)
        shutil.copy(shop / "data.csv", root / f"span-{span}" / "data.csv")
    older = root / "span-1" / "data.csv"
    older.write_text(older_edit(older.read_text()))
    return root


@pytest.mark.slow
def test_a_fraction_in_an_older_span_drafts_the_column_as_float(tmp_path):
    """Span 1 holds 2.5 in `visits`: the draft types every span a run reads together, as
    ExampleGen does, so the column is float (the latest span alone is int)."""

    def fractional_visits(text: str) -> str:
        header, *lines = text.splitlines()
        column = header.split(",").index("visits")
        cells = lines[3].split(",")
        cells[column] = "2.5"
        lines[3] = ",".join(cells)
        return "\n".join([header, *lines]) + "\n"

    root = _two_spans(tmp_path, fractional_visits)
    out = tmp_path / "schema"
    draft(root, "species", out, input_pattern="span-{SPAN}/*.csv", spans=2)
    schema = read_schema(load_schema_dir(out).schema_file)
    (visits,) = [f for f in schema.feature if f.name == "visits"]
    assert visits.type == schema_pb2.FLOAT and not visits.HasField("int_domain")
    # The latest span alone drafts it int.
    draft(root, "species", tmp_path / "alone", input_pattern="span-{SPAN}/*.csv")
    (alone,) = [
        f
        for f in read_schema(load_schema_dir(tmp_path / "alone").schema_file).feature
        if f.name == "visits"
    ]
    assert alone.type == schema_pb2.INT


def _oversized_field_in_line(text: str, line: int) -> str:
    """A cell past csv's field size limit (128 KiB): a file no CSV reader here takes."""
    lines = text.split("\n")
    lines[line - 1] = "x" * 200_000 + lines[line - 1]
    return "\n".join(lines)


@pytest.mark.parametrize("line", [2, 60], ids=["in_the_header_check", "in_the_profiles"])
def test_a_file_that_is_not_csv_is_one_line_naming_it(tmp_path, capsys, line):
    root = _two_spans(tmp_path, lambda text: _oversized_field_in_line(text, line))
    code = main(
        ["--data-root", str(root), "--label", "species", "--output-dir", str(tmp_path / "s"),
         "--input-pattern", "span-{SPAN}/*.csv", "--spans", "2"]
    )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: {root / 'span-1' / 'data.csv'}: line {line}: "
        "field larger than field limit (131072)"
    )


def test_the_noise_sample_is_drawn_across_the_data_not_from_its_head(tmp_path):
    from schemas.draft.noise import sample_frame
    from schemas.draft.profiles import read_data

    sorted_rows = tmp_path / "sorted.csv"
    sorted_rows.write_text("x\n" + "".join(f"{i}\n" for i in range(1000)))

    def sample():
        return sample_frame(read_data([str(sorted_rows)], ["x"], sample_size=50), {"x": "int"})

    frame = sample()
    assert len(frame) == 50
    assert frame["x"].max() > 500  # the head alone would stop at 49
    assert frame["x"].equals(sample()["x"])


# --- names that YAML (or a comment) would read as something else -----------------

# Text that YAML, unquoted or in a comment, reads as something else.
YAML_HOSTILE = (
    "2024-06-01",
    "2024",
    "1.50",
    "no",
    "null",
    "~",
    "#tag",
    "[a]",
    "a: b",
    "- x",
    "'quoted'",
    '"dq"',
    "$0_to_$10",
    "back\\slash",
    " lead and trail ",
    "two\nlines",
    "next\x85line",
    "sep\u2028x",
    "bell\x07",
    "x" * 1100,
    "y" * 1021 + " z",
)


@pytest.mark.parametrize("value", YAML_HOSTILE, ids=lambda v: repr(v[:12]))
def test_drafted_yaml_values_keys_and_comments_read_back_as_written(value):
    from contract.fields import one_line
    from schemas.draft.render import yaml_key, yaml_scalar

    text = (
        f"# from {one_line(value)}\n"
        f"name: {yaml_scalar(value)}   # {one_line(value)}\n"
        f"listed: {yaml_scalar([value, 'b'])}\n"
        "features:\n"
        f"  {yaml_key(value, 2)}: {{kind: numeric}}   # {one_line(value)}\n"
        "  other: {kind: numeric}\n"
    )
    assert yaml.safe_load(text) == {
        "name": value,
        "listed": [value, "b"],
        "features": {value: {"kind": "numeric"}, "other": {"kind": "numeric"}},
    }


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        # Categorical: they shared one vocabulary file before; now one check refuses them.
        (["a.b", "a_b"], r"features\.a_b: 'a_b' and 'a\.b' both become model input 'a_b_xf'"),
        (["a-b", "a b"], r"'a b' and 'a-b' both become .* serving input 'a_b'"),
        (["_id", "id"], r"'id' and '_id' both become model input 'id_xf'"),
        (["#"], r"features\.#: column '#' has no letter or digit to name its model input by"),
        (["label"], r"features\.label: .* would become model input 'label_xf', the label's"),
    ],
)
def test_columns_that_share_a_model_name_are_refused_naming_both(columns, message):
    spec = copy.deepcopy(VALID)
    spec["features"] = {c: {"kind": "categorical"} for c in columns}
    with pytest.raises(DatasetSpecError, match=message):
        parse_spec(spec)


def test_every_column_gets_a_model_name_of_its_own():
    from contract.dataset.names import model_name, model_names

    names = model_names(["価格", "数量", "Größe", "Body Mass (g)", "2024", "a.b"])
    assert names == {
        "価格": "u4fa1u683c",
        "数量": "u6570u91cf",
        "Größe": "Gru00f6u00dfe",
        "Body Mass (g)": "Body_Mass__g_",
        "2024": "2024",
        "a.b": "a_b",
    }
    # tf.Transform's vocabulary-file sanitizing keeps a model name as it is.
    from tensorflow_transform.analyzers import sanitized_vocab_filename

    for name in names.values():
        assert sanitized_vocab_filename(name) == name
    assert model_name("£") == "u00a3"  # was `_xf`, a name with nothing of the column


@pytest.mark.parametrize("key", [False, 2024, None, datetime.date(2024, 6, 1)])
def test_a_column_name_yaml_read_as_another_type_is_refused_with_a_hint(key):
    spec = copy.deepcopy(VALID)
    spec["features"][key] = {"kind": "numeric"}
    with pytest.raises(
        DatasetSpecError, match=rf"features: the key {re.escape(repr(key))} .*quote"
    ):
        parse_spec(spec)
    spec = copy.deepcopy(VALID)
    spec["drift"] = {"features": {key: {"l_infinity": 0.1}}}
    with pytest.raises(DatasetSpecError, match=r"drift\.features: the key .* not a name; unquoted"):
        parse_spec(spec)


@pytest.mark.slow
def test_a_draft_with_hostile_names_loads_back_as_written(tmp_path):
    """A data folder named `no` under a parent whose name holds a newline, U+0085 and `[1]`
    (a glob's character class), and columns YAML reads as a number, a date, a boolean, a
    comment, or too long for an implicit key: the drafted spec loads back with every name
    as written."""
    import csv

    data_root = tmp_path / "a\n#injected: 1\x85b[1]" / "no"
    data_root.mkdir(parents=True)
    columns = ["2024", "2024-06-01", "off", "#tag", "w" * 1100, "species"]
    with open(data_root / "data.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for i in range(60):
            writer.writerow(
                [i % 7, i * 0.5, ("a", "b", "c")[i % 3], i % 5 * 1.5, i * 0.25, ("p", "q")[i % 2]]
            )
    out = tmp_path / "schema"
    draft(data_root, "species", out)
    spec = load_schema_dir(out).spec
    assert spec.name == "no"
    assert set(spec.features) == set(columns) - {"species"}
    assert set(spec.drift.features) <= set(spec.features)
    raw = yaml.safe_load((out / "dataset.yaml").read_text())
    assert "injected" not in raw
    assert set(raw) == {"name", "label", "features", "ignore", "slices", "evaluation", "drift"}
    for name in ("dataset.yaml", "schema.pbtxt"):
        text = (out / name).read_text()
        assert "\n#injected" not in text and "\x85" not in text, name
