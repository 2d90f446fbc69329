"""The Dockerfile agrees with the pinned stack (no Docker engine here, so checked as text)."""

from __future__ import annotations

import re

import tensorflow as tf
import yaml

from kubeflow.settings import PROJECT_ROOT_IN_IMAGE
from tests.conftest import REPO_ROOT

DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
LOCK = (REPO_ROOT / "uv.lock").read_text()


def _locked_version(package: str) -> str:
    match = re.search(rf'name = "{re.escape(package)}"\nversion = "([^"]+)"', LOCK)
    assert match, f"{package} not in uv.lock"
    return match.group(1)


def test_base_image_cuda_matches_tensorflow_build():
    (cuda,) = re.findall(r"^FROM nvidia/cuda:(\d+\.\d+)\.\d+-base-ubuntu22\.04$", DOCKERFILE, re.M)
    assert cuda == tf.sysconfig.get_build_info()["cuda_version"]


def test_gpu_extra_pins_the_cudnn_tensorflow_was_built_with():
    assert "--extra gpu" in DOCKERFILE
    cudnn_major = tf.sysconfig.get_build_info()["cudnn_version"].split(".")[0]
    assert _locked_version("nvidia-cudnn-cu12").split(".")[0] == cudnn_major
    assert _locked_version("tensorflow") == tf.__version__


def test_image_layout_matches_kubeflow_settings_and_uv_version():
    settings = yaml.safe_load((REPO_ROOT / "kubeflow" / "pipeline.yaml").read_text())
    assert f"WORKDIR {PROJECT_ROOT_IN_IMAGE}" in DOCKERFILE
    assert (REPO_ROOT / settings["schema_dir"] / "schema.pbtxt").is_file()
    assert "project_root_in_image" not in settings  # the default is the image's layout
    (dev_uv,) = re.findall(r'^UV_VERSION="([^"]+)"', (REPO_ROOT / "dev").read_text(), re.M)
    assert f'"uv=={dev_uv}"' in DOCKERFILE


def test_image_and_dev_environment_precompile_bytecode():
    # Each KFP step is a fresh container; without .pyc files every step would
    # compile TensorFlow, TFX and Beam from source before doing any work.
    assert re.search(r"^\s*UV_COMPILE_BYTECODE=1 \\$", DOCKERFILE, re.M)
    assert "python -m compileall" in DOCKERFILE
    dev = (REPO_ROOT / "dev").read_text()
    assert "uv sync --locked --compile-bytecode" in dev
    assert re.search(r"^  ensure_bytecode$", dev, re.M)


def test_image_is_a_beam_sdk_harness_of_the_locked_beam_version():
    """Dataflow/Flink/Spark workers start the pipeline image through Beam's boot binary."""
    from importlib.metadata import version

    beam = version("apache-beam")
    assert f"COPY --from=apache/beam_python3.10_sdk:{beam} /opt/apache/beam /opt/apache/beam" in (
        DOCKERFILE
    )
    assert 'ENTRYPOINT ["/opt/apache/beam/boot"]' in DOCKERFILE


def test_image_holds_both_s3_clients_and_the_step_entrypoint():
    """TensorFlow reads s3:// through tensorflow-io, Beam through its boto3 filesystem."""
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    # tensorflow-io releases pair with TensorFlow minors: 0.37 is the one for TF 2.16.
    assert tf.__version__.startswith("2.16.")
    assert _locked_version("tensorflow-io").startswith("0.37.")
    assert re.search(r'^    "tensorflow-io==0\.37\.\d+",$', pyproject, re.M)
    assert re.search(r'^    "apache-beam\[[a-z,]*aws[a-z,]*\]==', pyproject, re.M)
    # The image's build imports what every step's command imports.
    assert "import kubeflow.step_entrypoint, pipeline.s3_plugin" in DOCKERFILE
