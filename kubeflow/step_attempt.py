"""One attempt of a Kubeflow step: a clean start, and a record of how it ended.

KFP retries a step (`retryPolicy`, kubeflow/settings/retries.py) by starting its pod
again with the same executor input, so an attempt finds whatever the one
before it left at the same output URIs: Beam shards of another shard count,
half a SavedModel. TFX's executors write into their output directories
without clearing them, and a later step reads everything there. So each
attempt first removes what is at its output URIs (`clear_outputs`); they are
this execution's own (KFP makes them unique per run and task), never a
cached or served artifact.

Each attempt is also recorded beside those outputs (kubeflow/steps/
step_records.py): started, then succeeded with the metadata of its outputs,
or failed with its error. The run's exit handler reads the records to say
which step failed and why, which open-source KFP does not tell it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

# KFP's launcher (2.15+) gets Argo's retry index in this variable; earlier
# backends do not set it, and the record counts attempts itself.
RETRY_INDEX_ENV = "KFP_RETRY_INDEX"
# The part of an error kept in the record: a Beam failure repeats the whole stack.
MAX_ERROR_CHARS = 4000


def artifact_uris(executor_input: dict[str, Any], side: str = "outputs") -> list[str]:
    """The URIs of the executor input's output (or input) artifacts, sorted."""
    return sorted(
        artifact["uri"]
        for artifact_list in executor_input.get(side, {}).get("artifacts", {}).values()
        for artifact in artifact_list.get("artifacts", [])
        if artifact.get("uri")
    )


def clear_outputs(uris: list[str]) -> list[str]:
    """Removes what an earlier attempt wrote at `uris`; returns the URIs that held something."""
    from components import store_files

    cleared = []
    for uri in uris:
        if store_files.isdir(uri):
            store_files.rmtree(uri)
        elif store_files.exists(uri):
            store_files.remove(uri)
        else:
            continue
        cleared.append(uri)
    return cleared


def _outputs(executor_input: dict[str, Any]):
    """The output artifacts' URIs and metadata, from the executor output TFX wrote."""
    from kubeflow.steps.step_records import OutputArtifact

    path = executor_input.get("outputs", {}).get("outputFile", "")
    if not path or not os.path.isfile(path):
        return {}
    with open(path) as f:
        written = json.load(f).get("artifacts", {})
    return {
        name: tuple(
            OutputArtifact(uri=a.get("uri", ""), metadata=a.get("metadata", {}))
            for a in artifact_list.get("artifacts", [])
        )
        for name, artifact_list in written.items()
    }


def _retry_index() -> int | None:
    value = os.environ.get(RETRY_INDEX_ENV, "")
    return int(value) if value.isdigit() else None


class AttemptOutcome:
    """What the step reports back: its exit code, or the exception that ended it."""

    def __init__(self) -> None:
        self.exit_code: int | None = None


@contextmanager
def recorded_attempt(executor_input: dict[str, Any]) -> Iterator[AttemptOutcome]:
    """Clears the outputs, records the start, and records the end (also on an exception).

    Recording never fails the step: a record that cannot be written costs the
    status report a line, not the run.
    """
    from absl import logging

    from kubeflow.steps import step_records

    uris = artifact_uris(executor_input)
    cleared = clear_outputs(uris)
    if cleared:
        logging.info("Removed what an earlier attempt left at %s", ", ".join(cleared))
    path = step_records.record_path(uris)
    outcome = AttemptOutcome()

    def record(action, *args, **kwargs) -> None:
        if path is None:
            return
        try:
            action(path, *args, **kwargs)
        except Exception as err:  # Never fails the step: see the docstring.
            logging.warning("Could not write the step record %s: %s", path, err)

    record(step_records.start_attempt, _retry_index())
    try:
        yield outcome
    except BaseException as err:
        text = f"{type(err).__name__}: {err}"
        if isinstance(err, SystemExit):
            text = f"exited with code {err.code}"
        record(step_records.finish_attempt, step_records.FAILED, error=text[:MAX_ERROR_CHARS])
        _remove_folder_markers(uris, _outputs(executor_input))
        raise
    outputs = _outputs(executor_input)
    if outcome.exit_code:
        record(
            step_records.finish_attempt,
            step_records.FAILED,
            error=f"exited with code {outcome.exit_code}",
        )
    else:
        record(step_records.finish_attempt, step_records.SUCCEEDED, outputs=outputs)
    _remove_folder_markers(uris, outputs)


def written_locations(output_uris: list[str], outputs: Mapping[str, Sequence[Any]]) -> list[str]:
    """Where a step writes: its task directory (its outputs' parent) and every
    s3:// or gs:// location its outputs' metadata names (the Pusher's pushed version)."""
    from kubeflow.steps.step_records import task_directory
    from pipeline.object_store import is_remote

    named = [
        value
        for artifacts in outputs.values()
        for artifact in artifacts
        for value in artifact.metadata.values()
        if isinstance(value, str) and is_remote(value)
    ]
    return sorted({*(task_directory(uri) for uri in output_uris), *named})


def _remove_folder_markers(output_uris: list[str], outputs: Mapping[str, Sequence[Any]]) -> None:
    """Removes the folder markers the attempt left where it wrote (pipeline.object_store
    .remove_folder_markers says how TensorFlow leaves them on S3 and GCS): a downstream step's
    launcher would fail to download them. Never fails the step; says what is left."""
    from absl import logging

    from pipeline import object_store

    locations = written_locations(output_uris, outputs)
    try:
        removed = object_store.remove_folder_markers(locations)
    except Exception as err:  # The step's own outcome stands; see the docstring.
        logging.warning(
            "Could not check %s for folder markers (%s): a step that downloads a marker "
            "fails before it starts",
            ", ".join(locations),
            err,
        )
        return
    if removed:
        logging.info("Removed folder markers TensorFlow left: %s", ", ".join(removed))
