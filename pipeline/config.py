"""Your pipeline's configuration variants (yours): `VARIANTS`, and your own steps.

One default (`PipelineConfig()`), and variants derived from it by changing a
few fields, so a GPU or Kubeflow setup cannot drift from the local one. The
class is the template's (pipeline/pipeline_config.py); the template reads this
file through trainer/fork/config_file.py: `VARIANTS` and `extra_steps`.
"""

from __future__ import annotations

from pipeline.pipeline_config import PipelineConfig


def local_cpu() -> PipelineConfig:
    """The default: trains on this machine's CPU."""
    return PipelineConfig().with_runtime(accelerator="cpu", precision="float32")


def gpu_1x() -> PipelineConfig:
    """One GPU, mixed precision chosen from its compute capability."""
    return PipelineConfig().with_runtime(accelerator="gpu", strategy="one_device")


def gpu_8x_amp() -> PipelineConfig:
    """One node of several GPUs: mirrored with NCCL, float16 with loss scaling, XLA."""
    return PipelineConfig(train_steps=2000).with_runtime(
        accelerator="gpu",
        strategy="mirrored",
        precision="mixed_float16",
        jit_compile=True,
        per_replica_batch_size=1024,
    )


def gpu_multi_node() -> PipelineConfig:
    """Several GPU nodes, one model: a Kubeflow TFJob's Chief and workers
    (kubeflow/pipeline.yaml, `training.engine: tfjob`), NCCL across them."""
    return gpu_8x_amp().with_runtime(strategy="multi_worker_mirrored", jit_compile=False)


VARIANTS = {
    "default": PipelineConfig,
    "local_cpu": local_cpu,
    "gpu_1x": gpu_1x,
    "gpu_8x_amp": gpu_8x_amp,
    "gpu_multi_node": gpu_multi_node,
}


def extra_steps(dag) -> list:
    """Your own steps, in the DAG of every runner (local and Kubeflow), after the template's.

    `dag[step_id]` is a built step (`dag.ids` lists them); wire a TFX component to its
    outputs, e.g. `MyStep(model=dag["Trainer"].outputs["model"])`: a local run runs it and
    the Kubeflow package holds it (its pod takes kubeflow/pipeline.yaml's `defaults:`), and
    the run summary and report list it. Its id must not be one of theirs. None by default.
    """
    del dag
    return []
