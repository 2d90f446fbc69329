"""The curated data schema, shipped with the package so an installed image has it too."""

from __future__ import annotations

from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parent
SCHEMA_FILE = SCHEMA_DIR / "schema.pbtxt"
