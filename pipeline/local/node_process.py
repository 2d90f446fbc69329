"""A second process that runs pipeline nodes for the local runner, one at a time.

TFX 1.16's LocalDagRunner runs one component at a time in one process, and a
Beam pipeline holds the GIL for most of its work: two components in two threads
took longer than one after the other (docs/where-the-time-goes.md). A process
has its own interpreter. It starts before the main
process imports TensorFlow, so its own imports overlap the main process's on
the other core, and it is ready by the time the DAG branches.

This module imports nothing heavy at the top: the runner starts the process
before its own imports.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import traceback
from collections.abc import Callable
from typing import Any

# How long `close()` gives the process to exit by itself before stopping it.
_EXIT_GRACE_S = 10.0


class RemoteTraceback(Exception):
    """The traceback of an error raised in the node process (as multiprocessing.pool does)."""

    def __str__(self) -> str:
        return str(self.args[0])


class NodeProcessDiedError(RuntimeError):
    """The node process exited while it ran a node (killed, out of memory, a crash)."""


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class NodeProcess:
    """Runs nodes of one compiled pipeline in a child process, one at a time.

    `initializer(*initargs)` runs first in the child (the runner's logging set-up);
    it must be importable by name, as the child is a fresh interpreter (spawn).
    `start_method`: "spawn", or "fork" in a run that `--watch` forked before its
    first step (pipeline/local/watch.py): it holds TensorFlow imported but not
    started, and its child starts from those imports. Never fork a process
    whose TensorFlow has run anything: its threads and locks would not follow.
    """

    def __init__(
        self,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple = (),
        start_method: str = "spawn",
    ):
        if start_method not in ("spawn", "fork"):
            raise ValueError(f"start_method: must be 'spawn' or 'fork', got {start_method!r}")
        # The literal each way, not the variable: typeshed types each context by its name.
        context = (
            multiprocessing.get_context("fork")
            if start_method == "fork"
            else multiprocessing.get_context("spawn")
        )
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(
            target=_serve,
            args=(child_conn, initializer, initargs),
            name="pipeline-node-process",
            daemon=True,  # Never outlives the runner, whatever happens to it.
        )
        self._process.start()
        child_conn.close()
        self.running: str | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def idle(self) -> bool:
        """Alive and running nothing: it can take a node."""
        return self.running is None and self._process.is_alive()

    def load(self, ir_bytes: bytes) -> None:
        """Hands over the compiled pipeline (a serialized pipeline_pb2.Pipeline)."""
        self._conn.send(("load", ir_bytes))

    def start(self, node_id: str) -> None:
        if self.running is not None:
            raise RuntimeError(f"the node process is still running {self.running}")
        self._conn.send(("run", node_id))
        self.running = node_id

    def wait(self, timeout: float | None = None) -> tuple[str, BaseException | None] | None:
        """(node id, its error or None) once the running node ends; None on timeout."""
        if self.running is None:
            raise RuntimeError("the node process runs nothing")
        node_id = self.running
        if not self._conn.poll(timeout):
            return None
        self.running = None
        try:
            finished, error = self._conn.recv()
        except (EOFError, ConnectionResetError):
            self._process.join(_EXIT_GRACE_S)
            return node_id, NodeProcessDiedError(
                f"the process running {node_id} exited with code {self._process.exitcode} "
                "before the node finished"
            )
        if finished != node_id:
            raise RuntimeError(f"the node process answered for {finished}, not {node_id}")
        return node_id, error

    def close(self) -> None:
        """Lets the process exit; stops it if it does not, or if a node is running."""
        if self._process.is_alive() and self.running is None:
            with contextlib.suppress(OSError):  # Gone already: nothing to tell.
                self._conn.send(("exit", None))
            self._process.join(_EXIT_GRACE_S)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(_EXIT_GRACE_S)
        self._conn.close()

    def __enter__(self) -> NodeProcess:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _serve(conn, initializer, initargs) -> None:
    # Ctrl-C reaches the whole process group; the runner handles it and stops
    # this process, so a node here never dies half-way on its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)
    # What every node needs (the DAG's modules, which import their executors, and
    # TFX's launcher), imported while the main process imports the same.
    import_error: _WithTraceback | None
    try:
        from tfx.proto.orchestration import pipeline_pb2

        import pipeline.pipeline  # noqa: F401
        from pipeline.local.node_launch import launch_node
    except Exception as err:  # A bad edit (`--watch`): the runner, importing the same, says it.
        import_error = _transferable(err)
    else:
        import_error = None
    gc.freeze()  # As the runner does: the import heap is never garbage.
    ir = None
    while True:
        try:
            command, payload = conn.recv()
        except EOFError:  # The runner is gone.
            return
        if command == "exit":
            return
        if import_error is not None:
            if command == "run":
                conn.send((payload, import_error))
        elif command == "load":
            ir = pipeline_pb2.Pipeline.FromString(payload)
        elif command == "run":
            try:
                if ir is None:
                    raise RuntimeError("no pipeline loaded")
                launch_node(ir, payload)
                conn.send((payload, None))
            except Exception as err:
                conn.send((payload, _transferable(err)))


def _transferable(err: Exception) -> _WithTraceback:
    """`err` in a form that survives pickling, with its traceback attached."""
    import pickle

    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:
        err = RuntimeError(f"{type(err).__name__}: {err}")
    return _WithTraceback(err, text)


class _WithTraceback:
    # Pickling keeps an exception's args, not its traceback or __cause__.
    def __init__(self, err: BaseException, traceback_text: str):
        self.err = err
        self.traceback_text = traceback_text

    def __reduce__(self):
        return _rebuild, (self.err, self.traceback_text)


def _rebuild(err: BaseException, traceback_text: str) -> BaseException:
    err.__cause__ = RemoteTraceback(traceback_text)
    return err
