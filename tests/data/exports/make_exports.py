"""Writes the files in this folder as a new user's exporter writes them: pandas 3 and a
current pyarrow (the project's own pyarrow is 10, which TFX 1.16 pins; a file written
by it would not show how current writers lay a file out). Each file holds the fewest
rows that show one defect of issue 61 (tests/test_real_exports.py reads them).

Regenerate (outside the project's environment, Python 3.11 or later):

    python3.11 -m venv /tmp/exportenv && /tmp/exportenv/bin/pip install pandas pyarrow
    /tmp/exportenv/bin/python tests/data/exports/make_exports.py

The versions that wrote the committed files are in versions.txt.
"""

import decimal
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
SPECIES = ["Adelie", "Gentoo", "Chinstrap"]


def penguins(rows: int, start: int = 0) -> pd.DataFrame:
    """A penguins-like frame: two numeric features, a categorical one and the label."""
    return pd.DataFrame(
        {
            "bill_length_mm": [35.0 + (i * 7 % 13) for i in range(start, start + rows)],
            "flipper_length_mm": [180 + (i * 11 % 37) for i in range(start, start + rows)],
            "island": [["Biscoe", "Dream", "Torgersen"][i % 3] for i in range(start, start + rows)],
            "species": [SPECIES[(i * 5 // 3) % 3] for i in range(start, start + rows)],
        }
    )


def write(frame: pd.DataFrame, relative: str, **kwargs) -> None:
    path = HERE / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path, **kwargs)


def success(folder: str) -> None:
    (HERE / folder / "_SUCCESS").write_bytes(b"")


def main() -> None:
    # D7, D4: a Hive layout whose newest partition holds one 0-row file and _SUCCESS.
    write(penguins(24), "empty_newest/dt=2024-01-01/part-0.parquet", index=False)
    success("empty_newest/dt=2024-01-01")
    write(penguins(24).iloc[:0], "empty_newest/dt=2024-01-02/part-0.parquet", index=False)
    success("empty_newest/dt=2024-01-02")

    # D3: pd.concat(...).to_parquet(): a non-unique index, kept as __index_level_0__;
    # and a filtered frame's named index, kept as a column pandas' metadata names.
    write(pd.concat([penguins(12), penguins(12, start=12)]), "index_nonunique/part-0.parquet")
    frame = penguins(36)
    write(frame[frame.flipper_length_mm > 190].rename_axis("row"), "index_named/part-0.parquet")

    # D4: values the type table refuses, each in a folder of its own.
    frame = penguins(24)
    frame["seen_at"] = pd.to_datetime(1_700_000_000_000_000_000 + pd.Series(range(24)) * 1_001)
    write(frame, "refuse_ns_timestamp/part-0.parquet", index=False)
    table = pa.Table.from_pandas(penguins(24), preserve_index=False)
    table = table.append_column(
        "counter", pa.array([2**63 + i for i in range(24)], pa.uint64())
    )
    write_table(table, "refuse_uint64/part-0.parquet")
    table = pa.Table.from_pandas(penguins(24), preserve_index=False)
    table = table.append_column(
        "account",
        pa.array([decimal.Decimal(10**24 + i) for i in range(24)], pa.decimal128(25, 0)),
    )
    write_table(table, "refuse_decimal/part-0.parquet")

    # D6: a string column of "", "x" and nulls.
    frame = penguins(24)
    frame["note"] = pd.array(([""] * 4 + ["x"] * 3 + [None]) * 3, dtype="string")
    # Item 8: a list column, which the draft called "always empty".
    frame["tags"] = [["a", "b"][: i % 3] for i in range(24)]
    write(frame, "empty_strings/part-0.parquet", index=False)

    # D2: a struct column no feature can hold.
    frame = penguins(24)
    frame["trip"] = [{"start": i, "end": i + 3} for i in range(24)]
    write(frame, "struct_column/part-0.parquet", index=False)

    # D5: CSV keys whose leading zeros make them distinct.
    frame = penguins(4)
    frame.insert(0, "penguin_id", pd.array(["07", "007", "7", "00042"], dtype="string"))
    path = HERE / "csv_keys" / "data.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)

    (HERE / "versions.txt").write_text(f"pandas {pd.__version__}\npyarrow {pa.__version__}\n")


def write_table(table: pa.Table, relative: str) -> None:
    path = HERE / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


if __name__ == "__main__":
    main()
