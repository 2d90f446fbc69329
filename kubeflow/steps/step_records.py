"""What each Kubeflow step records about its own attempts, for the run's status report.

Open-source KFP tells an exit handler only the state of the DAG it guards
(`PipelineTaskFinalStatus`, whose error the backend leaves empty as of 2.14),
and a step cannot read KFP's metadata store. So every step records itself:
`kubeflow.step_entrypoint` writes `step_record.json` beside the step's output
artifacts when an attempt starts, and again when it ends, with the error that
ended it (the exception, e.g. a gate's `DataValidationError` naming the
feature) or the metadata of the artifacts it produced.

Where: the directory that holds the step's output artifacts. On KFP that is
`<pipeline root>/<pipeline>/<run id>/<task>[/<uuid>]/<output>` (the backend's
driver, `provisionOutputs`), and kfp.local uses `<root>/<run>/<task>/<output>`;
in both, the task's name is one path segment below the run's directory. The
exit handler finds the run's directory from its own output URI the same way
(`run_directory`), and each step's record under `<run dir>/<step>/`.

A step served from KFP's cache does not run, so it writes no record in this
run. An attempt that started and never ended was killed (out of memory, a
preempted node, a deadline): its record still says "running".
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from components import store_files

RECORD_FILE = "step_record.json"
RUNNING, SUCCEEDED, FAILED = "running", "succeeded", "failed"


@dataclass(frozen=True)
class Attempt:
    number: int  # from 0, KFP's retry index
    started_ms: int
    ended_ms: int | None = None
    outcome: str = RUNNING
    error: str | None = None


@dataclass(frozen=True)
class OutputArtifact:
    uri: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepRecord:
    attempts: tuple[Attempt, ...]
    outputs: dict[str, tuple[OutputArtifact, ...]] = field(default_factory=dict)

    @property
    def last(self) -> Attempt:
        return self.attempts[-1]

    def output(self, name: str) -> OutputArtifact | None:
        found = self.outputs.get(name, ())
        return found[0] if found else None

    def to_json(self) -> str:
        return json.dumps(
            {
                "attempts": [a.__dict__ for a in self.attempts],
                "outputs": {
                    name: [a.__dict__ for a in found] for name, found in self.outputs.items()
                },
            },
            indent=1,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> StepRecord:
        raw = json.loads(text)
        return cls(
            attempts=tuple(Attempt(**a) for a in raw["attempts"]),
            outputs={
                name: tuple(OutputArtifact(**a) for a in artifacts)
                for name, artifacts in raw.get("outputs", {}).items()
            },
        )


def task_directory(output_uri: str) -> str:
    """The directory KFP gives a task, which holds its outputs: an output URI's parent."""
    return output_uri.rstrip("/").rsplit("/", 1)[0]


def record_path(output_uris: list[str]) -> str | None:
    """Where a step with these output artifacts keeps its record; None without outputs."""
    return f"{task_directory(sorted(output_uris)[0])}/{RECORD_FILE}" if output_uris else None


def read_record(path: str) -> StepRecord | None:
    if not store_files.exists(path):
        return None
    with store_files.open(path, "r") as f:
        return StepRecord.from_json(f.read())


def now_ms() -> int:
    return int(time.time() * 1000)


def start_attempt(path: str, number: int | None = None) -> StepRecord:
    """Records a new attempt; `number` (KFP's retry index) defaults to the next one."""
    previous = read_record(path)
    attempts = previous.attempts if previous else ()
    number = len(attempts) if number is None else number
    record = StepRecord(attempts=(*attempts, Attempt(number=number, started_ms=now_ms())))
    store_files.write_text(path, record.to_json())
    return record


def finish_attempt(
    path: str,
    outcome: str,
    error: str | None = None,
    outputs: dict[str, tuple[OutputArtifact, ...]] | None = None,
) -> StepRecord:
    """Closes the latest attempt with its outcome (and the outputs of a success)."""
    record = read_record(path) or start_attempt(path)
    last = record.last
    closed = Attempt(last.number, last.started_ms, now_ms(), outcome, error)
    record = StepRecord(attempts=(*record.attempts[:-1], closed), outputs=dict(outputs or {}))
    store_files.write_text(path, record.to_json())
    return record


def run_directory(own_uri: str, own_task: str) -> str | None:
    """The run's directory: `own_uri` up to the path segment naming the task that holds it."""
    scheme, sep, path = own_uri.partition("://")
    if not sep:
        scheme, path = "", own_uri
    parts = path.split("/")
    # Not the last part: that is the artifact's own name.
    segments = [i for i, part in enumerate(parts[:-1]) if part == own_task]
    if not segments:
        return None
    directory = "/".join(parts[: segments[-1]])
    return f"{scheme}://{directory}" if sep else directory


def find_record(run_dir: str, step: str) -> StepRecord | None:
    """A step's record in the run's directory: `<step>/` or one level below it."""
    candidates = [f"{run_dir}/{step}/{RECORD_FILE}"]
    if store_files.isdir(f"{run_dir}/{step}"):
        candidates += sorted(store_files.glob(f"{run_dir}/{step}/*/{RECORD_FILE}"))
    records = [r for r in (read_record(path) for path in candidates) if r is not None]
    return max(records, key=lambda r: r.attempts[0].started_ms) if records else None
