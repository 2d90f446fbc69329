"""TFX's container entrypoint, imported once and forked for each run: tests/test_light_step.py's
reference runs.

A pod runs `python -m kubeflow.step_entrypoint ARGS` and spends its first seconds importing
TFX's entrypoint, TensorFlow, TFMA and the executor class; what it then writes depends on
its arguments alone. This process does those imports once (`kubeflow.step_entrypoint`,
TFX's entrypoint module, and each executor class named on its command line) and runs
nothing. For each request it reads, one JSON line `{"argv": [...], "env": {...}, "stderr":
PATH}`, it forks; the child takes the environment of the caller at the time of the
request (as a process started then would), `/dev/null` for its standard input and output
and PATH for its standard error, calls `step_entrypoint.run_tfx(argv)` (absl's `app.run` of TFX's
`kubeflow_v2_run_executor.main`, first parsed in the child), and exits with what a fresh
`python -c "sys.exit(run_tfx(argv))"` exits with: the code it returns, or 1 after the
traceback of what it raised. The parent answers `{"code": N}` and waits for the next.

    python -m tests.tfx_entrypoint_fork CLASS_PATH...

`ForkedEntrypoint` starts it and hands it one run at a time.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import logging
import os
import select
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import IO

REPO_ROOT = Path(__file__).resolve().parents[1]


def _child(argv: list[str], env: dict[str, str], stderr_path: str) -> int:
    """Runs in the forked child: the step, with its output where a fresh process's would go."""
    from kubeflow import step_entrypoint

    os.environ.clear()
    os.environ.update(env)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
    try:
        code = step_entrypoint.run_tfx(argv)
    except SystemExit as done:  # as the interpreter reads sys.exit's argument
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:  # an uncaught exception: its traceback, exit 1
        traceback.print_exc()
        code = 1
    # What the interpreter does at exit, then `os._exit` (object_store.exit_process's order):
    # the child must not return into the parent's loop.
    logging.shutdown()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def serve(class_paths: list[str], requests: IO[str], replies: IO[str]) -> None:
    # Imported once, here, for every child.
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor  # noqa: F401

    from kubeflow import step_entrypoint  # noqa: F401

    for class_path in class_paths:
        module, _, name = class_path.rpartition(".")
        getattr(importlib.import_module(module), name)
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(request["argv"], request["env"], request["stderr"])
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


class ForkedEntrypoint:
    """The forking process, started on `class_paths`; `run` runs one step through it."""

    def __init__(self, class_paths: list[str], directory: Path) -> None:
        self._directory = directory
        self._log = (directory / "entrypoint.log").open("w")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.tfx_entrypoint_fork", *class_paths],
            cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            text=True,
        )  # fmt: skip

    def run(self, argv: list[str], timeout: float = 600) -> tuple[int, str]:
        """(exit code, standard error) of one run of TFX's entrypoint on `argv`."""
        assert self._process.stdin and self._process.stdout
        with tempfile.NamedTemporaryFile(dir=self._directory, suffix=".stderr") as stderr:
            request = {"argv": argv, "env": dict(os.environ), "stderr": stderr.name}
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
            ready, _, _ = select.select([self._process.stdout], [], [], timeout)
            line = self._process.stdout.readline() if ready else ""
            if not line:
                log = (self._directory / "entrypoint.log").read_text()[-3000:]
                raise RuntimeError(f"TFX's forked entrypoint did not answer in {timeout} s: {log}")
            return json.loads(line)["code"], Path(stderr.name).read_text()

    def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=60)
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._log.close()


if __name__ == "__main__":
    serve(sys.argv[1:], sys.stdin, sys.stdout)
    # Nothing to write or clean up: no interpreter teardown of TensorFlow's modules.
    os._exit(0)
