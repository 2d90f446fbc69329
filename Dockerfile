# The pipeline image for Kubeflow: TensorFlow 2.16.2's GPU build with the
# project installed at /pipeline (kubeflow/pipeline.yaml's schema_dir is relative to it).
#
#   docker build -t REGISTRY/taxi-big-tipper:0.1.0 .
#   docker push REGISTRY/taxi-big-tipper:0.1.0      # then set `image:` in kubeflow/pipeline.yaml
#
# TensorFlow 2.16.2 was built against CUDA 12.3 and cuDNN 8.9; the `gpu` extra
# installs exactly those libraries as pinned wheels (tensorflow[and-cuda]), so
# the base image only needs the CUDA 12.3 driver compatibility layer. The same
# uv.lock as local runs fixes every other version.
FROM nvidia/cuda:12.3.2-base-ubuntu22.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/venv \
    UV_LINK_MODE=copy \
    UV_COMPILE_BYTECODE=1 \
    PATH=/opt/venv/bin:$PATH \
    MPLCONFIGDIR=/opt/matplotlib \
    TF_CPP_MIN_LOG_LEVEL=1

# Ubuntu 22.04's python3 is 3.10, the version TFX 1.16 and uv.lock need.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-pip ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m pip install --no-cache-dir "uv==0.13.9"

WORKDIR /pipeline
# Dependencies first, so code changes do not rebuild the 3 GB layer.
COPY pyproject.toml uv.lock .python-version ./
RUN uv sync --locked --no-dev --extra gpu --no-install-project
COPY . .
# Every KFP step is a fresh container: without .pyc files each one would
# compile TensorFlow, TFX and Beam from source before doing any work.
# UV_COMPILE_BYTECODE covers the dependencies; compileall covers the project.
# Importing the report's plots builds matplotlib's font cache once, in
# MPLCONFIGDIR, instead of in the RunReport step of every run.
RUN uv sync --locked --no-dev --extra gpu \
    && python -m compileall -q /pipeline/pipeline /pipeline/components /pipeline/trainer \
       /pipeline/contract /pipeline/schemas /pipeline/kubeflow /pipeline/local_runner.py \
    && python -c "import trainer.run, pipeline.pipeline, components.gates.data_validation.component, components.serving.baseline.component, kubeflow.steps.run_report.component" \
    && python -c "import kubeflow.step_entrypoint, pipeline.s3_plugin, pipeline.beam_runner, apache_beam.io.aws.s3filesystem" \
    && python -c "import components.report.plots"

# KubeflowV2DagRunner sets each step's command
# (python -m tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor).

# The same image is the Beam SDK harness when a Beam step runs on Dataflow,
# Flink or Spark (kubeflow/pipeline.yaml `beam:`): workers need TFT, TFMA and
# this project, which only this image has. Beam starts a harness container
# through /opt/apache/beam/boot, copied from Beam's own image of the pinned
# version; KFP steps set their own command, so this entrypoint never runs there.
COPY --from=apache/beam_python3.10_sdk:2.74.0 /opt/apache/beam /opt/apache/beam
ENTRYPOINT ["/opt/apache/beam/boot"]
