"""The suite's profile: where a run's seconds go, and how xdist spread them.

`./dev test --suite-profile DIR` writes, when the run ends:

- `DIR/profile.csv`: one row per fixture set-up and per test phase (setup, call,
  teardown): what, which test, which worker, its start and end as offsets from
  the run's start, and its seconds;
- `DIR/profile.md`: the tables docs/tests.md shows: each worker's span and busy
  time, each module's span on its worker in the order the worker ran them, and
  the slowest fixture set-ups, calls and teardowns; with the load average at the
  start, the highest seen, and at the end;
- `DIR/steps.csv`, and a table in profile.md: each execution of a compiled package
  (`execute` in tests/harness.py reports its summary here), step by step: its
  seconds, the part spent starting the step's process before its executor ran,
  and the rest of the execution's time: earlier attempts of retried steps
  (a step's seconds are its last attempt's), kfp.local and the driver.

Without the option nothing is registered: no hook of this module's recorder runs.
A fixture's set-up is timed around pytest's own `pytest_fixture_setup`, after the
fixtures it depends on are set up, so its seconds are its own; a session fixture
built once for all workers (`built_once`) counts on the worker that built it,
and its wait for the lock on the others.
"""

from __future__ import annotations

import csv
import os
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import pytest

OPTION = "--suite-profile"
# How many rows each "slowest" table of profile.md keeps (profile.csv keeps all).
SLOWEST_ROWS = 20
_WORKEROUTPUT_KEY = "suite_profile"
_WORKEROUTPUT_STEPS_KEY = "suite_profile_steps"
# The row of an execution's time outside its steps' last attempts.
OTHER = "(earlier attempts, between steps)"


@dataclass(frozen=True)
class StepRecord:
    """One step of one execution of a compiled package (run_compiled.py's summary)."""

    test: str  # the test (or the fixture's first test) that executed the package
    worker: str
    execution: str  # the name `execute` gave it ("first", "second", ...)
    step: str
    status: str
    seconds: float
    startup_seconds: float  # from the process's start to the executor's first line


@dataclass(frozen=True)
class Record:
    """One timed span: a fixture's set-up, or a test's setup, call or teardown."""

    kind: str  # "fixture", "setup", "call" or "teardown"
    name: str  # the fixture's name, or the test's node id
    test: str  # the test's node id (for a fixture: the test that set it up)
    scope: str  # the fixture's scope; for a test phase its outcome
    worker: str  # xdist's worker id ("gw0", ...), or "main" without xdist
    start: float  # seconds since the epoch
    stop: float

    @property
    def seconds(self) -> float:
        return self.stop - self.start

    @property
    def module(self) -> str:
        return self.test.split("::", 1)[0]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("suite profile").addoption(
        OPTION,
        metavar="DIR",
        default=None,
        help="write each fixture's set-up, each test's phases and the workers' "
        "spread to DIR/profile.csv and DIR/profile.md (docs/tests.md)",
    )


def pytest_configure(config: pytest.Config) -> None:
    target = config.getoption(OPTION.lstrip("-").replace("-", "_"))
    if target is None:
        return
    directory = Path(target)
    if directory.exists() and not directory.is_dir():
        raise pytest.UsageError(f"{OPTION}: {directory} exists and is not a directory")
    # xdist hands each worker its id; PYTEST_XDIST_WORKER would also be inherited
    # by a pytest that a test starts.
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    config.pluginmanager.register(Recorder(directory, worker), "suite_profile_recorder")


# This process's recorder while --suite-profile is on (tests/harness.py reports to it).
_ACTIVE: list[Recorder] = []


def record_execution(name: str, summary: dict) -> None:
    """An executed package's summary, charged to the running test; nothing when off."""
    if not _ACTIVE:
        return
    recorder = _ACTIVE[0]
    recorder.steps.extend(
        StepRecord(
            recorder.current_test,
            recorder.worker,
            name,
            step,
            outcome["status"],
            float(outcome.get("seconds") or 0.0),
            float(outcome.get("startup_seconds") or 0.0),
        )
        for step, outcome in summary["steps"].items()
    )
    # The rest: a retried step's earlier attempts (its seconds are the last
    # attempt's), kfp.local and the driver between the steps.
    outside = summary["seconds"] - sum(
        float(o.get("seconds") or 0.0) for o in summary["steps"].values()
    )
    recorder.steps.append(
        StepRecord(recorder.current_test, recorder.worker, name, OTHER, "", outside, 0.0)
    )


class Recorder:
    """Times fixtures and test phases in each process; the controller (or the
    only process, without xdist) gathers the workers' records and writes the files."""

    def __init__(self, directory: Path, worker: str) -> None:
        self.directory = directory
        self.worker = worker
        self.records: list[Record] = []
        self.started = time.time()
        self.loads = [os.getloadavg()[0]]
        self.current_test = ""
        self.steps: list[StepRecord] = []
        _ACTIVE[:] = [self]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> None:
        self.current_test = item.nodeid

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        start = time.time()
        try:
            return (yield)
        finally:
            self.records.append(
                Record(
                    "fixture",
                    fixturedef.argname,
                    self.current_test,
                    fixturedef.scope,
                    self.worker,
                    start,
                    time.time(),
                )
            )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.loads.append(os.getloadavg()[0])
        if hasattr(report, "node"):  # the controller: the worker recorded it
            return
        self.records.append(
            Record(
                report.when,
                report.nodeid,
                report.nodeid,
                report.outcome,
                self.worker,
                report.start,
                report.stop,
            )
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        rows = getattr(node, "workeroutput", {}).get(_WORKEROUTPUT_KEY, [])
        self.records.extend(Record(**row) for row in rows)
        steps = getattr(node, "workeroutput", {}).get(_WORKEROUTPUT_STEPS_KEY, [])
        self.steps.extend(StepRecord(**row) for row in steps)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: hand the records over
            workeroutput[_WORKEROUTPUT_KEY] = [asdict(r) for r in self.records]
            workeroutput[_WORKEROUTPUT_STEPS_KEY] = [asdict(s) for s in self.steps]
            return
        self.loads.append(os.getloadavg()[0])
        self.directory.mkdir(parents=True, exist_ok=True)
        write_csv(self.directory / "profile.csv", self.records, self.started)
        write_steps_csv(self.directory / "steps.csv", self.steps)
        (self.directory / "profile.md").write_text(
            render_markdown(self.records, self.started, time.time(), self.loads)
            + render_steps(self.steps)
        )

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if getattr(terminalreporter.config, "workeroutput", None) is None:
            terminalreporter.write_line(f"suite profile: {self.directory / 'profile.md'}")


def write_csv(path: Path, records: list[Record], started: float) -> None:
    names = [f.name for f in fields(Record) if f.name not in ("start", "stop")]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*names, "start_s", "end_s", "seconds"])
        for r in sorted(records, key=lambda r: (r.start, r.stop)):
            writer.writerow(
                [
                    *(getattr(r, n) for n in names),
                    f"{r.start - started:.2f}",
                    f"{r.stop - started:.2f}",
                    f"{r.seconds:.2f}",
                ]
            )


def write_steps_csv(path: Path, steps: list[StepRecord]) -> None:
    names = [f.name for f in fields(StepRecord)]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(names)
        writer.writerows([getattr(s, n) for n in names] for s in steps)


def render_steps(steps: list[StepRecord]) -> str:
    """Each execution's seconds, in steps and start-up, and each step's over all executions."""
    if not steps:
        return ""
    executions: dict[tuple[str, str, str], list[StepRecord]] = defaultdict(list)
    by_step: dict[str, list[StepRecord]] = defaultdict(list)
    for s in steps:
        executions[(s.test.split("::", 1)[0], s.execution, s.worker)].append(s)
        by_step[s.step].append(s)
    rows = [
        [
            f"`{module}`",
            execution,
            worker,
            str(sum(s.step != OTHER for s in own)),
            str(sum(s.status == "CACHED" for s in own)),
            f"{sum(s.seconds for s in own):.0f}",
            f"{sum(s.startup_seconds for s in own):.0f}",
            f"{sum(s.seconds for s in own if s.step == OTHER):.0f}",
        ]
        for (module, execution, worker), own in executions.items()
    ]
    lines = ["", "## Executed packages, step by step", ""]
    lines += _table(
        ["module", "execution", "worker", "steps", "cached", "seconds", "start-up s", "other s"],
        rows,
    )
    lines += ["", "## Each step over all executions", ""]
    rows = [
        [
            f"`{step}`",
            str(len(own)),
            f"{sum(s.seconds for s in own):.0f}",
            f"{sum(s.startup_seconds for s in own):.0f}",
        ]
        for step, own in sorted(by_step.items(), key=lambda kv: -sum(s.seconds for s in kv[1]))
    ]
    lines += _table(["step", "executions", "seconds", "start-up s"], rows)
    return "\n".join(lines) + "\n"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    # A test id's parameters may hold a `|`, which would end a cell.
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
        *("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows),
    ]


def _slowest(records: list[Record], kind: str, started: float) -> list[list[str]]:
    chosen = sorted((r for r in records if r.kind == kind), key=lambda r: -r.seconds)
    return [
        [
            f"{r.seconds:.1f}",
            f"`{r.name}`" if kind == "fixture" else f"`{r.test}`",
            *([f"`{r.test}`", r.scope] if kind == "fixture" else []),
            r.worker,
            f"{r.start - started:.0f}",
            f"{r.stop - started:.0f}",
        ]
        for r in chosen[:SLOWEST_ROWS]
    ]


def render_markdown(
    records: list[Record], started: float, finished: float, loads: list[float]
) -> str:
    phases = [r for r in records if r.kind != "fixture"]
    by_worker: dict[str, list[Record]] = defaultdict(list)
    for r in phases:
        by_worker[r.worker].append(r)
    lines = [
        "# Suite profile",
        "",
        f"Wall time {finished - started:.0f} s; {len({r.test for r in phases})} tests on "
        f"{len(by_worker)} worker(s); {os.cpu_count()} cores; load average (1 min) "
        f"{loads[0]:.2f} at the start, {max(loads):.2f} at most, {loads[-1]:.2f} at the end. "
        "Offsets are seconds from the run's start.",
        "",
        "## Workers",
        "",
    ]
    rows = []
    for worker, own in sorted(by_worker.items()):
        rows.append(
            [
                worker,
                str(len({r.test for r in own})),
                f"{min(r.start for r in own) - started:.0f}",
                f"{max(r.stop for r in own) - started:.0f}",
                f"{sum(r.seconds for r in own):.0f}",
            ]
        )
    lines += _table(["worker", "tests", "first start", "last end", "busy s"], rows)
    lines += ["", "## Modules, in the order each worker ran them", ""]
    spans: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in phases:
        spans[(r.worker, r.module)].append(r)
    rows = []
    for (worker, module), own in sorted(
        spans.items(), key=lambda kv: (kv[0][0], min(r.start for r in kv[1]))
    ):
        start, stop = min(r.start for r in own), max(r.stop for r in own)
        setups = [r.seconds for r in own if r.kind == "setup"]
        rows.append(
            [
                worker,
                f"`{module}`",
                str(len({r.test for r in own})),
                f"{start - started:.0f}",
                f"{stop - started:.0f}",
                f"{stop - start:.0f}",
                f"{max(setups, default=0.0):.0f}",
            ]
        )
    lines += _table(["worker", "module", "tests", "start", "end", "seconds", "longest setup"], rows)
    for kind, title, header in (
        ("fixture", "fixture set-ups", ["seconds", "fixture", "first test", "scope"]),
        ("call", "calls", ["seconds", "test"]),
        ("teardown", "teardowns", ["seconds", "test"]),
    ):
        lines += ["", f"## The {SLOWEST_ROWS} slowest {title}", ""]
        lines += _table([*header, "worker", "start", "end"], _slowest(records, kind, started))
    return "\n".join(lines) + "\n"
