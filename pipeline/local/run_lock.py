"""One run at a time per output directory.

Two runs on one output directory would race on its ML Metadata store and its
serving directory: both push, neither is evaluated against the other, and
each summary mixes the two. `RunLock` takes an exclusive `fcntl.flock` on
`OUTPUT_DIR/.run.lock` for the whole run, and writes who holds it (pid, host,
start time, command) into the file for the message a second run gets.

The kernel releases a flock when its holder exits, however it exits (SIGKILL
included), so a lock file whose lock is free was left by a process that no
longer exists: it is taken over with a warning. Locks are per host; on a
shared network filesystem, use one output directory per machine.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import logging
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE_NAME = ".run.lock"

logger = logging.getLogger(__name__)


class RunLockedError(RuntimeError):
    """Another run holds the output directory."""


@dataclass(frozen=True)
class LockHolder:
    pid: int | None
    host: str | None
    started_at: str | None
    command: str | None

    @classmethod
    def read(cls, path: Path) -> LockHolder:
        try:
            info = json.loads(path.read_text() or "{}")
        except (OSError, ValueError):
            info = {}
        return cls(info.get("pid"), info.get("host"), info.get("started_at"), info.get("command"))

    def describe(self) -> str:
        if self.pid is None:
            return "an unknown process"
        where = f" on {self.host}" if self.host else ""
        since = f", started {self.started_at}" if self.started_at else ""
        command = f" ({self.command})" if self.command else ""
        return f"process {self.pid}{where}{since}{command}"


class RunLock:
    """Exclusive lock on an output directory; a context manager.

    Raises RunLockedError on entry when another live process holds it.
    """

    def __init__(self, output_dir: Path):
        self.path = Path(output_dir) / LOCK_FILE_NAME
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = LockHolder.read(self.path)
            raise RunLockedError(
                f"another run is using this output directory: {holder.describe()}; "
                f"lock file {self.path}. Wait for it to finish, or use another --output-dir."
            ) from None
        previous = LockHolder.read(self.path)
        if previous.pid is not None:
            # We got the lock, so its last holder is gone without releasing the file.
            logger.warning(
                "Taking over a stale lock %s left by %s, which is no longer running.",
                self.path,
                previous.describe(),
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(self._holder_info()).encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def __exit__(self, *exc_info) -> None:
        if self._fd is None:
            return
        # Empty the file before unlocking: an empty lock file means a clean exit.
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # Closing releases the flock.
        self._fd = None

    @staticmethod
    def _holder_info() -> dict[str, object]:
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
        }
