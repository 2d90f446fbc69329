"""components/serving/push/executor.py, the Pusher's work as its pod runs it
(kubeflow/light_step.py).

tests/test_light_step.py compares whole runs with TFX's entrypoint and TFX's own
Pusher; these check, on the function alone, what a comparison of finished runs
cannot show: a push cut short leaves the served model as it was; the blessing, the
destination and the model's path read as TFX's Pusher reads them; and a push to
S3 (moto's stand-in) writes what a push to a local path writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from components import store_files
from components.serving.push import executor as model_push
from components.serving.rollout_record import record_rolled_out, rolled_out_record
from components.serving.served_version import newest_complete_version
from components.serving.serving_dir import PUSH_RECORD_FILE
from kubeflow.light_step import StepArtifact

# A served version 3 and a candidate unlike it, with the train split's statistics.
TREE = {
    "serving/3/saved_model.pb": b"served",
    "serving/3/variables/variables.index": b"served index",
    "model/Format-Serving/saved_model.pb": b"candidate",
    "model/Format-Serving/variables/variables.index": b"candidate index",
    "statistics/Split-train/FeatureStats.pb": b"statistics",
}


def _write(root: Path, tree: dict[str, bytes]) -> None:
    for relative, data in tree.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)


def _destination(root: str) -> str:
    return json.dumps({"filesystem": {"base_directory": f"{root}/serving"}})


def _push(
    root: str,
    blessing: dict | None,
    statistics: str = "statistics",
    rolled_out_record: str | None = None,
) -> StepArtifact:
    """`push_model` on the tree under `root`, as the light runner hands it its artifacts."""
    pushed = StepArtifact(uri=f"{root}/pushed_model")
    model_push.push_model(
        _destination(root),
        model=StepArtifact(uri=f"{root}/model"),
        pushed_model=pushed,
        model_blessing=None if blessing is None else StepArtifact(uri="b", metadata=blessing),
        training_statistics=StepArtifact(
            uri=f"{root}/{statistics}", metadata={"split_names": '["train"]'}
        ),
        rolled_out_record=rolled_out_record,
    )
    return pushed


def _candidate_pushed_as(root: Path, version: str, by: str) -> None:
    """A version holding the candidate's model, as a Pusher execution at `by` pushed it."""
    _write(root, {f"serving/{version}/variables/variables.index": b"candidate index"})
    _write(
        root, {f"serving/{version}/{PUSH_RECORD_FILE}": json.dumps({"pushed_model": by}).encode()}
    )
    _write(root, {f"serving/{version}/saved_model.pb": b"candidate"})


def test_a_pushed_version_whose_rollout_never_happened_is_handed_to_the_rollout(tmp_path):
    """On Kubeflow with `serving:`, version 7 holds the candidate but KServe serves 3 (the
    Deploy step of the run that pushed 7 was interrupted before the rollout, and rejected
    nothing). The rerun's Pusher records 7 as its push, so the Deploy step after it rolls 7
    out; it writes no second copy. Without the record, 7 is the served version: already
    served, nothing pushed."""
    _write(tmp_path, TREE)
    _candidate_pushed_as(tmp_path, "7", by="an-earlier-run/pushed_model")
    record = rolled_out_record(str(tmp_path / "kserve"))
    record_rolled_out(record, "3", str(tmp_path / "kserve" / "3"), "models/taxi")
    pushed = _push(str(tmp_path), {"blessed": 1.0}, rolled_out_record=record)
    assert pushed.metadata == {
        "pushed": 1.0,
        "pushed_destination": str(tmp_path / "serving" / "7"),
        "pushed_version": "7",
    }
    assert sorted(p.name for p in (tmp_path / "serving").iterdir()) == ["3", "7"]
    assert (tmp_path / "pushed_model" / "saved_model.pb").read_bytes() == b"candidate"
    local = _push(str(tmp_path), {"blessed": 1.0})
    assert local.metadata["pushed"] == 0.0
    assert local.metadata["already_served"] == str(tmp_path / "serving" / "7")


def test_a_candidate_the_rollout_serves_is_not_pushed_again_whatever_was_pushed_after(tmp_path):
    """KServe serves 7, which is the candidate; a later, different version 9 was pushed and
    never rolled out. The candidate already takes traffic: nothing is pushed."""
    _write(tmp_path, TREE)
    _candidate_pushed_as(tmp_path, "7", by="an-earlier-run/pushed_model")
    _write(tmp_path, {"serving/9/saved_model.pb": b"another model"})
    record = rolled_out_record(str(tmp_path / "kserve"))
    record_rolled_out(record, "7", str(tmp_path / "kserve" / "7"), "models/taxi")
    pushed = _push(str(tmp_path), {"blessed": 1.0}, rolled_out_record=record)
    assert pushed.metadata == {"pushed": 0.0, "already_served": str(tmp_path / "serving" / "7")}
    assert sorted(p.name for p in (tmp_path / "serving").iterdir()) == ["3", "7", "9"]


def test_a_push_cut_short_leaves_the_served_model_as_it_was(tmp_path):
    """The model's files go into the new version before anything else and `saved_model.pb`
    last: a push that fails in between (here, its training statistics are missing) leaves
    a version nobody serves, and the PushedModel unmarked."""
    _write(tmp_path, TREE)
    (tmp_path / "statistics" / "Split-train" / "FeatureStats.pb").unlink()
    pushed = StepArtifact(uri=str(tmp_path / "pushed_model"))
    with pytest.raises(FileNotFoundError, match=r"FeatureStats\.pb"):
        model_push.push_model(
            _destination(str(tmp_path)),
            model=StepArtifact(uri=str(tmp_path / "model")),
            pushed_model=pushed,
            model_blessing=StepArtifact(uri="b", metadata={"blessed": 1.0}),
            training_statistics=StepArtifact(
                uri=str(tmp_path / "statistics"), metadata={"split_names": '["train"]'}
            ),
        )
    assert newest_complete_version(str(tmp_path / "serving")) == "3"
    (cut,) = [p for p in (tmp_path / "serving").iterdir() if p.name != "3"]
    assert (cut / "variables" / "variables.index").read_bytes() == b"candidate index"
    assert not (cut / "saved_model.pb").exists()
    assert (tmp_path / "serving" / "3" / "saved_model.pb").read_bytes() == b"served"
    assert pushed.metadata == {}


@pytest.mark.parametrize(
    ("metadata", "blessed"),
    [
        ({"blessed": 1.0}, True),  # the entrypoint's JSON number
        ({"blessed": 1}, True),  # TFX's int custom property
        ({"blessed": 1.5}, True),  # get_int_custom_property cuts a float to an int
        ({"blessed": 0.0}, False),
        ({"blessed": 2}, False),
        ({}, False),  # absent: 0
    ],
)
def test_the_blessing_is_read_as_tfx_s_pusher_reads_it(metadata, blessed):
    """model_utils.py, `is_model_blessed`: `get_int_custom_property('blessed') == 1`."""
    assert model_push.is_blessed(StepArtifact(uri="b", metadata=metadata)) is blessed


def test_a_model_not_blessed_is_not_pushed_and_nothing_is_written(tmp_path):
    _write(tmp_path, TREE)
    pushed = _push(str(tmp_path), {"blessed": 0.0})
    assert pushed.metadata == {"pushed": 0.0}
    assert sorted(p.name for p in (tmp_path / "serving").iterdir()) == ["3"]
    assert not (tmp_path / "pushed_model").exists()


def test_without_a_blessing_the_model_is_pushed(tmp_path):
    """executor.py, lines 97-100: TFX's Pusher pushes without validation, and warns."""
    _write(tmp_path, TREE)
    pushed = _push(str(tmp_path), None)
    assert pushed.metadata["pushed"] == 1.0
    version = Path(pushed.metadata["pushed_destination"])
    assert (version / "saved_model.pb").read_bytes() == b"candidate"
    assert newest_complete_version(str(tmp_path / "serving")) == version.name


def test_a_destination_other_than_a_filesystem_is_refused_once_blessed(tmp_path):
    """Lines 162-164 then 211-213: the blessing is read first, so a model not blessed is
    recorded as not pushed whatever the destination."""
    _write(tmp_path, TREE)
    model = StepArtifact(uri=str(tmp_path / "model"))
    pushed = StepArtifact(uri=str(tmp_path / "pushed_model"))
    blessed = StepArtifact(uri="b", metadata={"blessed": 1.0})
    with pytest.raises(NotImplementedError, match="Invalid push destination None"):
        model_push.push_model("{}", model=model, pushed_model=pushed, model_blessing=blessed)
    not_blessed = StepArtifact(uri="b", metadata={"blessed": 0.0})
    model_push.push_model("{}", model=model, pushed_model=pushed, model_blessing=not_blessed)
    assert pushed.metadata == {"pushed": 0.0}


def test_an_estimator_export_is_pushed_from_its_one_model(tmp_path):
    """path_utils.py, `serving_model_path`: Format-Serving/export/<exporter>/<model>/."""
    exported = tmp_path / "model" / "Format-Serving" / "export" / "taxi" / "1700000000"
    exported.mkdir(parents=True)
    assert model_push.serving_model_path(str(tmp_path / "model")) == str(exported)
    assert model_push.serving_model_path(str(tmp_path / "other")) == str(
        tmp_path / "other" / "Format-Serving"
    )


def _files(top: str) -> dict[str, str]:
    """Each file under `top` by relative path, its text (TREE's files are ASCII)."""
    found = {}
    for directory, _dirs, names in store_files.walk(top):
        for name in names:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, top)] = store_files.read_text(path)
    return found


@pytest.mark.slow  # an S3 server (moto) in this process
def test_a_push_to_s3_writes_what_a_push_to_a_local_path_writes(tmp_path, monkeypatch):
    """The same tree at a local path and under s3://: the same new version (the version's
    name read as V), the same push record and PushedModel copy and metadata."""
    from tests.s3_standin import s3_standin

    with s3_standin() as store:
        for name, value in store.shell_environment(tmp_path).items():
            if name not in ("PATH", "HOME"):
                monkeypatch.setenv(name, value)
        local, remote = str(tmp_path / "local"), f"s3://{store.bucket}/{tmp_path.name}"
        _write(Path(local), TREE)
        for relative, data in TREE.items():
            store.client().put_object(
                Bucket=store.bucket, Key=f"{tmp_path.name}/{relative}", Body=data
            )
        found = {}
        for root in (local, remote):
            pushed = _push(root, {"blessed": 1.0})
            version = str(pushed.metadata["pushed_version"])
            found[root] = json.loads(
                json.dumps(
                    {
                        "served": _files(f"{root}/serving/{version}"),
                        "pushed_model": _files(pushed.uri),
                        "metadata": pushed.metadata,
                    }
                )
                .replace(root, "ROOT")
                .replace(version, "V")
            )
    assert found[remote] == found[local]
    assert found[local]["metadata"] == {
        "pushed": 1.0,
        "pushed_destination": "ROOT/serving/V",
        "pushed_version": "V",
    }
    served = found[local]["served"]
    assert sorted(served) == [
        "assets.extra/push.json",
        "assets.extra/training_statistics/FeatureStats.pb",
        "saved_model.pb",
        "variables/variables.index",
    ]
    assert json.loads(served[PUSH_RECORD_FILE]) == {"pushed_model": "ROOT/pushed_model"}
