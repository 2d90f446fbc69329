"""How one node of the local DAG runs: TFX's own Launcher, as LocalDagRunner runs it.

Both processes of a local run launch nodes through here: the runner's main
process (pipeline/local/scheduler.py) and the second one (pipeline/local/node_process.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from tfx.orchestration import metadata
from tfx.orchestration.local import runner_utils
from tfx.orchestration.portable import launcher
from tfx.proto.orchestration import pipeline_pb2
from tfx.utils import dependency_utils, telemetry_utils


def _node(ir: pipeline_pb2.Pipeline, node_id: str) -> pipeline_pb2.PipelineNode:
    for node in ir.nodes:
        if node.pipeline_node.node_info.id == node_id:
            return node.pipeline_node
    raise KeyError(f"no node {node_id!r} in pipeline {ir.pipeline_info.id!r}")


@contextlib.contextmanager
def tfx_not_shipped_to_beam_workers() -> Iterator[None]:
    """Beam steps keep their arguments as given: TFX is not packaged for their workers.

    Given Beam arguments with no dependency option (a local multi-processing
    run's `--direct_running_mode`), each Beam executor copies TFX's install
    (about 50 MB) into an sdist under /tmp for remote workers to install: 1.6 s
    per step, never deleted (tfx 1.16.0, tfx/utils/dependency_utils.py,
    make_beam_dependency_flags, called by BaseBeamExecutor.__init__). A local
    run's Beam workers are this interpreter's own subprocesses, which already
    import TFX. (On Kubeflow, `--sdk_container_image` says the same:
    kubeflow/settings/beam.py.)
    """
    make_flags = dependency_utils.make_beam_dependency_flags
    dependency_utils.make_beam_dependency_flags = list
    try:
        yield
    finally:
        dependency_utils.make_beam_dependency_flags = make_flags


def launch_node(ir: pipeline_pb2.Pipeline, node_id: str) -> None:
    """Runs one node as LocalDagRunner would: TFX's Launcher, its own MLMD connection."""
    deployment_config = runner_utils.extract_local_deployment_config(ir)
    connection = deployment_config.metadata_connection_config
    connection_config = getattr(connection, connection.WhichOneof("connection_config"))
    node_launcher = launcher.Launcher(
        pipeline_node=_node(ir, node_id),
        mlmd_connection=metadata.Metadata(connection_config),
        pipeline_info=ir.pipeline_info,
        pipeline_runtime_spec=ir.runtime_spec,
        executor_spec=runner_utils.extract_executor_spec(deployment_config, node_id),
        custom_driver_spec=runner_utils.extract_custom_driver_spec(deployment_config, node_id),
    )
    # The lines LocalDagRunner logs: the runner's progress filter shows these.
    logging.getLogger("absl").info("Component %s is running.", node_id)
    with (
        telemetry_utils.scoped_labels({telemetry_utils.LABEL_TFX_RUNNER: "local"}),
        tfx_not_shipped_to_beam_workers(),
    ):
        node_launcher.launch()
    logging.getLogger("absl").info("Component %s is finished.", node_id)
