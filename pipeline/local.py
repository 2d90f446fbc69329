"""Compiling the DAG for LocalDagRunner, with per-node caching TFX 1.16 cannot express."""

from __future__ import annotations

from collections.abc import Iterable

from tfx.dsl.compiler import compiler, constants
from tfx.orchestration.local.local_dag_runner import LocalDagRunner
from tfx.orchestration.pipeline import Pipeline
from tfx.orchestration.portable import runtime_parameter_utils
from tfx.proto.orchestration import pipeline_pb2

from pipeline.pipeline import UNCACHED_NODES


def compile_with_uncached_nodes(
    pipeline: Pipeline, uncached: Iterable[str] = UNCACHED_NODES
) -> pipeline_pb2.Pipeline:
    """Pipeline IR where the nodes in `uncached` always run, whatever `enable_cache` says.

    TFX 1.16 only has a pipeline-wide cache switch; its IR has one per node.
    """
    ir = compiler.Compiler().compile(pipeline)
    wanted = set(uncached)
    found = set()
    for node in ir.nodes:
        node_id = node.pipeline_node.node_info.id
        if node_id in wanted:
            node.pipeline_node.execution_options.caching_options.enable_cache = False
            found.add(node_id)
    missing = wanted - found
    if missing:
        raise ValueError(f"no such node(s) in the pipeline: {sorted(missing)}")
    return ir


def run_locally(pipeline: Pipeline, run_id: str) -> None:
    """Runs `pipeline` as the run `run_id`, the key its summary reads back from MLMD.

    LocalDagRunner would name the run after the clock itself; binding the id
    first means this process knows which run is its own.
    """
    ir = compile_with_uncached_nodes(pipeline)
    runtime_parameter_utils.substitute_runtime_parameter(
        ir, {constants.PIPELINE_RUN_ID_PARAMETER_NAME: run_id}
    )
    LocalDagRunner().run_with_ir(ir)
