"""Every CSV an exporter writes either runs or stops in one line naming the file.

A file runs when the runner's check, ExampleGen's reader and the draft read the
same header and the same cells from it; beyond ExampleGen the rows are
tf.Examples, the same whichever tool wrote the CSV. docs/messy-inputs.md has the
table these tests stand behind.
"""

from __future__ import annotations

import time

import apache_beam as beam
import pytest

from components.example_gen.csv_to_examples import CsvError, read_blocks
from components.example_gen.read_examples import ReadExamples
from pipeline.inputs import InputDataError, check_data_root
from schemas import read_schema
from schemas.draft import draft, main
from schemas.draft.profiles import read_data
from tests.csv_dialects import (
    EXCEL_TAB,
    RUNNING_WRITERS,
    excel_csv_semicolon,
    pandas_to_csv,
    r_write_csv,
    spark_csv_part,
)

HEADER = ("size", "color", "note", "label")
# Cells each writer must quote: a comma, a doubled quote, a line break; an empty cell.
ROWS = (
    ("1.5", "red", "plain", "yes"),
    ("2.25", "", "a, b", "no"),
    ("-3", "green", "two\nlines", "yes"),
    ("4", "blue", 'say "hi"', "no"),
    ("0.5", "red", "", "yes"),
    ("7", "green", "x", "no"),
)
# Spark's default escape is a backslash, not CSV's doubled quote: its quote case
# is a refusal below.
SPARK_ROWS = tuple(row for row in ROWS if '"' not in row[2])


def rows_for(writer: str) -> tuple[tuple[str, ...], ...]:
    return SPARK_ROWS if writer.startswith("Spark") else ROWS


def write_root(tmp_path, files: dict[str, bytes]):
    root = tmp_path / "data"
    root.mkdir()
    for name, data in files.items():
        (root / name).write_bytes(data)
    return root


@pytest.mark.parametrize("writer", sorted(RUNNING_WRITERS))
def test_the_check_examplegen_and_the_draft_read_the_same_cells(tmp_path, writer):
    rows = rows_for(writer)
    root = write_root(tmp_path, {"data.csv": RUNNING_WRITERS[writer](HEADER, rows)})
    checked = check_data_root(root)
    # Quotes and a byte-order mark are no part of a name (TFX's load_csv_column_names
    # kept R's quotes; the mark was refused).
    assert checked.header == HEADER
    # ExampleGen's reader fails on any header other than pyarrow's own reading.
    read = [
        tuple(row.values())
        for block in read_blocks(checked.files[0], list(checked.header))
        for row in block.to_pylist()
    ]
    assert read == list(rows)
    profiled = read_data(checked.files, checked.header, sample_size=len(rows) + 1)
    assert profiled.rows == len(rows)
    assert profiled.sample == list(rows)


@pytest.mark.slow  # the draft's statistics: a Beam pipeline
def test_a_data_root_of_every_exporter_s_files_drafts_with_their_one_header(tmp_path):
    """One draft over a file from each writer: one shared header, and ExampleGen's
    reader (which the draft's statistics run) reads every file: CR-only lines and
    quoted line breaks included, where TFDV's line-based reader failed."""
    files = {
        f"{i}.csv": RUNNING_WRITERS[writer](HEADER, rows_for(writer) * 4)
        for i, writer in enumerate(sorted(RUNNING_WRITERS))
    }
    root = write_root(tmp_path, files)
    summary = draft(root, "label", tmp_path / "schema")
    assert "binary on label 'label'" in summary
    schema = read_schema(tmp_path / "schema" / "schema.pbtxt")
    assert [f.name for f in schema.feature] == list(HEADER)


# Files no run reads, each with the message that says what to do.
REFUSED = {
    "csv module, excel-tab dialect": (
        {"data.csv": EXCEL_TAB(HEADER, ROWS)},
        "the header is one column, 'size\\tcolor\\tnote\\tlabel', separated by tabs, not "
        "commas; save the file as comma-separated CSV",
    ),
    "Excel CSV, semicolon list separator": (
        {"data.csv": excel_csv_semicolon(HEADER, ROWS)},
        "separated by semicolons, not commas; save the file as comma-separated CSV",
    ),
    "pandas to_csv() with its index": (
        {"data.csv": pandas_to_csv(HEADER, ROWS, index=True)},
        "column(s) [1] of the header have no name; every column becomes a feature and "
        "needs one (or drop an unnamed index column: pandas' to_csv(index=False)",
    ),
    "R write.csv() with its row names": (
        {"data.csv": r_write_csv(HEADER, ROWS, row_names=True)},
        "column(s) [1] of the header have no name",
    ),
    "a header, then a blank line": (
        {"data.csv": b"size,color,note,label\r\n\r\n"},
        "has a header but no data rows",
    ),
}


def test_spark_s_output_folder_as_written_reads_its_part_files_alone(tmp_path):
    """Spark's markers and checksums are no data: the check and ExampleGen skip them
    (components/example_gen/input_files.py), so the folder Spark wrote is a data root as it is."""
    part = "part-00000-3f1e-c000.csv"
    root = write_root(
        tmp_path,
        {
            part: spark_csv_part(HEADER, SPARK_ROWS),
            f".{part}.crc": b"crc",
            "_SUCCESS": b"",
            "._SUCCESS.crc": b"crc",
        },
    )
    checked = check_data_root(root)
    assert checked.files == (str(root / part),) and checked.header == HEADER


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_file_no_run_reads_stops_the_check_and_the_draft_in_one_line(tmp_path, capsys, case):
    files, message = REFUSED[case]
    root = write_root(tmp_path, files)
    with pytest.raises(InputDataError) as refused:
        check_data_root(root)
    assert message in str(refused.value)
    assert str(root) in str(refused.value)
    code = main(["--data-root", str(root), "--label", "label", "--output-dir", str(tmp_path / "s")])
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {refused.value}"]
    assert not (tmp_path / "s").exists()


def test_examplegen_refuses_a_header_it_cannot_read_without_the_runner_s_check(tmp_path):
    """On Kubeflow no pre-check runs before ExampleGen: its reader says the same."""
    root = write_root(tmp_path, {"data.csv": excel_csv_semicolon(HEADER, ROWS)})
    with pytest.raises(CsvError, match=r"data\.csv: the header is one column, .* semicolons"):
        beam.Pipeline() | ReadExamples(str(root), ["*"], {})


@pytest.mark.slow  # the draft's statistics: a Beam pipeline
def test_a_row_that_does_not_fit_the_header_stops_the_draft_as_it_stops_the_run(tmp_path, capsys):
    """Spark's default escape: a quote then a comma inside a quoted cell reads as one
    cell too many. The draft's profile pass would read it; ExampleGen does not, and
    the draft says so in one line, as the run would."""
    rows = (*SPARK_ROWS, ("3", "red", 'say "hi", twice', "yes"))
    root = write_root(tmp_path, {"data.csv": spark_csv_part(HEADER, rows)})
    code = main(["--data-root", str(root), "--label", "label", "--output-dir", str(tmp_path / "s")])
    assert code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: CSV file {root / 'data.csv'}: CSV parse error: Expected 4")
    assert line.endswith("""unless written with .option("escape", '"'))""")
    assert not (tmp_path / "s").exists()


WIDE_COLUMNS = 100_000


@pytest.mark.parametrize("repeated", [False, True], ids=["distinct", "last_repeats_first"])
def test_the_header_checks_take_a_hundred_thousand_columns_in_linear_time(tmp_path, repeated):
    names = [f"c{i}" for i in range(WIDE_COLUMNS)]
    if repeated:
        names[-1] = names[0]
    root = write_root(
        tmp_path,
        {"data.csv": (",".join(names) + "\n" + ",".join("1" * WIDE_COLUMNS) + "\n").encode()},
    )
    started = time.monotonic()
    if repeated:
        with pytest.raises(
            InputDataError, match=r"column name\(s\) \['c0'\] appear more than once"
        ):
            check_data_root(root)
    else:
        assert len(check_data_root(root).header) == WIDE_COLUMNS
    # A quadratic check takes minutes here.
    assert time.monotonic() - started < 5
