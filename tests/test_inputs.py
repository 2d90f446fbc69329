import os

import pytest

from pipeline.inputs import InputDataError, check_data_root


def test_real_data_root_is_accepted(taxi_slice):
    checked = check_data_root(taxi_slice)
    assert [os.path.basename(p) for p in checked.files] == ["data.csv"]
    assert checked.header[:3] == ("pickup_community_area", "fare", "trip_start_month")


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "holds no data files"),
        ({"data.csv": ""}, "is empty: it has no header row"),
        ({"data.csv": "fare,tips\n"}, "has a header but no data rows"),
        (
            {"data.csv": "fare,tips\n1,2\n", "notes.txt": "x"},
            "neither CSV nor Parquet: .*notes.txt",
        ),
        ({"a.csv": "fare,tips\n1,2\n", "b.csv": "fare\n1\n"}, "must share one header"),
        ({"data.csv": ",fare,tips\n0,1,2\n"}, r"column\(s\) \[1\] of the header have no name"),
        ({"data.csv": "fare,tips,fare\n1,2,3\n"}, r"column name\(s\) \['fare'\] appear more"),
        ({"data.csv": "fare,tips\n\n"}, "has a header but no data rows"),
        ({"data.csv": "fare;tips\n1;2\n"}, r"one column, 'fare;tips', separated by semicolons"),
        ({"data.csv": "fare\ttips\n1\t2\n"}, r"separated by tabs, not commas; save the file"),
    ],
)
def test_unreadable_data_roots_are_named(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(InputDataError, match=message):
        check_data_root(tmp_path)


def test_a_byte_that_is_not_utf8_near_the_start_names_the_file_and_line(tmp_path):
    """The header check's decoder reads ahead: a bad byte in row 40 fails the header read."""
    (tmp_path / "good.csv").write_text("fare,company\n1,Flash Cab\n")
    rows = [b"fare,company"] + [b"1,Flash Cab"] * 38 + [b"2,Caf\xe9 Cab"]
    (tmp_path / "latin1.csv").write_bytes(b"\n".join(rows) + b"\n")
    with pytest.raises(
        InputDataError,
        match=r"latin1\.csv: line 40 is not UTF-8 \(byte 0xe9 at column 6\); save the file "
        r"as UTF-8",
    ):
        check_data_root(tmp_path)


def test_missing_directory(tmp_path):
    with pytest.raises(InputDataError, match="is not a directory"):
        check_data_root(tmp_path / "nope")


def write_spans(root, layout: dict[str, str]):
    for name, text in layout.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


# `data[1]` as a glob is `data1`: the root is a path, escaped wherever it meets a pattern.
@pytest.mark.parametrize("folder", ["data", "data[1]"])
def test_with_a_span_pattern_the_files_of_the_spans_read_are_checked(tmp_path, folder):
    rows = "fare,tips\n1,2\n"
    root = write_spans(
        tmp_path / folder,
        {"span-1/a.csv": rows, "span-2/a.csv": rows, "span-10/a.csv": rows, "span-10/b.csv": rows},
    )
    checked = check_data_root(root, "span-{SPAN}/*.csv")
    assert [s.span for s in checked.spans] == [10]
    assert checked.files == (str(root / "span-10/a.csv"), str(root / "span-10/b.csv"))
    window = check_data_root(root, "span-{SPAN}/*.csv", spans=2)
    assert [s.span for s in window.spans] == [2, 10] and len(window.files) == 3
    # An older span out of the window is not read, so not checked either.
    (root / "span-1/a.csv").write_text("")
    check_data_root(root, "span-{SPAN}/*.csv", spans=2)


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (
            {"data.csv": "fare\n1\n"},
            r"no files under .* match the input pattern 'span-\{SPAN\}/\*'",
        ),
        (
            {"span-1/a.csv": "fare\n1\n", "span-1/notes.txt": "x"},
            r"neither CSV nor Parquet: .*notes\.txt",
        ),
        ({"span-1/a.csv": "fare\n1\n", "span-1/b.csv": "tips\n1\n"}, r"must share one header"),
        ({"span-1/a.csv": "fare\n"}, r"has a header but no data rows"),
        (
            {"span-1/a.csv": "fare\n1\n", "span-old/a.csv": "fare\n1\n"},
            r"span-old/a\.csv match\(es\) input pattern .* but hold no span number",
        ),
    ],
)
def test_span_data_roots_that_cannot_be_read_are_named(tmp_path, layout, message):
    with pytest.raises(InputDataError, match=message):
        check_data_root(write_spans(tmp_path, layout), "span-{SPAN}/*")


def test_a_data_root_tfx_cannot_match_spans_under_is_named(tmp_path):
    layout = {"span-1/a.csv": "fare\n1\n"}
    for folder in ("data*", "data?"):
        with pytest.raises(InputDataError, match=r"data root .*data\S holds '[*?]', which TFX"):
            check_data_root(write_spans(tmp_path / folder, layout), "span-{SPAN}/*")
    # Without a pattern TFX globs the root escaped, and reads it.
    assert check_data_root(write_spans(tmp_path / "data*", {"a.csv": "fare\n1\n"})).files


def test_the_check_reads_span_numbers_as_tfxs_example_gen_reads_them(tmp_path):
    """The check before the run and ExampleGen read a span pattern with one rule, TFX's: a
    `[0-9]` is a character class, and `{SPAN}` takes as much of a name as the rest allows
    (utils.py `_create_matching_glob_and_regex`), `7-part` of `events-7-part-0.csv`."""
    rows = "fare,tips\n1,2\n"
    classes = write_spans(
        tmp_path / "classes", {"span-1/part-0.csv": rows, "span-2/part-1.csv": rows}
    )
    window = check_data_root(classes, "span-{SPAN}/part-[0-9].csv", spans=2)
    assert [s.span for s in window.spans] == [1, 2]
    dashes = write_spans(
        tmp_path / "dashes", {"events-7-part-0.csv": rows, "events-8-part-0.csv": rows}
    )
    with pytest.raises(
        InputDataError,
        match=r"events-7-part-0\.csv, events-8-part-0\.csv match\(es\) input pattern "
        r"'events-\{SPAN\}-\*\.csv' but hold no span number in its place .*Cannot find span "
        r"number from events-7-part-0\.csv",
    ):
        check_data_root(dashes, "events-{SPAN}-*.csv")
