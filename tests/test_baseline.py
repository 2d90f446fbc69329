"""Which version is served (components/serving/served_version.py), the baseline copied from
it, and empty baselines."""

import pytest
from tfx.types import standard_artifacts, standard_component_specs

from components.evaluator.executor import drop_empty_baseline
from components.serving.baseline.component import HAS_MODEL_PROPERTY
from components.serving.baseline.executor import SERVED_VERSION_PROPERTY, copy_latest_served
from components.serving.rollout_record import record_rolled_out, rolled_out_record
from components.serving.served_version import (
    ModelChoiceError,
    choose_version,
    newest_complete_version,
    served_version,
)
from kubeflow.light_step import StepArtifact


def _version(root, name, complete=True):
    (root / name).mkdir(parents=True)
    if complete:
        (root / name / "saved_model.pb").write_bytes(b"x")


def test_newest_complete_numeric_version_is_served(tmp_path):
    _version(tmp_path, "100")
    _version(tmp_path, "99")
    _version(tmp_path, "200", complete=False)  # Pusher still copying: saved_model.pb comes last.
    _version(tmp_path, "tmp-300")
    assert newest_complete_version(str(tmp_path)) == "100"


def test_nothing_served(tmp_path):
    assert newest_complete_version(str(tmp_path / "missing")) is None
    _version(tmp_path, "5", complete=False)
    assert newest_complete_version(str(tmp_path)) is None


def test_with_the_rollout_s_record_the_version_it_names_is_served(tmp_path):
    """On Kubeflow with `serving:` the newest complete version may be one whose rollout
    never happened (its Deploy step interrupted); the record names what takes traffic."""
    serving = tmp_path / "serving"
    for name in ("3", "12", "20"):
        _version(serving, name)
    record = rolled_out_record(str(tmp_path / "kserve"))
    assert served_version(str(serving)) == "20"  # TF Serving's rule: no record
    assert served_version(str(serving), record) is None  # nothing rolled out yet
    record_rolled_out(record, "12", str(tmp_path / "kserve" / "12"), "models/taxi")
    assert served_version(str(serving), record) == "12"
    assert served_version(str(serving)) == "20"
    # The InferenceService serves a model the pipeline did not push there (one it was
    # created with): none of ours is served, as on a first run; the scorer refuses it.
    (serving / "12" / "saved_model.pb").unlink()
    assert served_version(str(serving), record) is None
    with pytest.raises(ModelChoiceError, match=r"names the rolled-out version 12, and .* no"):
        choose_version(str(serving), None, record)


def test_the_baseline_is_the_served_version_the_record_names(tmp_path):
    serving = tmp_path / "serving"
    for name in ("12", "20"):
        _version(serving, name)
        (serving / name / "model.txt").write_text(name)
    record = rolled_out_record(str(tmp_path / "kserve"))
    record_rolled_out(record, "12", str(tmp_path / "kserve" / "12"), "models/taxi")
    baseline = StepArtifact(uri=str(tmp_path / "baseline"))
    copy_latest_served(str(serving), baseline, record)
    assert baseline.metadata[SERVED_VERSION_PROPERTY] == "12"
    assert (tmp_path / "baseline" / "Format-Serving" / "model.txt").read_text() == "12"
    newest = StepArtifact(uri=str(tmp_path / "newest"))
    copy_latest_served(str(serving), newest)  # locally: no record
    assert newest.metadata[SERVED_VERSION_PROPERTY] == "20"


def _model(has_model=None):
    model = standard_artifacts.Model()
    if has_model is not None:
        model.set_int_custom_property(HAS_MODEL_PROPERTY, has_model)
    return model


def test_empty_baseline_is_dropped_and_a_real_one_kept():
    key = standard_component_specs.BASELINE_MODEL_KEY
    candidate = [_model()]
    assert key not in drop_empty_baseline({"model": candidate, key: [_model(has_model=0)]})
    real = [_model(has_model=1)]
    assert drop_empty_baseline({"model": candidate, key: real})[key] == real
    # A Model artifact from elsewhere (no property) is a real model.
    plain = [_model()]
    assert drop_empty_baseline({"model": candidate, key: plain})[key] == plain
