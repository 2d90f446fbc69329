import os

import pytest

from pipeline.inputs import InputDataError, check_csv_data_root


def test_real_data_root_is_accepted(taxi_slice):
    checked = check_csv_data_root(taxi_slice)
    assert [os.path.basename(p) for p in checked.files] == ["data.csv"]
    assert checked.header[:3] == ("pickup_community_area", "fare", "trip_start_month")


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "holds no \\*.csv files"),
        ({"data.csv": ""}, "is empty: it has no header row"),
        ({"data.csv": "fare,tips\n"}, "has a header but no data rows"),
        ({"data.csv": "fare,tips\n1,2\n", "notes.txt": "x"}, "not CSV: notes.txt"),
        ({"a.csv": "fare,tips\n1,2\n", "b.csv": "fare\n1\n"}, "must share one header"),
        ({"data.csv": ",fare,tips\n0,1,2\n"}, r"column\(s\) \[1\] of the header have no name"),
        ({"data.csv": "fare,tips,fare\n1,2,3\n"}, r"column name\(s\) \['fare'\] appear more"),
        ({"data.csv": "\ufefffare,tips\n1,2\n"}, "starts with a UTF-8 byte-order mark"),
    ],
)
def test_unreadable_data_roots_are_named(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(InputDataError, match=message):
        check_csv_data_root(tmp_path)


def test_missing_directory(tmp_path):
    with pytest.raises(InputDataError, match="is not a directory"):
        check_csv_data_root(tmp_path / "nope")
