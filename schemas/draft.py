"""Infers a *draft* schema from CSV data, for a user who swaps in a new dataset.

    python -m schemas.draft --data-root data/my_data --output /tmp/draft_schema.pbtxt

The draft is a starting point, never the schema itself: review it, tighten
domains and presence (see the comments in schemas/schema.pbtxt for what was
curated and why), then copy it over schemas/schema.pbtxt.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import tensorflow_data_validation as tfdv


def infer_draft_schema(data_root: Path):
    csv_files = sorted(data_root.glob("*.csv"))
    if not csv_files:
        raise FileNotFoundError(f"no *.csv files under {data_root}")
    stats = tfdv.generate_statistics_from_csv(data_location=str(data_root / "*.csv"))
    return tfdv.infer_schema(stats, infer_feature_shape=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", type=Path, required=True, help="directory of CSV files")
    parser.add_argument("--output", type=Path, required=True, help="where to write schema.pbtxt")
    args = parser.parse_args(argv)
    schema = infer_draft_schema(args.data_root)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tfdv.write_schema_text(schema, str(args.output))
    print(f"draft schema with {len(schema.feature)} features written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
