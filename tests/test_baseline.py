"""The served-model baseline: which version counts as served, and empty baselines."""

from tfx.types import standard_artifacts, standard_component_specs

from components.evaluator.executor import drop_empty_baseline
from components.serving.baseline.component import HAS_MODEL_PROPERTY
from components.serving.serving_dir import latest_served_version


def _version(root, name, complete=True):
    (root / name).mkdir(parents=True)
    if complete:
        (root / name / "saved_model.pb").write_bytes(b"x")


def test_newest_complete_numeric_version_is_served(tmp_path):
    _version(tmp_path, "100")
    _version(tmp_path, "99")
    _version(tmp_path, "200", complete=False)  # Pusher still copying: saved_model.pb comes last.
    _version(tmp_path, "tmp-300")
    assert latest_served_version(str(tmp_path)) == "100"


def test_nothing_served(tmp_path):
    assert latest_served_version(str(tmp_path / "missing")) is None
    _version(tmp_path, "5", complete=False)
    assert latest_served_version(str(tmp_path)) is None


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
