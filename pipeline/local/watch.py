"""`local_runner.py --watch`: one process that stays up and reruns the DAG on every change.

A rerun in a fresh process pays for importing TensorFlow, TFX, Beam and TFMA
again before its first step (docs/where-the-time-goes.md). Here a supervisor
imports them once and then, for each run, forks a child that imports the
project's own modules from disk and runs `local_runner.main` as a fresh
process would. The node process (pipeline/local/node_process.py) is forked
from that child, warm too. So the imports stay, and the code does not:

* TFX reloads only the module it is named by (`trainer.run`, never
  `trainer.model`: tfx 1.16.0, tfx/utils/import_utils.py L62-63) and takes
  executor classes from `sys.modules` (L26-38), while the code fingerprint
  reads the source from disk (pipeline/fingerprint.py). A process that kept
  first-party modules would train the old model under the new cache key.
  Reloading in place is not enough either (a module's old objects live on in
  whatever imported them), so the supervisor holds none of the project's
  modules but this one and `pipeline.fingerprint`, and each child drops them
  all before it imports anything: every step runs the code on disk.
* Keras's session state, TensorFlow's graph and whatever a run allocates go
  with the child: memory stays flat over reruns.
* ML Metadata is opened by each step, as in a fresh run (TFX's Launcher
  takes a connection per node): its SQLite file costs no measurable time to
  open, its library is among the warm imports.

What it watches: the project's files outside tests/, docs/, benchmarks/,
environments and hidden folders (the fork's code, pipeline/config.py, the
dataset directory, the embedded data), the schema directory and the data
root when they lie elsewhere (a local data root only: an object store is
not polled). A change to uv.lock or pyproject.toml, or to the supervisor's
own code, restarts the process: through `./dev run`, which syncs the
environment first, when it was started that way.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import signal
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from contract.fields import one_line
from pipeline.fingerprint import PROJECT_ROOT, is_first_party_file

# Imported once by the supervisor: what every run loads before its first step.
# Whatever a run imports beyond these, the child reports and the supervisor
# imports while it waits, so the list need not be complete.
WARM_IMPORTS = (
    "tensorflow",
    "keras",
    "apache_beam",
    "pyarrow.parquet",
    "tfx.v1",
    "tfx.orchestration.portable.launcher",
    "tensorflow_transform",
    "tensorflow_data_validation",
    "tensorflow_model_analysis",
    "ml_metadata",
)
# Folders of the project that no run reads.
UNWATCHED_DIRS = frozenset(
    {"tests", "docs", "benchmarks", "build", "site", "outputs", "node_modules"}
)
# Editors' temporary files: a save writes them and removes them again.
UNWATCHED_SUFFIXES = (".pyc", ".swp", ".swx", ".tmp", "~")
# A change to these means another environment: the process starts again.
RESTART_FILES = ("uv.lock", "pyproject.toml")
POLL_S = 0.5
# A save is often several writes (a formatter, an editor's backup and rename).
SETTLE_S = 0.3
# Ctrl-C while waiting: a second one within this time quits.
QUIT_WINDOW_S = 2.0
# `./dev run` sets this: a restart goes through it, so the environment is synced first.
DEV_ENTRYPOINT_ENV = "DEV_ENTRYPOINT"


@dataclass(frozen=True)
class Change:
    """What changed since the last scan: the paths, and whether they need a restart."""

    paths: tuple[Path, ...]
    restart: bool

    def describe(self) -> str:
        shown = [_shown(p) for p in self.paths[:3]]
        more = len(self.paths) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _shown(path: Path) -> str:
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


def watched_files(roots: Iterable[Path], unwatched: Iterable[Path] = ()) -> Iterator[Path]:
    """Every file below `roots` that a run can read, outside `unwatched` folders."""
    skipped = {Path(p).resolve() for p in unwatched}
    for root in roots:
        if root.is_file():
            yield root
            continue
        for folder, dirs, files in os.walk(root):
            here = Path(folder)
            dirs[:] = [
                d
                for d in dirs
                if not d.startswith(".")
                and not (here == PROJECT_ROOT and d in UNWATCHED_DIRS)
                and d != "__pycache__"
                and (here / d).resolve() not in skipped
            ]
            for name in files:
                if not name.startswith(".") and not name.endswith(UNWATCHED_SUFFIXES):
                    yield here / name


def own_output_files() -> set[tuple[int, int]]:
    """The files this process's output goes to (`--watch > run.log`): each run writes
    them, so watching them would start a run after every run."""
    found = set()
    for fd in (1, 2):
        try:
            stat = os.fstat(fd)
        except OSError:
            continue
        found.add((stat.st_dev, stat.st_ino))
    return found


def snapshot(roots: Iterable[Path], unwatched: Iterable[Path] = ()) -> dict[Path, tuple]:
    """Each watched file's modification time, size and inode (a rename-over counts)."""
    found = {}
    written_by_runs = own_output_files()
    for path in watched_files(roots, unwatched):
        try:
            stat = path.stat()
        except OSError:  # Removed while walking: the next scan says so.
            continue
        if (stat.st_dev, stat.st_ino) not in written_by_runs:
            found[path] = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    return found


def changed(before: dict[Path, tuple], after: dict[Path, tuple]) -> Change | None:
    paths = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if not paths:
        return None
    own = {Path(__file__).resolve(), (PROJECT_ROOT / "local_runner.py").resolve()}
    restart = any(p.name in RESTART_FILES and p.parent == PROJECT_ROOT for p in paths) or any(
        p.resolve() in own for p in paths
    )
    return Change(tuple(paths), restart)


def watch_roots(args: argparse.Namespace) -> tuple[list[Path], list[Path]]:
    """The folders to poll, and those inside them to leave out (the output directory)."""
    roots = [PROJECT_ROOT]
    for given in (args.schema_dir, args.data_root):
        if given is None or "://" in str(given):
            continue  # Inside the project by default; an object store is not polled.
        path = Path(given).resolve()
        if not path.is_relative_to(PROJECT_ROOT) and path.exists():
            roots.append(path)
    return roots, [Path(args.output_dir).resolve()]


def _modules(first_party: bool) -> list[str]:
    """The names of the modules this process holds that are (or are not) the project's,
    in import order; __main__, the supervisor's script, is neither: it is never run again."""
    names = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name != "__main__" and file and is_first_party_file(Path(file)) == first_party:
            names.append(name)
    return names


def drop_first_party_modules() -> None:
    """Removes the project's modules from `sys.modules`: the next import reads the disk."""
    for name in _modules(first_party=True):
        del sys.modules[name]
    importlib.invalidate_caches()


def third_party_modules() -> list[str]:
    """The modules this process holds that are not the project's, in import order."""
    return _modules(first_party=False)


def warm_up(names: Iterable[str]) -> None:
    """Imports `names` that are not imported yet; one that fails to import is skipped."""
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except BaseException:  # An optional or broken module: a run imports what it needs.
            sys.modules.pop(name, None)


def run_in_child(runner_module: str, run_argv: Sequence[str]) -> tuple[int, float]:
    """Forks a child that runs `runner_module`'s `main(run_argv)` on the code on disk.

    Returns the child's exit code and its wall time. The supervisor imports
    what the child reports it imported beyond the warm set, for the next run.
    """
    read_end, write_end = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # The child: a run, as a fresh process runs it, then gone.
        os.close(read_end)
        code = _child_main(runner_module, run_argv, write_end)
        os._exit(code)
    os.close(write_end)
    # Read before waiting: the list is larger than a pipe holds.
    names = _read_all(read_end).decode(errors="replace").split()
    code = _wait_for(pid)
    warm_up(names)
    return code, time.monotonic() - started


def _read_all(fd: int) -> bytes:
    """Everything the child writes to `fd` until it closes it (or exits)."""
    chunks: list[bytes] = []
    with os.fdopen(fd, "rb") as reported:
        while True:
            try:
                chunk = reported.read1(1 << 16)
            except KeyboardInterrupt:
                continue  # The child is told too (its process group) and ends its run.
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def _wait_for(pid: int) -> int:
    """The child's exit code; Ctrl-C meanwhile reaches the child (its process group) too."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)
        except KeyboardInterrupt:
            continue  # The child says it was interrupted; the supervisor waits on.


def _child_main(runner_module: str, run_argv: Sequence[str], report_fd: int) -> int:
    # The supervisor's exit handlers are its own; a child runs only those its run registers.
    atexit._clear()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    drop_first_party_modules()
    code = 1
    try:
        # The runner's module, imported afresh like the rest: it names itself.
        runner = importlib.import_module(runner_module)
        code = runner.main(list(run_argv), warm=True)
    except KeyboardInterrupt:
        print("error: interrupted; the serving directory was not changed", file=sys.stderr)
        code = 130
    except BaseException as err:  # A bad edit fails at import: one line, then wait.
        # Not error_text: pipeline/local/run.py may be the file the bad edit broke.
        print(f"error: {type(err).__name__}: {one_line(err)}", file=sys.stderr)
    finally:
        try:
            os.write(report_fd, " ".join(third_party_modules()).encode())
            os.close(report_fd)
        except OSError:
            pass
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    return code if isinstance(code, int) else 1


def wait_for_change(
    roots: list[Path], unwatched: list[Path], last: dict[Path, tuple]
) -> tuple[Change, dict[Path, tuple]]:
    """Blocks until a watched file changes and the writes settle; Ctrl-C twice quits."""
    interrupted_at = None
    while True:
        try:
            time.sleep(POLL_S)
            now = snapshot(roots, unwatched)
            change = changed(last, now)
            if change is None:
                continue
            time.sleep(SETTLE_S)
            settled = snapshot(roots, unwatched)
            if settled != now:
                continue  # Still being written: look again.
            return changed(last, settled) or change, settled
        except KeyboardInterrupt:
            moment = time.monotonic()
            if interrupted_at is not None and moment - interrupted_at < QUIT_WINDOW_S:
                raise
            interrupted_at = moment
            print(f"watch: press Ctrl-C again within {QUIT_WINDOW_S:g} s to quit", file=sys.stderr)


def restart(argv: Sequence[str]) -> None:
    """Starts this process again with the same flags, through `./dev run` where it came from."""
    sys.stdout.flush()
    sys.stderr.flush()
    entrypoint = os.environ.get(DEV_ENTRYPOINT_ENV)
    if entrypoint:
        os.execv(entrypoint, [entrypoint, "run", *argv])
    os.execv(sys.executable, [sys.executable, str(PROJECT_ROOT / "local_runner.py"), *argv])


def watch(argv: Sequence[str], args: argparse.Namespace, runner_module: str) -> int:
    """Runs the DAG, then again after every change, until Ctrl-C twice while it waits.

    `argv`: the runner's flags with `--watch`; `args`: them parsed; `runner_module`:
    the runner's module name, whose `main(argv, warm=True)` each run calls. Each run prints
    its own lines and ends with its usual exit code's line; this says when it
    waits and what started the next run.
    """
    # Ctrl-C is how one leaves watch mode, even where it was started with SIGINT
    # ignored (a job a shell put in the background).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    run_argv = [a for a in argv if a != "--watch"]
    roots, unwatched = watch_roots(args)
    last = snapshot(roots, unwatched)  # Before the imports: an edit meanwhile counts.
    warm_up(WARM_IMPORTS)
    # As each run does: the import heap is never garbage, and children share it untouched.
    gc.freeze()
    runs = 0
    try:
        while True:
            runs += 1
            code, seconds = run_in_child(runner_module, run_argv)
            print(
                f"watch: run {runs} ended with exit code {code} in {seconds:.1f} s; "
                "waiting for a change (Ctrl-C twice to quit)",
                flush=True,
            )
            change, last = wait_for_change(roots, unwatched, last)
            if change.restart:
                print(f"watch: {change.describe()} changed; restarting", flush=True)
                restart(argv)
            print(f"watch: {change.describe()} changed; running again", flush=True)
    except KeyboardInterrupt:
        print("watch: stopped", file=sys.stderr)
        return 130
