"""Batch scoring: model choice, keys, exactness, bad rows, and the exactly-once output."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from components.scored_output import (
    ERRORS_FILE,
    SUCCESS_FILE,
    TEMPORARY_DIR,
    Manifest,
    ScoredOutputError,
    check_duplicate_keys,
    check_error_share,
    commit,
    partition_dir,
    read_manifest,
)
from components.served_version import ModelChoiceError, choose_version
from trainer.export import SPEC_ASSET

ROWS = 40


def fake_version(base: Path, version: str, spec, *, complete: bool = True) -> Path:
    """A version directory as the Pusher leaves it: the spec asset, saved_model.pb last."""
    directory = base / version
    (directory / SPEC_ASSET).parent.mkdir(parents=True)
    (directory / SPEC_ASSET).write_text(json.dumps(spec.to_dict()))
    if complete:
        (directory / "saved_model.pb").write_bytes(b"")
    return directory


def manifest(**changes) -> Manifest:
    values = dict(
        span=0,
        model_version="1",
        model_digest="d",
        input_fingerprint="f",
        rows=2,
        errors=0,
        keys=("trip_id",),
        format="parquet",
        files=("part-0.parquet", ERRORS_FILE),
    )
    return Manifest(**{**values, **changes})


# --- Which model -------------------------------------------------------------------------


def test_newest_complete_version_is_chosen_and_a_pin_holds(tmp_path, taxi_spec):
    fake_version(tmp_path, "3", taxi_spec)
    fake_version(tmp_path, "12", taxi_spec)
    fake_version(tmp_path, "20", taxi_spec, complete=False)  # still being copied
    assert choose_version(str(tmp_path)).version == "12"
    pinned = choose_version(str(tmp_path), "3")
    assert (pinned.version, pinned.path, pinned.spec.name) == ("3", str(tmp_path / "3"), "taxi-big-tipper")


def test_nothing_served_is_one_clear_error(tmp_path):
    with pytest.raises(ModelChoiceError, match="no model is served under"):
        choose_version(str(tmp_path / "serving_model"))


@pytest.mark.parametrize("pin", ["../other/1", "/elsewhere/1", "20", "1a"])
def test_a_version_outside_the_serving_dir_or_incomplete_is_refused(tmp_path, taxi_spec, pin):
    fake_version(tmp_path / "serving", "12", taxi_spec)
    fake_version(tmp_path / "serving", "20", taxi_spec, complete=False)
    fake_version(tmp_path / "other", "1", taxi_spec)
    with pytest.raises(ModelChoiceError, match="model version"):
        choose_version(str(tmp_path / "serving"), pin)


# --- Output, exactly once ----------------------------------------------------------------


def test_commit_moves_the_partition_in_and_writes_the_manifest_last(tmp_path):
    partition = partition_dir(str(tmp_path), 7, "1")
    temporary = tmp_path / TEMPORARY_DIR / "a"
    temporary.mkdir(parents=True)
    (temporary / "part-0.parquet").write_bytes(b"new")
    assert read_manifest(partition) is None
    commit(str(temporary), partition, manifest(span=7))
    assert sorted(p.name for p in Path(partition).iterdir()) == [SUCCESS_FILE, "part-0.parquet"]
    assert read_manifest(partition) == manifest(span=7)
    assert not temporary.exists()


def test_commit_replaces_an_old_or_incomplete_partition_whole(tmp_path):
    partition = Path(partition_dir(str(tmp_path), 0, "1"))
    partition.mkdir(parents=True)
    (partition / "part-1.parquet").write_bytes(b"old, left by a killed run")
    temporary = tmp_path / TEMPORARY_DIR / "b"
    temporary.mkdir(parents=True)
    (temporary / "part-0.parquet").write_bytes(b"new")
    commit(str(temporary), str(partition), manifest(input_fingerprint="g"))
    assert sorted(p.name for p in partition.iterdir()) == [SUCCESS_FILE, "part-0.parquet"]
    assert read_manifest(str(partition)).input_fingerprint == "g"


def test_a_manifest_is_the_same_scores_only_for_the_same_input_model_and_output():
    assert manifest().same_scores(manifest(rows=5))
    for change in ({"input_fingerprint": "g"}, {"model_digest": "e"}, {"format": "csv"}):
        assert not manifest().same_scores(manifest(**change)), change


def test_duplicate_keys_are_refused_listing_the_first_few():
    rows = [(1, "a"), (2, "a"), (1, "a"), (3, "b"), (2, "a"), (1, "a")]
    with pytest.raises(ScoredOutputError, match=r"3 row\(s\) repeat a key") as err:
        check_duplicate_keys(("id", "zone"), rows)
    assert "(id=1, zone='a'), (id=2, zone='a')" in str(err.value)
    check_duplicate_keys(("id", "zone"), [(1, "a"), (1, "b")])


def test_the_error_share_fails_only_over_the_limit():
    check_error_share(1, 999, 0.001, {"bad": 1})
    with pytest.raises(ScoredOutputError, match=r"2 of 1000 rows \(0\.20%\).*most common: bad \(2\)"):
        check_error_share(2, 998, 0.001, {"bad": 2})
