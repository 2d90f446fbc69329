"""Batch scoring: model choice, keys, exactness, bad rows, and the exactly-once output."""

from __future__ import annotations

import contextlib
import json
import random
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from components.scoring.output import (
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
from components.serving.served_version import ModelChoiceError, choose_version
from tests.harness import fake_version, served_copy
from tests.scoring_process import score

ROWS = 40


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
    assert (pinned.version, pinned.path, pinned.spec.name) == (
        "3",
        str(tmp_path / "3"),
        "taxi-big-tipper",
    )


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


def test_with_a_rollout_record_the_rolled_out_version_scores_and_a_pin_still_wins(
    tmp_path, taxi_spec
):
    from components.serving.rollout_record import record_rolled_out, rolled_out_record

    serving = tmp_path / "serving"
    for version in ("3", "12", "20"):  # 20: a canary not promoted, or rejected
        fake_version(serving, version, taxi_spec)
    record = rolled_out_record(str(tmp_path / "kserve"))
    with pytest.raises(ModelChoiceError, match=r"no model has been rolled out yet.*model_version"):
        choose_version(str(serving), None, record)
    assert choose_version(str(serving), "3", record).version == "3"  # before any rollout, too
    record_rolled_out(record, "12", str(tmp_path / "kserve" / "12"), "models/taxi")
    assert choose_version(str(serving), None, record).version == "12"
    assert choose_version(str(serving), "3", record).version == "3"
    assert choose_version(str(serving)).version == "20"  # locally: no record, the newest
    record_rolled_out(record, "7", str(tmp_path / "kserve" / "7"), "models/taxi")
    with pytest.raises(
        ModelChoiceError, match=r"rolled-out version 7, and .* holds no complete version 7"
    ):
        choose_version(str(serving), None, record)
    record_rolled_out(record, None, "", "models/taxi")  # a first version that failed
    with pytest.raises(ModelChoiceError, match="no model has been rolled out yet"):
        choose_version(str(serving), None, record)


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
    with pytest.raises(
        ScoredOutputError, match=r"2 of 1000 rows \(0\.20%\).*most common: bad \(2\)"
    ):
        check_error_share(2, 998, 0.001, {"bad": 2})


# --- Scoring with a served model (the small trained model: slow) --------------------------


def keyed_examples(rows, keys: dict[str, list]) -> list[bytes]:
    """Taxi rows as ExampleGen encodes them, each with its key columns added (extra columns)."""
    import tensorflow as tf

    from tests.conftest import load_schema
    from tests.raw_examples import serialize_rows

    serialized = []
    for i, raw in enumerate(serialize_rows(rows, load_schema(), drop=("tips",))):
        example = tf.train.Example.FromString(raw)
        for key, values in keys.items():
            value = values[i]
            feature = example.features.feature[key]
            if isinstance(value, int):
                feature.int64_list.value.append(value)
            elif value is not None:
                feature.bytes_list.value.append(value.encode())
        serialized.append(example.SerializeToString())
    return serialized


def write_examples(path: Path, examples: list[bytes]) -> str:
    import tensorflow as tf

    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for example in examples:
            writer.write(example)
    return str(path)


@pytest.fixture(scope="module")
def taxi_rows():
    from tests.conftest import read_taxi_rows

    return read_taxi_rows(limit=ROWS)[1]


def test_each_score_equals_serving_default_on_the_same_batches_in_random_order(
    tmp_path, small_model_base, taxi_rows
):
    import numpy as np
    import pandas as pd
    import tensorflow as tf

    order = list(range(ROWS))
    random.Random(53).shuffle(order)
    ids = [f"trip-{i}" for i in range(ROWS)]
    examples = keyed_examples([taxi_rows[i] for i in order], {"trip_id": [ids[i] for i in order]})
    files = [
        write_examples(tmp_path / "in" / "a.gz", examples[:25]),
        write_examples(tmp_path / "in" / "b.gz", examples[25:]),
    ]
    serving = served_copy(small_model_base, tmp_path)
    result = score(files, tmp_path / "out", serving)
    assert (result.status, result.manifest.rows, result.manifest.errors) == ("written", ROWS, 0)
    scores = pd.read_parquet(result.partition).set_index("trip_id")
    assert list(scores.columns) == [
        "probability_ordinary_tip",
        "probability_big_tip",
        "class",
        "model_version",
    ]
    signature = tf.saved_model.load(str(serving / "1")).signatures["serving_default"]
    # The scorer's batches: each file in its own order, 16 rows at a time (`read_batches`);
    # TensorFlow's CPU kernels may round a row's sums differently in another batch.
    batches = [examples[0:16], examples[16:25], examples[25:40]]
    big_tip = np.concatenate(
        [signature(examples=tf.constant(b))["probabilities"].numpy()[:, 0] for b in batches]
    )
    expected = pd.DataFrame({"probability_big_tip": big_tip}, index=[ids[i] for i in order]).loc[
        scores.index
    ]
    np.testing.assert_array_equal(
        scores["probability_big_tip"].to_numpy(), expected["probability_big_tip"].to_numpy()
    )
    np.testing.assert_array_equal(
        scores["probability_ordinary_tip"].to_numpy(),
        (1 - expected["probability_big_tip"]).to_numpy(np.float32),
    )
    assert list(scores["class"]) == [
        "big_tip" if p > 0.5 else "ordinary_tip" for p in expected["probability_big_tip"]
    ]
    assert set(scores["model_version"]) == {"1"}
    assert sorted(scores.index) == sorted(ids)


def test_rerun_does_nothing_a_new_version_gets_its_own_partition(
    tmp_path, small_model_base, taxi_rows
):
    import pandas as pd

    examples = keyed_examples(taxi_rows[:5], {"trip_id": list(range(5))})
    files = [write_examples(tmp_path / "in" / "a.gz", examples)]
    serving = served_copy(small_model_base, tmp_path, versions=("1", "2"))
    first = score(files, tmp_path / "out", serving, "1", output_format="csv")
    # A killed attempt at the partition; a run that finds the partition complete removes it.
    killed = tmp_path / "out" / TEMPORARY_DIR / "span=3" / "version=1" / "killed"
    killed.mkdir(parents=True)
    (killed / "part-00000-of-00001.csv").write_text("trip_id\n0\n")
    again = score(files, tmp_path / "out", serving, "1", output_format="csv")
    assert (first.status, again.status) == ("written", "unchanged")
    assert not (tmp_path / "out" / TEMPORARY_DIR).exists()
    assert again.manifest == first.manifest
    newer = score(files, tmp_path / "out", serving)
    assert newer.status == "written"
    assert newer.partition != first.partition and read_manifest(first.partition) is not None
    csv_scores = pd.concat(pd.read_csv(p) for p in sorted(Path(first.partition).glob("part-*.csv")))
    assert sorted(csv_scores["trip_id"]) == list(range(5))
    assert set(csv_scores["model_version"]) == {1}
    changed = score(files, tmp_path / "out", serving, "1", fingerprint="f2", output_format="csv")
    assert changed.status == "replaced"
    assert len(list(Path(first.partition).glob("part-*.csv"))) == len(first.manifest.files) - 1
    assert not (tmp_path / "out" / TEMPORARY_DIR).exists()


def test_bad_rows_go_to_the_errors_file_and_too_many_fail_leaving_nothing_complete(
    tmp_path, small_model_base, taxi_rows
):
    import pandas as pd
    import tensorflow as tf

    examples = keyed_examples(taxi_rows[:10], {"trip_id": [f"t{i}" for i in range(9)] + [None]})
    # A type the model cannot take: a fare as text.
    wrong_type = tf.train.Example.FromString(examples[4])
    wrong_type.features.feature["fare"].Clear()
    wrong_type.features.feature["fare"].bytes_list.value.append(b"12.5")
    examples[4] = wrong_type.SerializeToString()
    files = [write_examples(tmp_path / "in" / "a.gz", examples)]
    serving = served_copy(small_model_base, tmp_path)
    with pytest.raises(ScoredOutputError, match=r"2 of 10 rows \(20\.00%\) could not be scored"):
        score(files, tmp_path / "out", serving)
    assert not list((tmp_path / "out").glob(f"span=*/version=*/{SUCCESS_FILE}"))
    assert not (tmp_path / "out" / "span=3").exists()

    result = score(files, tmp_path / "out", serving, max_error_share=0.25)
    assert (result.manifest.rows, result.manifest.errors) == (8, 2)
    errors = pd.read_csv(Path(result.partition) / ERRORS_FILE, keep_default_na=False)
    by_key = dict(zip(errors["trip_id"], errors["reason"], strict=True))
    assert set(by_key) == {"t4", ""}
    assert by_key["t4"].startswith("the model refused the row")
    assert by_key[""] == "key 'trip_id' has 0 values, not one"


def test_duplicate_keys_are_refused_unless_allowed_and_keys_are_never_model_inputs(
    tmp_path, small_model_base, taxi_rows
):
    from components.scoring.executor import ScoringInputError

    examples = keyed_examples(taxi_rows[:4], {"trip_id": [7, 8, 7, 9]})
    files = [write_examples(tmp_path / "in" / "a.gz", examples)]
    serving = served_copy(small_model_base, tmp_path)
    with pytest.raises(
        ScoredOutputError, match=r"1 row\(s\) repeat a key \(trip_id\), e.g. \(trip_id=7\)"
    ):
        score(files, tmp_path / "out", serving)
    assert score(files, tmp_path / "out", serving, allow_duplicate_keys=True).manifest.rows == 4
    with pytest.raises(
        ScoringInputError, match=r"keys: \['fare'\] are features of the served model"
    ):
        score(files, tmp_path / "out2", serving, keys=("fare",))
    with pytest.raises(ScoringInputError, match="keys: the data has no column 'ride'"):
        score(files, tmp_path / "out2", serving, keys=("ride",))


# --- The scoring DAG, through the runner --------------------------------------------------


def test_score_runner_scores_new_data_without_the_label_with_extra_columns(
    tmp_path, small_model_base, capsys
):
    import pandas as pd

    import score_runner
    from tests.conftest import read_taxi_rows, write_csv

    header, rows = read_taxi_rows(limit=230)
    rows = rows[200:]  # the sample's first rows have no drop-off at all, which the schema refuses
    # Keys are read as written (issue 61, D5): leading zeros make distinct keys.
    ids = ["07", "007", "7", "00042"] + [str(1000 + i) for i in range(4, len(rows))]
    for i, row in enumerate(rows):
        row.update(trip_id=ids[i], note=f"extra {i}")
    columns = [c for c in header if c != "tips"] + ["trip_id", "note"]
    write_csv(tmp_path / "new" / "data.csv", columns, rows)
    serving = served_copy(small_model_base, tmp_path)
    argv = [
        "--data-root",
        str(tmp_path / "new"),
        "--serving-dir",
        str(serving),
        "--output-dir",
        str(tmp_path / "scores"),
        "--key",
        "trip_id",
    ]
    assert score_runner.main(argv) == 0
    out = capsys.readouterr().out
    assert "Scores written: 30 rows, 0 errors, span 0, model version 1" in out
    partition = tmp_path / "scores" / "span=0" / "version=1"
    scores = pd.read_parquet(partition)
    assert sorted(scores["trip_id"]) == sorted(ids)
    assert set(scores["model_version"]) == {"1"}
    manifest = json.loads((partition / SUCCESS_FILE).read_text())
    assert (manifest["rows"], manifest["errors"], manifest["model_version"]) == (30, 0, "1")
    assert manifest["input_fingerprint"] and len(manifest["model_digest"]) == 64

    assert score_runner.main(argv) == 0
    assert "Scores unchanged (already scored: same input, same model)" in capsys.readouterr().out
    assert len(pd.read_parquet(partition)) == 30

    assert score_runner.main([*argv[:-2], "--key", "fare"]) == 1
    assert "keys: ['fare'] are features of the served model" in capsys.readouterr().err
    assert score_runner.main([*argv[:-1], "ride"]) == 1
    assert "has no key column 'ride'" in capsys.readouterr().err
    empty = tmp_path / "empty_serving"
    empty.mkdir()
    assert score_runner.main([*argv[:2], "--serving-dir", str(empty), *argv[4:]]) == 1
    assert "no model is served under" in capsys.readouterr().err


def taxi_parquet(path: Path, rows: list[dict], **extra) -> Path:
    """Taxi rows as pandas and the installed pyarrow write them: each column of the
    schema's type (an int column with a gap as pandas' Int64), plus `extra` columns."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from schemas import DEFAULT_SCHEMA_DIR, column_types, read_schema

    types = column_types(read_schema(Path(DEFAULT_SCHEMA_DIR) / "schema.pbtxt"))
    frame = pd.DataFrame(rows)
    for name, value_type in types.items():
        if name in frame:
            cells = frame[name].replace("", None)
            frame[name] = {
                "int": lambda c: pd.to_numeric(c).astype("Int64"),
                "float": lambda c: pd.to_numeric(c).astype("float64"),
            }.get(value_type, lambda c: c.astype("string"))(cells)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for name, column in extra.items():
        table = table.append_column(name, column)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, version="2.6")  # keeps nanoseconds
    return path


def test_extra_columns_no_feature_can_take_never_stop_a_scoring_and_change_no_score(
    tmp_path, small_model_base, capsys
):
    """Issue 71: a uint64 above 2^63-1, a timestamp[ns] with sub-microsecond digits, a
    decimal128(25, 0) beyond int64 and a float16 (Parquet's FLOAT16, which pyarrow 10
    cannot parse), none of them the model's: the scoring reads only the model's columns
    and its keys, and each score is the one without them."""
    import decimal

    import pandas as pd
    import pyarrow as pa

    import score_runner
    from tests.conftest import read_taxi_rows
    from tests.parquet_logical_types import FLOAT16, half_floats, with_logical_type

    _, rows = read_taxi_rows(limit=230)
    rows = [{**row, "trip_id": str(1000 + i)} for i, row in enumerate(rows[200:])]
    for row in rows:
        del row["tips"]
    n = len(rows)
    extra = {
        "big_counter": pa.array([2**63 + i for i in range(n)], pa.uint64()),
        "seen_at": pa.array([1_700_000_000_000_000_001 + i for i in range(n)], pa.timestamp("ns")),
        "account": pa.array([decimal.Decimal(10**24 + i) for i in range(n)], pa.decimal128(25, 0)),
        "tip_share": half_floats([i / 64 for i in range(n)]),
    }
    serving = served_copy(small_model_base, tmp_path)
    scored = {}
    for name, columns in (("plain", {}), ("extra", extra)):
        written = taxi_parquet(tmp_path / name / "part-0.parquet", rows, **columns)
        if columns:
            with_logical_type(written, "tip_share", FLOAT16)
        argv = ["--data-root", str(tmp_path / name), "--serving-dir", str(serving)]
        argv += ["--output-dir", str(tmp_path / f"scores-{name}"), "--key", "trip_id"]
        assert score_runner.main(argv) == 0, capsys.readouterr().err
        assert f"Scores written: {n} rows, 0 errors" in capsys.readouterr().out
        frame = pd.read_parquet(tmp_path / f"scores-{name}" / "span=0" / "version=1")
        scored[name] = frame.sort_values("trip_id").reset_index(drop=True)
    assert set(scored["extra"].columns) == set(scored["plain"].columns)
    assert scored["extra"].equals(scored["plain"])


KILLED_COMMIT = """
import os
import signal
import sys
from pathlib import Path

from tfx.dsl.io import fileio

from components.scoring import output as scored_output
from tests.scoring_process import score

example_file, out, serving, fingerprint, point = sys.argv[1:]
partition = scored_output.partition_dir(out, 3, "1")
real_rename, real_rmtree = fileio.rename, fileio.rmtree


# tfx's fileio as the commit calls it (scored_output.commit imports it when it writes),
# this process killed at the commit's step `point`.
def rename(src, dst, *args, **kwargs):
    real_rename(src, dst, *args, **kwargs)
    if point == "renamed" and dst == partition:
        os.kill(os.getpid(), signal.SIGKILL)


def rmtree(path):
    if point == "removing" and path == partition:
        part = next(n for n in sorted(fileio.listdir(path)) if n.startswith("part"))
        fileio.remove(os.path.join(path, part))
        os.kill(os.getpid(), signal.SIGKILL)
    real_rmtree(path)


fileio.rename, fileio.rmtree = rename, rmtree
score([example_file], Path(out), Path(serving), fingerprint=fingerprint)
"""

S3_SCORING = """
import sys
from pathlib import Path

from pipeline.object_store import exit_process, register_filesystems

register_filesystems()
from tests.scoring_process import score

example_file, out, serving, fingerprint = sys.argv[1:]
score([example_file], out, Path(serving), fingerprint=fingerprint)
exit_process(0)
"""

KILLED_RUN = """
import sys
from pathlib import Path
from tests.scoring_process import score
score(sys.argv[1:2], Path(sys.argv[2]), Path(sys.argv[3]), batch_size=1)
"""


def test_a_run_killed_mid_write_leaves_nothing_complete_and_a_rerun_writes_once(
    tmp_path, small_model_base, taxi_rows
):
    import os
    import signal
    import subprocess
    import sys
    import time

    import pandas as pd

    from tests.conftest import REPO_ROOT

    examples = keyed_examples(taxi_rows, {"trip_id": list(range(ROWS))})
    files = [write_examples(tmp_path / "in" / "a.gz", examples)]
    serving = served_copy(small_model_base, tmp_path)
    out = tmp_path / "out"
    # One row per call: the write lasts long enough to be killed in the middle of it.
    run = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, files[0], str(out), str(serving)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    deadline = time.monotonic() + 120
    # _temporary/span=3/version=1/<attempt>/<Beam's temporary folder>
    while not list(out.glob(f"{TEMPORARY_DIR}/*/*/*/*")) and run.poll() is None:
        assert time.monotonic() < deadline, "the scoring run never started writing"
        time.sleep(0.02)
    run.send_signal(signal.SIGKILL)
    assert run.wait() == -signal.SIGKILL, "the run ended before it was killed"
    (killed,) = (out / TEMPORARY_DIR / "span=3" / "version=1").iterdir()
    assert not list(out.rglob(SUCCESS_FILE)) and not list(out.glob("span=*"))
    # Another partition's attempt, which another run may still be writing.
    other = out / TEMPORARY_DIR / "span=4" / "version=1" / "running"
    other.mkdir(parents=True)
    result = score(files, out, serving)
    assert result.status == "written"
    assert sorted(pd.read_parquet(result.partition)["trip_id"]) == list(range(ROWS))
    # The commit removed the killed attempt at its partition, and only that.
    assert not killed.exists() and not killed.parent.exists()
    assert sorted(p.relative_to(out) for p in (out / TEMPORARY_DIR).rglob("*")) == [
        Path(TEMPORARY_DIR, "span=4"),
        Path(TEMPORARY_DIR, "span=4", "version=1"),
        Path(TEMPORARY_DIR, "span=4", "version=1", "running"),
    ]


# A span's keys, then the keys of the same span rewritten (other rows).
OLD_IDS = list(range(10))
NEW_IDS = list(range(100, 110))


def old_span(directory: Path, taxi_rows) -> str:
    """The span's examples file: taxi rows 0-9, keys OLD_IDS."""
    examples = keyed_examples(taxi_rows[:10], {"trip_id": OLD_IDS})
    return write_examples(directory / "old" / "a.gz", examples)


def rewritten_span(directory: Path, taxi_rows) -> str:
    """The same span rewritten: taxi rows 10-19, keys NEW_IDS."""
    examples = keyed_examples(taxi_rows[10:20], {"trip_id": NEW_IDS})
    return write_examples(directory / "new" / "a.gz", examples)


def committed_keys(out: Path) -> dict[str, list]:
    """What a reader that honours `_SUCCESS` sees of the output directory: each partition
    with a manifest, read whole (every part file in it), as {partition: sorted keys}."""
    import pandas as pd

    return {
        str(success.parent.relative_to(out)): sorted(pd.read_parquet(success.parent)["trip_id"])
        for success in out.glob(f"span=*/version=*/{SUCCESS_FILE}")
    }


@pytest.fixture(scope="module")
def old_partition(tmp_path_factory, small_model_base, taxi_rows) -> Path:
    """An output directory holding the old span's scores, committed. Each kill point's
    test replaces them in a copy: the same state, scored once."""
    root = tmp_path_factory.mktemp("old_partition")
    serving = served_copy(small_model_base, root)
    out = root / "out"
    assert score([old_span(root, taxi_rows)], out, serving, fingerprint="old").status == "written"
    return out


# The commit's steps where KILLED_COMMIT kills the run (SIGKILL): "renamed", the attempt
# moved into place and its `_SUCCESS` not yet written; "removing", the replaced
# partition's `_SUCCESS` removed, one of its part files removed, the rest still there.
@pytest.mark.parametrize("point", ["renamed", "removing"])
def test_a_commit_killed_at_each_step_leaves_the_old_partition_or_nothing_then_each_key_once(
    tmp_path, small_model_base, taxi_rows, old_partition, point
):
    import os
    import signal
    import subprocess
    import sys

    import pandas as pd

    from tests.conftest import REPO_ROOT, copy_tree

    new = rewritten_span(tmp_path, taxi_rows)
    serving = served_copy(small_model_base, tmp_path)
    out = copy_tree(old_partition, tmp_path / "out")
    assert committed_keys(out) == {"span=3/version=1": OLD_IDS}
    partition = Path(partition_dir(str(out), 3, "1"))

    # The span rewritten: a run replaces the partition, killed at `point`.
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_COMMIT, new, str(out), str(serving), "new", point],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert killed.returncode == -signal.SIGKILL, "the run ended before it was killed"
    left = sorted(p.name for p in partition.iterdir())
    if point == "renamed":
        assert left == [ERRORS_FILE, "part-00000-of-00001.parquet"]
        assert sorted(pd.read_parquet(partition)["trip_id"]) == NEW_IDS  # the new scores
    else:
        assert left == [ERRORS_FILE]  # the old part file gone, its errors file not yet
    # The old complete partition or nothing: never a mix, never the new one unannounced.
    assert committed_keys(out) == {}

    rerun = score([new], out, serving, fingerprint="new")
    assert rerun.status == "replaced"
    assert committed_keys(out) == {"span=3/version=1": NEW_IDS}
    # The whole directory, read as a dataset: each key once, nothing left under _temporary/.
    assert sorted(pd.read_parquet(out)["trip_id"]) == NEW_IDS
    assert not (out / TEMPORARY_DIR).exists()


Requests = list[tuple[str, str]]


@contextlib.contextmanager
def store_kills_at(kill: Callable[[Requests], bool]) -> Iterator[dict]:
    """The S3 stand-in (moto, in this process) kills `state["process"]` (SIGKILL) at the
    first request where `kill(requests)` holds, before the store carries it out.
    `requests`: every copy and delete the store saw, in order, the current one last, as
    ("copy", destination key) or ("delete", key)."""
    import os

    from moto.s3.models import S3Backend

    state: dict = {"process": None, "seen": [], "killed": None}
    real_copy, real_delete = S3Backend.copy_object, S3Backend.delete_object

    def stop(operation: str, key: str) -> None:
        state["seen"].append((operation, key))
        if state["process"] is not None and state["killed"] is None and kill(state["seen"]):
            state["killed"] = (operation, key)
            os.kill(state["process"].pid, signal.SIGKILL)
            state["process"].wait()
            raise ConnectionAbortedError(f"killed before {operation} {key}")

    def copy_object(self, src_key, dest_bucket_name, dest_key_name, *args, **kwargs):
        stop("copy", dest_key_name)
        return real_copy(self, src_key, dest_bucket_name, dest_key_name, *args, **kwargs)

    def delete_object(self, bucket_name, key_name, *args, **kwargs):
        stop("delete", key_name)
        return real_delete(self, bucket_name, key_name, *args, **kwargs)

    S3Backend.copy_object, S3Backend.delete_object = copy_object, delete_object
    try:
        yield state
    finally:
        S3Backend.copy_object, S3Backend.delete_object = real_copy, real_delete


S3_PARTITION = "scores/span=3/version=1/"


def _moving_in(requests: Requests) -> bool:
    """The attempt's first object copied into the partition, its delete from the attempt
    next (S3's rename is a copy and a delete, object by object)."""
    (*earlier, (operation, key)) = requests
    copied = any(op == "copy" and k.startswith(S3_PARTITION) for op, k in earlier)
    return copied and operation == "delete" and key.startswith("scores/_temporary/")


def _removing_the_last(requests: Requests) -> bool:
    """The replaced partition's last object next, the other two (of `_SUCCESS`, the
    errors file and one part file) deleted."""
    deletes = [k for op, k in requests if op == "delete" and k.startswith(S3_PARTITION)]
    return requests[-1][0] == "delete" and len(deletes) == 3


# Where the S3 commit is killed: the store's request that would have been next.
S3_KILL_POINTS = {
    "removing": _removing_the_last,
    "between copy and delete": _moving_in,
    # The manifest copied from its temporary name to `_SUCCESS`, the temporary not deleted.
    "manifest copied": lambda requests: (
        requests[-1] == ("delete", f"{S3_PARTITION}{SUCCESS_FILE}.tmp")
    ),
}


S3_OUT = "s3://pipelines/scores"


def s3_scoring(store, home: Path, serving: Path, examples: str, fingerprint: str):
    """S3_SCORING in a process of its own, writing under S3_OUT on `store`."""
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    return subprocess.Popen(
        [sys.executable, "-c", S3_SCORING, examples, S3_OUT, str(serving), fingerprint],
        cwd=REPO_ROOT,
        env={**store.shell_environment(home), "PYTHONPATH": str(REPO_ROOT)},
    )


@pytest.fixture(scope="module")
def s3_old_partition(tmp_path_factory, small_model_base, taxi_rows) -> dict[str, bytes]:
    """Every object a scoring run of the old span leaves under S3_OUT, as {key: bytes}.
    Each kill point's test puts them into its own store: the same state, scored once."""
    from tests.s3_standin import s3_standin

    root = tmp_path_factory.mktemp("s3_old_partition")
    serving = served_copy(small_model_base, root)
    with s3_standin() as store:
        assert s3_scoring(store, root, serving, old_span(root, taxi_rows), "old").wait() == 0
        client = store.client()
        return {
            key: client.get_object(Bucket=store.bucket, Key=key)["Body"].read()
            for key in store.keys(S3_OUT)
        }


@pytest.mark.parametrize("point", sorted(S3_KILL_POINTS))
def test_on_s3_a_commit_killed_between_copy_and_delete_leaves_a_whole_partition_or_nothing(
    tmp_path, small_model_base, taxi_rows, s3_old_partition, point
):
    import pandas as pd

    from tests.s3_standin import s3_standin

    new = rewritten_span(tmp_path, taxi_rows)
    serving = served_copy(small_model_base, tmp_path)
    out = S3_OUT

    with s3_standin() as store:

        def scoring(examples: str, fingerprint: str):
            return s3_scoring(store, tmp_path, serving, examples, fingerprint)

        def committed() -> dict[str, list]:
            """What a reader that honours `_SUCCESS` sees (committed_keys, on the store)."""
            local = store.download(out, tmp_path / f"seen-{len(list(tmp_path.glob('seen-*')))}")
            return committed_keys(local)

        client = store.client()
        for key, body in s3_old_partition.items():
            client.put_object(Bucket=store.bucket, Key=key, Body=body)
        assert committed() == {"span=3/version=1": OLD_IDS}
        with store_kills_at(S3_KILL_POINTS[point]) as state:
            state["process"] = scoring(new, "new")
            state["process"].wait()
        assert state["killed"], f"never killed; the store saw {state['seen']}"
        assert state["process"].returncode == -signal.SIGKILL
        if point == "between copy and delete":
            # The object is in both places: copied into the partition, still in the attempt.
            _, key = state["killed"]
            keys = store.keys(out)
            assert key in keys and S3_PARTITION + key.rsplit("/", 1)[1] in keys
        if point == "removing":
            # The old partition's last object is all that is left of it.
            assert [k for k in store.keys(out) if k.startswith(S3_PARTITION)] == [
                state["killed"][1]
            ]
        seen = committed()
        if point == "manifest copied":
            # `_SUCCESS` is in place with every file it lists: the new partition, whole.
            assert seen == {"span=3/version=1": NEW_IDS}
        else:
            # The old partition's `_SUCCESS` went first: nothing, never a mix.
            assert seen == {}

        assert scoring(new, "new").wait() == 0
        assert committed() == {"span=3/version=1": NEW_IDS}
        # The whole prefix read as a dataset: each key once; no attempt left.
        local = store.download(out, tmp_path / "after")
        assert sorted(pd.read_parquet(local)["trip_id"]) == NEW_IDS
        assert not [k for k in store.keys(out) if "/_temporary/" in f"/{k}"]


# --- Settings, keys in the dataset spec, the serving gate (fast) -------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"keys": ()}, "keys: name at least one id column"),
        ({"keys": ("a", "a")}, r"keys: \['a'\] named more than once"),
        ({"keys": ("a",), "output_format": "json"}, "format: 'json' is not one of parquet, csv"),
        ({"keys": ("a",), "max_error_share": 2.0}, "max_error_share: 2.0 is not a share"),
        ({"keys": ("a",), "batch_size": 0}, "batch_size: 0 is not a positive integer"),
    ],
)
def test_scoring_settings_refuse_bad_values_naming_the_field(settings, message):
    from components.scoring.executor import ScoringInputError, ScoringSettings

    with pytest.raises(ScoringInputError, match=message):
        ScoringSettings(**settings)


def test_keys_in_the_dataset_spec_are_read_and_checked_naming_the_field(taxi_spec):
    import yaml

    from contract.dataset.error import DatasetSpecError
    from contract.dataset.parse import parse_spec
    from schemas import load_schema_dir

    values = yaml.safe_load(load_schema_dir().spec_file.read_text())
    assert parse_spec({**values, "keys": ["trip_id", "day"]}).keys == ("trip_id", "day")
    assert "keys" not in parse_spec({**values, "keys": ["trip_id"]}).to_dict()
    for keys, message in (
        (["trip_id", "fare"], r"keys\[1\]: 'fare' is a feature"),
        (["tips"], r"keys\[0\]: 'tips' is the label"),
        (["a", "a"], r"keys\[1\]: 'a' is named twice"),
        ("trip_id", "keys"),
    ):
        with pytest.raises(DatasetSpecError, match=message):
            parse_spec({**values, "keys": keys})


def test_the_serving_gate_lets_the_label_be_absent_and_new_columns_in_but_nothing_else():
    import pandas as pd
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import schema_pb2

    from components.gates.data_validation.executor import DataValidationError, check_data
    from components.gates.serving_data.executor import serving_anomalies, serving_schema

    schema = schema_pb2.Schema()
    for name, kind in (("tips", schema_pb2.FLOAT), ("fare", schema_pb2.FLOAT)):
        feature = schema.feature.add(name=name, type=kind)
        feature.presence.min_fraction = 1.0
        feature.float_domain.min = 0.0
    # A schema without environments gets them: only the label's source leaves SERVING.
    assert list(serving_schema(schema, ["tips"]).feature[0].not_in_environment) == ["SERVING"]
    new = tfdv.generate_statistics_from_dataframe(
        pd.DataFrame({"fare": [1.0, 2.5], "trip_id": ["a", "b"]})
    )
    assert not serving_anomalies(new, schema, ["tips"]).anomaly_info
    # Without the SERVING environment the absent label is an anomaly, as in ExampleValidator.
    assert "tips" in tfdv.validate_statistics(new, schema).anomaly_info
    bad = tfdv.generate_statistics_from_dataframe(
        pd.DataFrame({"fare": [-1.0, 2.5], "trip_id": ["a", "b"]})
    )
    with pytest.raises(DataValidationError, match="feature 'fare'"):
        check_data({"single": serving_anomalies(bad, schema, ["tips"])}, {"single": 2})


def test_the_scoring_dag_is_its_declared_steps_with_the_gate_before_the_scorer(tmp_path, taxi_spec):
    from components.scoring.executor import ScoringSettings
    from pipeline.scoring_pipeline import create_scoring_pipeline
    from pipeline.steps import BATCH_SCORER, SCORING_STEPS, SERVING_GATE

    def build(**changes):
        return create_scoring_pipeline(
            **{
                "dataset": taxi_spec,
                "pipeline_root": str(tmp_path / "root"),
                "data_root": str(tmp_path / "data"),
                "schema_path": str(tmp_path / "schema.pbtxt"),
                "serving_model_dir": str(tmp_path / "serving"),
                "output_dir": str(tmp_path / "scores"),
                "settings": ScoringSettings(keys=("trip_id",)),
                "model_version": "4",
                **changes,
            }
        )

    pipeline = build()
    by_id = {c.id: c for c in pipeline.components}
    assert set(by_id) == set(SCORING_STEPS.ids)
    for step_id, component in by_id.items():
        assert set(component.outputs) == set(SCORING_STEPS[step_id].outputs), step_id
    scorer = by_id[BATCH_SCORER]
    assert by_id[SERVING_GATE] in scorer.upstream_nodes
    assert scorer.exec_properties["model_version"] == "4"
    assert json.loads(by_id[SERVING_GATE].exec_properties["excluded_columns"]) == ["tips"]
    assert (pipeline.pipeline_info.pipeline_name, pipeline.enable_cache) == (
        "taxi-big-tipper-scoring",
        False,
    )
    with pytest.raises(ValueError, match=r"\['ServingDataGate'\] run no Beam"):
        build(beam_pipeline_args_by_step={SERVING_GATE: ["--runner=FnApiRunner"]})


def test_prediction_columns_per_task(taxi_spec):
    import dataclasses

    import numpy as np

    from components.scoring.executor import prediction_arrays, prediction_columns

    def task(name, classes=()):
        label = dataclasses.replace(taxi_spec.label, task=name, classes=classes)
        return dataclasses.replace(taxi_spec, label=label)

    binary = prediction_arrays(taxi_spec, np.array([[0.25], [0.75]], np.float32))
    assert list(binary) == list(prediction_columns(taxi_spec))
    assert binary["probability_big_tip"].tolist() == [0.25, 0.75]
    assert binary["probability_ordinary_tip"].tolist() == [0.75, 0.25]
    assert binary["class"].tolist() == ["ordinary_tip", "big_tip"]
    three = task("multiclass", ("a", "b", "c"))
    multiclass = prediction_arrays(three, np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]], np.float32))
    assert list(multiclass) == ["probability_a", "probability_b", "probability_c", "class"]
    assert multiclass["class"].tolist() == ["b", "a"]
    assert multiclass["probability_c"].tolist() == np.float32([0.3, 0.3]).tolist()
    regression = prediction_arrays(task("regression"), np.array([[1.5], [-2.0]], np.float32))
    assert {k: v.tolist() for k, v in regression.items()} == {"prediction": [1.5, -2.0]}


# --- The Kubeflow scoring package (compiled, not executed) --------------------------------


def test_the_scoring_package_compiles_as_the_training_package_does(tmp_path):
    import yaml

    from kubeflow import compile as kfp_compile
    from kubeflow import package_settings, spec_completion, tfx_spec
    from kubeflow.settings.fields import SettingsError
    from kubeflow.step_ids import SCORING_REPORT
    from pipeline.steps import BATCH_SCORER, SCORING_STEPS, SERVING_GATE
    from tests.conftest import TEMPLATE_SETTINGS_FILE
    from tests.harness import taxi_schema_dir_copy

    schema_dir = taxi_schema_dir_copy(tmp_path)
    settings = package_settings.load_scoring_settings(TEMPLATE_SETTINGS_FILE)
    spec, platform = kfp_compile.compile_scoring_pipeline(settings, schema_dir)
    tasks = tfx_spec.all_tasks(spec)
    executors = {
        t: spec["deploymentSpec"]["executors"][label]
        for t, label in tfx_spec.executor_labels(spec).items()
    }
    assert set(executors) == {*SCORING_STEPS.ids, SCORING_REPORT}
    # The report is the exit handler: it runs however the DAG ended.
    assert tasks[SCORING_REPORT]["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"
    assert "final_status" in tasks[SCORING_REPORT]["inputs"]["parameters"]
    for task_id, executor in executors.items():
        container = executor["container"]
        assert container["command"] == spec_completion.STEP_COMMAND, task_id
        assert container["resources"], task_id
    assert SERVING_GATE in tasks[BATCH_SCORER]["dependentTasks"]
    # Every run reads what is there now: no step comes from cache.
    assert all(not t.get("cachingOptions", {}).get("enableCache") for t in tasks.values())
    # Scoring only: retried by default (its commit makes that safe); the gate never.
    assert tasks[BATCH_SCORER]["retryPolicy"]["maxRetryCount"] == 2
    assert "retryPolicy" not in tasks[SERVING_GATE]
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    assert set(parameters) == {"data_root", "scores_root", "model_version"}
    assert parameters["model_version"]["defaultValue"] == ""
    assert parameters["scores_root"]["defaultValue"].endswith("/scores")
    assert platform["platforms"]["kubernetes"]

    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    raw["retries"]["components"][SERVING_GATE] = {"max_retries": 1}
    (tmp_path / "gate.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SettingsError, match="ServingDataGate must not retry"):
        package_settings.load_scoring_settings(tmp_path / "gate.yaml")
    keyless = taxi_schema_dir_copy(tmp_path / "keyless", keys=False)
    with pytest.raises(SettingsError, match="keys: the scoring package needs the id columns"):
        kfp_compile.compile_scoring_pipeline(settings, keyless)


def scorer_constant(spec, name: str) -> str:
    from kubeflow import tfx_spec
    from pipeline.steps import BATCH_SCORER

    parameters = tfx_spec.all_tasks(spec)[BATCH_SCORER]["inputs"]["parameters"]
    return parameters[name]["runtimeValue"]["constant"]


def test_the_scoring_package_matches_its_golden_and_reads_the_rollout_record(tmp_path):
    """With `serving:`, the scorer (and the report) read the Deploy step's record under
    serving.storage_root; without, no record (the newest pushed version serves)."""
    import yaml

    from components.serving.rollout_record import rolled_out_record
    from kubeflow import compile as kfp_compile
    from kubeflow import package_settings, tfx_spec
    from kubeflow.step_ids import SCORING_REPORT
    from tests.conftest import TEMPLATE_SETTINGS_FILE, golden_path, update_goldens
    from tests.harness import taxi_schema_dir_copy

    schema_dir = taxi_schema_dir_copy(tmp_path)
    plain = package_settings.load_scoring_settings(TEMPLATE_SETTINGS_FILE)
    assert (
        scorer_constant(
            kfp_compile.compile_scoring_pipeline(plain, schema_dir)[0], "rolled_out_record"
        )
        == ""
    )
    raw = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
    raw["serving"] = {"inference_service": "taxi"}
    (tmp_path / "serving.yaml").write_text(yaml.safe_dump(raw))
    settings = package_settings.load_scoring_settings(tmp_path / "serving.yaml")
    spec, platform = kfp_compile.compile_scoring_pipeline(settings, schema_dir)
    record = rolled_out_record(settings.serving.storage_root)
    assert scorer_constant(spec, "rolled_out_record") == record
    report = tfx_spec.all_tasks(spec)[SCORING_REPORT]["inputs"]["parameters"]
    assert report["rolled_out_record"]["runtimeValue"]["constant"] == record

    path = golden_path("kubeflow_scoring_pipeline.yaml")
    if update_goldens():
        kfp_compile.write_package(path, spec, platform)
    ours = tmp_path / "scoring.yaml"
    kfp_compile.write_package(ours, spec, platform)
    documents = [list(yaml.safe_load_all(p.read_text())) for p in (ours, path)]
    for doc in documents:
        doc[0].pop("sdkVersion", None)
    assert documents[0] == documents[1], "rewrite the golden with UPDATE_GOLDENS=1"


def test_score_runner_scores_the_latest_span_into_its_own_folder(tmp_path, small_model_base):
    import pandas as pd

    import score_runner
    from tests.conftest import read_taxi_rows, write_csv
    from tests.harness import taxi_schema_dir_copy

    schema_dir = taxi_schema_dir_copy(tmp_path)
    with (schema_dir / "dataset.yaml").open("a") as f:
        f.write("input: {pattern: 'span-{SPAN}/*.csv'}\n")
    header, rows = read_taxi_rows(limit=220)
    columns = [c for c in header if c != "tips"] + ["trip_id"]
    for span, chunk in ((1, rows[200:210]), (2, rows[210:220])):
        for i, row in enumerate(chunk):
            row["trip_id"] = f"{span}-{i}"
        write_csv(tmp_path / "new" / f"span-{span}" / "data.csv", columns, chunk)
    serving = served_copy(small_model_base, tmp_path)
    argv = ["--data-root", str(tmp_path / "new"), "--serving-dir", str(serving),
            "--output-dir", str(tmp_path / "scores"), "--schema-dir", str(schema_dir)]  # fmt: skip
    assert score_runner.main(argv) == 0
    assert [p.name for p in (tmp_path / "scores").glob("span=*")] == ["span=2"]
    scores = pd.read_parquet(tmp_path / "scores" / "span=2" / "version=1")
    assert sorted(scores["trip_id"]) == [f"2-{i}" for i in range(10)]
