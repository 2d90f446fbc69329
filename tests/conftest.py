"""Shared fixtures: the real configuration, shrunk; slices of the real data."""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO_ROOT = Path(__file__).resolve().parents[1]
TAXI_CSV = REPO_ROOT / "data" / "chicago_taxi" / "data.csv"
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return
    skip = pytest.mark.skip(reason="needs a GPU; TensorFlow sees none")
    for item in gpu_items:
        item.add_marker(skip)


def read_taxi_rows(limit: int | None = None) -> tuple[list[str], list[dict[str, str]]]:
    with TAXI_CSV.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = []
        for row in reader:
            rows.append(row)
            if limit is not None and len(rows) >= limit:
                break
        return list(reader.fieldnames or []), rows


def write_csv(path: Path, header: list[str], rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="session")
def taxi_slice(tmp_path_factory) -> Path:
    """A data root holding the first 3,000 rows of the real sample."""
    header, rows = read_taxi_rows(limit=3000)
    root = tmp_path_factory.mktemp("taxi_slice")
    write_csv(root / "data.csv", header, rows)
    return root


@pytest.fixture
def fast_config():
    """The real default configuration, shrunk for tests (habit: never a parallel config)."""
    from pipeline.config import PipelineConfig

    return PipelineConfig(train_steps=60, eval_steps=5).with_runtime(
        per_replica_batch_size=64, accelerator="cpu", shuffle_buffer_size=1000
    )


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / name


def update_goldens() -> bool:
    """Set UPDATE_GOLDENS=1 to rewrite golden files from the current output."""
    return os.environ.get("UPDATE_GOLDENS") == "1"


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
