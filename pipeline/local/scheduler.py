"""Runs the DAG on this machine: TFX's launcher per node, two nodes at a time where the DAG allows.

TFX 1.16's LocalDagRunner runs every node in turn, in one process ("TODO:
run independent components in parallel", local_dag_runner.py). Here the
main process runs nodes in the same order, and when two nodes are ready at
once, a second process (pipeline/local/node_process.py) takes one of them: the
data validation branch (StatisticsGen, ExampleValidator, the gate) runs beside
Transform, as Kubeflow runs them. Each node is still launched by TFX's own
Launcher, so caching, ML Metadata and outputs are exactly LocalDagRunner's.

A failed node stops what depends on it, and nothing else, as on Kubeflow; the
run then raises the failure, a data gate's first (bad data explains the rest).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping

from tfx.dsl.compiler import compiler, constants
from tfx.orchestration.pipeline import Pipeline
from tfx.orchestration.portable import runtime_parameter_utils
from tfx.proto.orchestration import pipeline_pb2

from components.gates.data_validation.executor import DataValidationError
from pipeline.local.node_launch import launch_node
from pipeline.local.node_process import NodeProcess
from pipeline.steps import DAG_STEPS

logger = logging.getLogger(__name__)


def compile_with_uncached_steps(
    pipeline: Pipeline, uncached: Iterable[str] = DAG_STEPS.uncached_ids
) -> pipeline_pb2.Pipeline:
    """Pipeline IR where the steps in `uncached` always run, whatever `enable_cache` says.

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
        raise ValueError(f"no such step(s) in the pipeline: {sorted(missing)}")
    return ir


@dataclasses.dataclass
class Schedule:
    """Which nodes may start: those whose upstream nodes all completed.

    A failed node's downstream never becomes ready; other branches go on.
    """

    order: tuple[str, ...]  # TFX's topological order: the order nodes start in.
    upstream: Mapping[str, frozenset[str]]
    started: set[str] = dataclasses.field(default_factory=set)
    completed: set[str] = dataclasses.field(default_factory=set)
    failed: dict[str, BaseException] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, ir: pipeline_pb2.Pipeline) -> Schedule:
        nodes = [n.pipeline_node for n in ir.nodes]
        return cls(
            order=tuple(n.node_info.id for n in nodes),
            upstream={n.node_info.id: frozenset(n.upstream_nodes) for n in nodes},
        )

    def ready(self) -> list[str]:
        done = self.completed
        return [n for n in self.order if n not in self.started and self.upstream[n] <= done]

    def start(self, node_id: str) -> None:
        self.started.add(node_id)

    def finish(self, node_id: str, error: BaseException | None) -> None:
        if error is None:
            self.completed.add(node_id)
        else:
            self.failed[node_id] = error

    def error(self) -> BaseException | None:
        """The failure to report: a failed data gate's, else the first in DAG order."""
        failures = [self.failed[n] for n in self.order if n in self.failed]
        gate = [e for e in failures if isinstance(e, DataValidationError)]
        return (gate or failures or [None])[0]


def run_ir(ir: pipeline_pb2.Pipeline, node_process: NodeProcess | None = None) -> None:
    """Runs every node of `ir`; with `node_process`, two at a time where the DAG allows."""
    schedule = Schedule.of(ir)
    if node_process is not None and node_process.idle:
        node_process.load(ir.SerializeToString())
    try:
        while True:
            if node_process is not None and node_process.running is not None:
                finished = node_process.wait(timeout=0)
                if finished is not None:
                    schedule.finish(*finished)
            ready = schedule.ready()
            if node_process is not None and node_process.idle and len(ready) > 1:
                # The main process keeps to TFX's order; the other one takes the next node.
                schedule.start(ready[1])
                node_process.start(ready[1])
            if ready:
                schedule.start(ready[0])
                try:
                    launch_node(ir, ready[0])
                except Exception as err:
                    schedule.finish(ready[0], err)
                else:
                    schedule.finish(ready[0], None)
            elif node_process is not None and node_process.running is not None:
                ended = node_process.wait()  # no timeout: it returns once the node has ended
                if ended is not None:
                    schedule.finish(*ended)
            else:
                break
    except BaseException:
        # Ctrl-C (or a bug here): a node half-done in the other process must not
        # go on writing after this process has given up on the run.
        if node_process is not None and node_process.running is not None:
            node_process.close()
        raise
    error = schedule.error()
    for node_id, other in schedule.failed.items():
        if other is not error:  # Said here; the runner's last line is `error`.
            logger.error("%s failed too: %s: %s", node_id, type(other).__name__, other)
    if error is not None:
        raise error


def up_to(ir: pipeline_pb2.Pipeline, last: str) -> pipeline_pb2.Pipeline:
    """The sub-DAG that ends at node `last`: it and every node it depends on, nothing else.

    Each node keeps its id, inputs and properties, so TFX's cache serves it
    exactly as it serves the whole DAG's (the tuner runs the DAG up to Transform).
    """
    nodes = {n.pipeline_node.node_info.id: n for n in ir.nodes}
    if last not in nodes:
        raise ValueError(f"no such step in the pipeline: {last!r}")
    wanted, pending = set(), [last]
    while pending:
        node_id = pending.pop()
        if node_id not in wanted:
            wanted.add(node_id)
            pending += nodes[node_id].pipeline_node.upstream_nodes
    sub = pipeline_pb2.Pipeline()
    sub.CopyFrom(ir)
    del sub.nodes[:]
    for node in ir.nodes:
        if node.pipeline_node.node_info.id in wanted:
            kept = sub.nodes.add()
            kept.CopyFrom(node)
            downstream = [d for d in kept.pipeline_node.downstream_nodes if d in wanted]
            del kept.pipeline_node.downstream_nodes[:]
            kept.pipeline_node.downstream_nodes.extend(downstream)
    return sub


def run_locally(
    pipeline: Pipeline,
    run_id: str,
    node_process: NodeProcess | None = None,
    uncached: Iterable[str] = DAG_STEPS.uncached_ids,
    *,
    last: str | None = None,
) -> None:
    """Runs `pipeline` as the run `run_id`, the key its summary reads back from MLMD.

    LocalDagRunner would name the run after the clock itself; binding the id
    first means this process knows which run is its own. `uncached`: the
    pipeline's steps that never come from cache (the scoring DAG has its own).
    `last`: run only the steps up to that one (`up_to`).
    """
    ir = compile_with_uncached_steps(pipeline, uncached)
    if last is not None:
        ir = up_to(ir, last)
    runtime_parameter_utils.substitute_runtime_parameter(
        ir, {constants.PIPELINE_RUN_ID_PARAMETER_NAME: run_id}
    )
    run_ir(ir, node_process)
