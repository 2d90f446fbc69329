"""Writes float16_columns.parquet: a float16 column as a current pandas and pyarrow write it.

pyarrow 15 and later store float16 with Parquet's FLOAT16 logical type
(parquet-format 2.10.0, parquet.thrift: `15: Float16Type FLOAT16`), which the
project's pyarrow 10 (TFX pins it) does not know. The file is committed, so
the tests need neither; to write it again, in a throwaway environment:

    python3 -m venv /tmp/typesenv && /tmp/typesenv/bin/pip install pyarrow pandas
    /tmp/typesenv/bin/python tests/data/exports/float16_columns.py

tests/test_parquet_to_examples.py reads it.
"""

from pathlib import Path

import numpy as np
import pandas as pd

frame = pd.DataFrame(
    {
        "species": ["Adelie", "Gentoo", "Chinstrap"],
        "bill_depth_mm": np.array([18.7, 13.2, np.nan], dtype=np.float16),
        "body_mass_g": [3750, 4500, 3400],
        # A list of half floats: the column named is the top-level one.
        "wing_spans_m": [np.array([0.5, 0.25], np.float16), None, np.array([], np.float16)],
    }
)
frame.to_parquet(Path(__file__).with_suffix(".parquet"), index=False)
