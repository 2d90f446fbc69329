"""The local runner's scheduling: two nodes at a time where the DAG allows, failures as on Kubeflow.

The DAG here is a diamond with a tail, shaped like the pipeline's branch point:

    A -> B -> D -> E        (A: ExampleGen, B: Transform, D: Trainer)
    A -> C -> D             (C: the validation branch, gate last)
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from tfx.proto.orchestration import pipeline_pb2

from components.gates.data_validation.executor import DataValidationError
from pipeline.local import scheduler as local
from pipeline.local.node_process import (
    NodeProcess,
    NodeProcessDiedError,
    RemoteTraceback,
    _transferable,
)

UPSTREAM = {"A": [], "B": ["A"], "C": ["A"], "D": ["B", "C"], "E": ["D"]}


def diamond_ir() -> pipeline_pb2.Pipeline:
    ir = pipeline_pb2.Pipeline()
    for node_id, upstream in UPSTREAM.items():  # Already in TFX's layered order.
        node = ir.nodes.add().pipeline_node
        node.node_info.id = node_id
        node.upstream_nodes.extend(upstream)
    return ir


class FakeNodeProcess:
    """Stands in for NodeProcess: a node it starts ends at the next look, as `errors` say."""

    def __init__(self, errors: dict[str, BaseException] | None = None):
        self.errors = errors or {}
        self.ran: list[str] = []
        self.running: str | None = None
        self.loaded = False
        self.closed = False

    @property
    def idle(self) -> bool:
        return self.running is None and not self.closed

    def load(self, ir_bytes: bytes) -> None:
        self.loaded = bool(ir_bytes)

    def start(self, node_id: str) -> None:
        assert self.running is None
        self.running = node_id
        self.ran.append(node_id)

    def wait(self, timeout=None):
        node_id, self.running = self.running, None
        return node_id, self.errors.get(node_id)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def main_process_launches(monkeypatch):
    """Replaces TFX's launcher in this process; records what ran here and can fail a node."""
    ran: list[str] = []
    errors: dict[str, BaseException] = {}

    def launch(ir, node_id):
        ran.append(node_id)
        if node_id in errors:
            raise errors[node_id]

    monkeypatch.setattr(local, "launch_node", launch)
    return ran, errors


def test_the_second_process_takes_the_other_branch_and_the_main_one_keeps_tfx_order(
    main_process_launches,
):
    ran_here, _ = main_process_launches
    other = FakeNodeProcess()
    local.run_ir(diamond_ir(), other)
    assert other.loaded
    assert ran_here == ["A", "B", "D", "E"]
    assert other.ran == ["C"]


def test_without_a_second_process_nodes_run_one_at_a_time_in_tfx_order(main_process_launches):
    ran_here, _ = main_process_launches
    local.run_ir(diamond_ir())
    assert ran_here == ["A", "B", "C", "D", "E"]


def test_a_failure_stops_its_downstream_only_and_is_raised_at_the_end(main_process_launches):
    ran_here, _ = main_process_launches
    other = FakeNodeProcess(errors={"C": RuntimeError("C broke")})
    with pytest.raises(RuntimeError, match="C broke"):
        local.run_ir(diamond_ir(), other)
    assert ran_here == ["A", "B"]  # B does not depend on C; D and E do.


def test_a_failed_data_gate_is_the_error_reported_when_another_branch_failed_too(
    main_process_launches, caplog
):
    # Bad data often breaks Transform as well, with a less helpful message.
    _, errors_here = main_process_launches
    errors_here["B"] = KeyError("payment_type")
    other = FakeNodeProcess(errors={"C": DataValidationError("data validation failed: ...")})
    with pytest.raises(DataValidationError):
        local.run_ir(diamond_ir(), other)
    assert "B failed too: KeyError: 'payment_type'" in caplog.text


def test_without_a_gate_failure_the_first_failure_in_dag_order_is_reported():
    schedule = local.Schedule.of(diamond_ir())
    for node_id in "ABC":
        schedule.start(node_id)
    schedule.finish("A", None)
    schedule.finish("C", ValueError("second in order"))
    schedule.finish("B", ValueError("first in order"))
    assert str(schedule.error()) == "first in order"
    assert schedule.ready() == []


def test_ctrl_c_stops_the_node_running_in_the_other_process(main_process_launches):
    _, errors_here = main_process_launches
    errors_here["B"] = KeyboardInterrupt()
    other = FakeNodeProcess()
    with pytest.raises(KeyboardInterrupt):
        local.run_ir(diamond_ir(), other)
    assert other.ran == ["C"] and other.closed


def test_an_error_that_cannot_be_pickled_crosses_as_its_text_with_the_traceback():
    import pickle

    class NeedsKeyword(Exception):
        def __init__(self, *, code):
            super().__init__(f"code {code}")

    try:
        raise NeedsKeyword(code=7)
    except NeedsKeyword as err:
        crossed = pickle.loads(pickle.dumps(_transferable(err)))
    assert type(crossed) is RuntimeError
    assert str(crossed) == "NeedsKeyword: code 7"
    assert isinstance(crossed.__cause__, RemoteTraceback)
    assert "raise NeedsKeyword(code=7)" in str(crossed.__cause__)


def test_a_node_process_that_dies_mid_node_is_an_error_naming_the_node():
    # The initializer keeps the child busy before it serves anything; killing it
    # then is a process that died while "running" the node.
    with NodeProcess(initializer=time.sleep, initargs=(120,)) as process:
        process.start("Transform")
        os.kill(process.pid, signal.SIGKILL)
        node_id, error = process.wait(timeout=60)
        assert node_id == "Transform"
        assert isinstance(error, NodeProcessDiedError)
        assert "Transform" in str(error) and f"code {-signal.SIGKILL}" in str(error)
        assert not process.idle


@pytest.mark.slow
def test_a_node_error_in_the_process_comes_back_with_its_remote_traceback():
    with NodeProcess() as process:
        process.start("Trainer")  # Nothing loaded: the child refuses, in its own code.
        node_id, error = process.wait(timeout=240)
    assert node_id == "Trainer"
    assert isinstance(error, RuntimeError) and str(error) == "no pipeline loaded"
    assert "node_process.py" in str(error.__cause__)


@pytest.mark.parametrize("flags, cores", [(["--sequential"], 2), ([], 1)])
def test_sequential_or_a_single_core_starts_no_second_process(monkeypatch, flags, cores):
    import local_runner
    from pipeline.local import node_process
    from pipeline.local import run as local_run

    monkeypatch.setattr(node_process, "usable_cores", lambda: cores)
    args = local_runner.parse_args(flags)
    with local_run.start_node_process(sequential=args.sequential, verbose=args.verbose) as process:
        assert process is None
