"""The Kubeflow platform as kubeflow/community-distribution installs it (v1.11.0, 26.03,
26.03.1): the profile namespace's object store prefix, and the rules of `kubeflow-edit`
that every Kubernetes call a step makes must pass (docs/kubeflow-operations.md)."""

from __future__ import annotations

import copy

import pytest
import yaml

from kubeflow import compile as kfp_compile
from kubeflow.settings import parse_settings
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.object_store import launcher_root
from tests.conftest import TEMPLATE_SETTINGS_FILE

NAMESPACE = "kubeflow-user-example-com"
HOME = f"s3://mlpipeline/private-artifacts/{NAMESPACE}/"
RAW_SETTINGS = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
PACKAGES = ("training", "scoring", "tuning")


def _platform_raw(**changes) -> dict:
    """The template's settings on the platform preset: no roots of their own."""
    raw = copy.deepcopy(RAW_SETTINGS)
    del raw["pipeline_root"], raw["serving_model_dir"]
    raw["object_store"] = {"preset": "kubeflow-platform", "namespace": NAMESPACE}
    raw["parameters"]["data_root"] = f"{HOME}data/chicago_taxi"
    raw["serving"] = {"inference_service": "taxi", "service_account": "kserve-models"}
    for path, value in changes.items():
        target = raw
        *parents, last = path.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value
    return raw


def _platform(**changes):
    return parse_settings(_platform_raw(**changes), kfp_compile.pipeline_step_ids())


def test_the_preset_puts_every_path_a_package_writes_under_the_namespaces_prefix():
    settings = _platform()
    for package in PACKAGES:
        paths = kfp_compile.store_paths(settings, package)
        assert paths, package
        for where, path, _ in paths:
            assert path.startswith(HOME), (package, where, path)
        kfp_compile.check_store_paths(settings, package)
    # Drift statistics go inside each served version, under serving_model_dir.
    assert settings.pipeline_root == f"{HOME}v2/artifacts"
    assert settings.serving_model_dir == f"{HOME}serving"
    assert settings.serving.storage_root == f"{HOME}serving-kserve"
    assert kfp_compile.scores_root(settings) == f"{HOME}scores"
    # The launcher's own root is the same bucket and key, as minio://.
    assert launcher_root(NAMESPACE) == "minio://" + settings.pipeline_root.removeprefix("s3://")
    store = settings.object_store
    assert store.environment()["AWS_ENDPOINT_URL_S3"] == "http://seaweedfs.kubeflow:8333"
    assert kfp_compile.secret_as_env(store)[0]["secretName"] == "mlpipeline-minio-artifact"
    assert [k["secretKey"] for k in kfp_compile.secret_as_env(store)[0]["keyToEnv"]] == [
        "accesskey",
        "secretkey",
    ]


def test_the_preset_keeps_roots_set_inside_the_prefixes_the_secret_may_write():
    settings = _platform(
        pipeline_root=f"s3://mlpipeline/private/{NAMESPACE}/tfx",
        serving_model_dir=f"s3://mlpipeline/private/{NAMESPACE}/serving/taxi",
    )
    assert settings.pipeline_root == f"s3://mlpipeline/private/{NAMESPACE}/tfx"
    for package in PACKAGES:
        kfp_compile.check_store_paths(settings, package)


@pytest.mark.parametrize(
    ("changes", "package", "setting", "path"),
    [
        ({"pipeline_root": "s3://mlpipeline/tfx/taxi"}, "training", "pipeline_root", None),
        (
            {
                "serving_model_dir": "s3://mlpipeline/serving/taxi",
                "serving.storage_root": f"{HOME}serving-kserve",
            },
            "training",
            "serving_model_dir",
            None,
        ),
        (
            {"parameters.data_root": "s3://mlpipeline/private-artifacts/another-team/data"},
            "training",
            "parameters.data_root",
            None,
        ),
        (
            {"serving.storage_root": "s3://mlpipeline/models/taxi"},
            "training",
            "serving.storage_root",
            None,
        ),
        # The scores go beside the serving directory: here one level above the prefix.
        (
            {"serving_model_dir": HOME.rstrip("/"), "serving.storage_root": f"{HOME}kserve"},
            "scoring",
            "serving_model_dir",
            "s3://mlpipeline/private-artifacts/scores",
        ),
        ({"pipeline_root": f"{HOME}../another-team/tfx"}, "training", "pipeline_root", None),
        ({"pipeline_root": "s3://other-bucket/tfx"}, "tuning", "pipeline_root", None),
    ],
)
def test_a_package_whose_paths_leave_the_namespaces_prefix_is_refused_at_compile(
    tmp_path, capsys, changes, package, setting, path
):
    raw = _platform_raw(**changes)
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump(raw))
    out = tmp_path / "pipeline.yaml"
    flags = [] if package == "training" else [f"--{package}"]
    assert kfp_compile.main(["--output", str(out), "--config", str(config), *flags]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {setting}: {path or ''}"), lines[0]
    assert f"namespace {NAMESPACE}'s mlpipeline-minio-artifact secret" in lines[0]
    assert f"Put it under {HOME}" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize(
    ("store", "message"),
    [
        ({"preset": "kubeflow-platform"}, r"^object_store.namespace: required with preset"),
        (
            {"preset": "kubeflow-platform", "namespace": "Team_A"},
            r"^object_store.namespace: 'Team_A' is not a namespace name",
        ),
        (
            {
                "preset": "kubeflow-platform",
                "namespace": NAMESPACE,
                "credentials": {"secret": "s", "access_key_id_key": "a"},
            },
            r"^object_store.credentials: the kubeflow-platform preset uses the namespace's own "
            r"mlpipeline-minio-artifact secret",
        ),
        ({"preset": "kubeflow"}, r"^object_store.preset: must be 'kubeflow-platform'"),
        (
            {"preset": "kubeflow-platform", "namespace": NAMESPACE, "bucket": "x"},
            r"^object_store: unknown field\(s\) \['bucket'\]",
        ),
        (
            {"preset": "kubeflow-platform", "namespace": NAMESPACE, "endpoint": "seaweedfs:8333"},
            r"^object_store.endpoint: 'seaweedfs:8333' is not http\(s\)://HOST",
        ),
    ],
)
def test_preset_errors_name_the_field(store, message):
    with pytest.raises(SettingsError, match=message):
        _platform(object_store=store)


def test_the_compile_says_which_root_a_run_really_uses():
    note = kfp_compile.pipeline_root_note(_platform())
    assert note.startswith(f"pipeline root {HOME}v2/artifacts: the backend ignores")
    assert (
        f"namespace {NAMESPACE}'s kfp-launcher ConfigMap's defaultPipelineRoot, "
        f"minio://mlpipeline/private-artifacts/{NAMESPACE}/v2/artifacts" in note
    )
    # Without the preset, the platform's value is named with a placeholder.
    plain = parse_settings(RAW_SETTINGS, kfp_compile.pipeline_step_ids())
    assert "minio://mlpipeline/private-artifacts/NAMESPACE/v2/artifacts" in (
        kfp_compile.pipeline_root_note(plain)
    )
