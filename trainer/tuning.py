"""The search: KerasTuner trials of the search space, on the Trainer's own inputs and model.

Each trial builds `trainer/search_space.py`'s `Hyperparameters` with the
Trainer's code (`compiled_model`), fits it for a fixed number of steps on
the train split and scores it on the eval split (`val_loss`: the quantity
training minimises; the gate metric ties too often after a few steps to rank
by). The holdout the Evaluator blesses with is never read here.

The oracle's state lives in `directory`, not a temporary one: a search run
again on the same directory reloads it, skips the completed trials and
reruns the one that was cut off. Seeded: the oracle draws the same values in
the same order, and each trial starts from the same weights and batches, so
the same search picks the same best trial. A deadline (wall clock) stops
the search between batches; the trial then running is left for a resumed
search, and the best completed trial is the result, marked partial.

Parallel trials use KerasTuner's own chief/worker protocol
(trainer/tuning_workers.py): `serve_workers` is the chief, serving the oracle
with KerasTuner's gRPC servicer, and each worker (`python -m trainer.tuning`,
with `KERASTUNER_ORACLE_IP`, `KERASTUNER_ORACLE_PORT` and `KERASTUNER_TUNER_ID`
set) asks it for trials.

Port register: docs/ports.md
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras
import keras_tuner

from contract.dataset.parse import spec_from_custom_config
from contract.dataset.sections import GATE_METRICS
from contract.dataset.spec import DatasetSpec
from trainer.config import ModelConfig, TrainerConfig
from trainer.fork.search_space_file import hyperparameters_class, search_space
from trainer.run import InputFiles, TrainingInputs, compiled_model, training_inputs
from trainer.runtime import resolve_runtime
from trainer.tuning_workers import EXIT_DEADLINE, serve_workers

logger = logging.getLogger(__name__)

OBJECTIVE = "val_loss"
PROJECT_NAME = "search"


class DeadlineReached(keras_tuner.errors.FatalError):
    """The search's wall-clock deadline passed; the best completed trial stands.

    A FatalError, so that KerasTuner's search loop lets it through (any other
    error from a trial marks the trial failed and goes on) and leaves the trial
    then running in the oracle's state, for a resumed search to run again. Its
    own class, not a cause: Keras re-raises errors from `fit` without theirs.
    """


@dataclass(frozen=True)
class SearchSettings:
    """One search: where its state lives, its budget and its seed.

    `deadline`: seconds since the epoch (time.time()) after which no batch
    runs, or None.
    """

    directory: str
    max_trials: int
    steps_per_trial: int
    eval_steps: int
    seed: int = 42
    deadline: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_trials", "steps_per_trial", "eval_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class TrialResult:
    """One trial: the values drawn, the ModelConfig they make, and its score (None unless
    completed)."""

    trial_id: str
    status: str
    score: float | None
    gate_metric: float | None
    hyperparameters: dict
    model: dict


@dataclass(frozen=True)
class SearchResult:
    trials: tuple[TrialResult, ...]
    best: TrialResult | None
    partial: bool
    ran: tuple[str, ...]  # The trials this process ran; a resumed search skips the others.
    objective: str = OBJECTIVE
    direction: str = "min"

    @property
    def completed(self) -> tuple[TrialResult, ...]:
        return tuple(t for t in self.trials if t.status == "COMPLETED")


def model_values(config: ModelConfig) -> dict:
    """A ModelConfig as the frozen file holds it (lists, not tuples)."""
    values = dataclasses.asdict(config)
    values["hidden_units"] = list(values["hidden_units"])
    return values


class _DeadlineCallback(keras.callbacks.Callback):
    def __init__(self, deadline: float | None) -> None:
        super().__init__()
        self.deadline = deadline

    def on_train_batch_end(self, batch, logs=None) -> None:
        if self.deadline is not None and time.time() >= self.deadline:
            raise DeadlineReached()


def search(
    *,
    config: TrainerConfig,
    spec: DatasetSpec,
    files: InputFiles,
    settings: SearchSettings,
    space: Callable[..., ModelConfig] | None = None,
    parallel: int = 1,
    **serving: Any,
) -> SearchResult:
    """Runs (or resumes) the search in `settings.directory`; returns every trial and the best.

    `parallel` > 1: this process serves the oracle and `parallel` workers run
    the trials (`serve_workers`, which takes `serving`: by default processes
    on 127.0.0.1; the Kubeflow tuning step's are pods).
    """
    space = space or search_space()  # the fork's (trainer/search_space.py)
    tuner, ran, gate_metric = _tuner(config, spec, files, settings, space)
    tuner.oracle.resume()
    trials = tuner.oracle.trials.values()
    finished = len(trials) >= settings.max_trials and all(t.status != "RUNNING" for t in trials)
    # Workers elsewhere (`serving`: the Kubeflow step's pods) are workers however many.
    if (parallel > 1 or serving) and not finished:
        before = {t for t, trial in tuner.oracle.trials.items() if trial.status == "COMPLETED"}
        job = _worker_job(config, spec, files, settings)
        partial = serve_workers(tuner.oracle, parallel, job, settings.directory, **serving)
        ran = sorted((t for t in tuner.oracle.trials if t not in before), key=int)
        return _result(tuner.oracle, space, gate_metric, ran, partial)
    return _result(tuner.oracle, space, gate_metric, ran, partial=not _search(tuner))


def _search(tuner) -> bool:
    """Runs KerasTuner's search loop; False where the deadline stopped it."""
    try:
        tuner.search()
    except DeadlineReached:
        return False
    return True


class SearchStateError(ValueError):
    """A file of the search's state cannot be read back."""


def save_state(path: str, state: Any) -> None:
    """Writes one of the search's state files whole or not at all.

    KerasTuner 1.4.8 writes its files in place (keras_tuner/src/utils.py,
    `save_json`, lines 81-94: the file is opened for writing, so emptied, then
    written), and a search killed between the two left an empty `oracle.json`
    or `tuner0.json`: the resumed search failed to parse it, and the trials it
    had completed were lost with it. Locally the state goes to a file beside
    it, then takes its name (a rename within a directory is atomic); on an
    object store an upload is already whole or absent, and a rename would be a
    copy and a delete.
    """
    import json
    import threading

    text = json.dumps(state)
    if "://" in path:
        import tensorflow as tf

        with tf.io.gfile.GFile(path, "w") as f:
            f.write(text)
        return
    # The chief's oracle answers its workers from several gRPC threads.
    temporary = f"{path}.{os.getpid()}-{threading.get_ident()}.tmp"
    with open(temporary, "w") as f:
        f.write(text)
    os.replace(temporary, path)


def read_state(path: str, project_dir: str) -> Any:
    """A state file of the search, parsed; SearchStateError naming it if it is not whole."""
    import json

    import tensorflow as tf

    with tf.io.gfile.GFile(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SearchStateError(
            f"the search's state file {path} is not whole JSON ({err.msg}, "
            f"{len(text)} bytes): a write to it was cut off; remove {project_dir} "
            "to start the search again"
        ) from None


class BudgetedOracle(keras_tuner.oracles.RandomSearchOracle):
    """KerasTuner's random search, its budget counted in completed trials.

    KerasTuner hands out a trial a killed search left RUNNING (its retry queue)
    before it checks `max_trials` (keras-tuner 1.4.8, src/engine/oracle.py,
    `Oracle.create_trial`; `reload` queues the running trials), so a search
    resumed with a smaller budget than it ran under (`--max-trials 3` on a
    search of 12) ran a trial more than asked. Here no trial starts once
    `max_trials` trials have completed.
    """

    def create_trial(self, tuner_id: str) -> Any:
        completed = sum(t.status == "COMPLETED" for t in self.trials.values())
        if tuner_id not in self.ongoing_trials and completed >= self.max_trials:
            self._retry_queue.clear()  # KerasTuner's own attribute (1.4.8, oracle.py)
        return super().create_trial(tuner_id)


class ResumingOracle(BudgetedOracle):
    """The budgeted search, resumed from the trials' own files after a kill.

    KerasTuner 1.4.8 saves the oracle's state in `Oracle.end_trial` before it
    drops the ended trial from its ongoing ones, and nothing saves it again
    until the next trial starts (keras_tuner/src/engine/oracle.py, 1.4.8,
    `end_trial`: `self.save()` at line 591, the `ongoing_trials.pop` at
    line 599); `reload` sends every ongoing trial back to run (lines 769-772).
    A search killed in between (SIGKILL runs no `finally`; a parallel search's
    last trials start no other) would run a completed trial again. Each
    trial's own file (`trial_*/trial.json`) is written before the oracle's
    state, so it is the truth: only the trials it says are running, or that
    KerasTuner queued for a retry, run again.
    """

    reloaded = False

    def save(self) -> None:
        save_state(self._get_oracle_fname(), self.get_state())

    def _save_trial(self, trial) -> None:
        save_state(
            os.path.join(self._get_trial_dir(trial.trial_id), "trial.json"), trial.get_state()
        )

    def reload(self) -> None:
        import tensorflow as tf

        # Each file KerasTuner's `reload` reads (oracle.py, 1.4.8, lines 750-772).
        trial_files = tf.io.gfile.glob(os.path.join(self._project_dir, "trial_*", "trial.json"))
        for path in [*trial_files, self._get_oracle_fname()]:
            read_state(path, self._project_dir)
        super().reload()
        self.reloaded = True
        status = keras_tuner.engine.trial.TrialStatus
        ended = (status.COMPLETED, status.FAILED)
        # KerasTuner's own attribute (1.4.8, oracle.py), which mypy cannot type.
        retry_queue: list[str] = self._retry_queue  # type: ignore[has-type]
        queue = [t for t in retry_queue if self.trials[t].status not in ended]
        # A trial whose file was written just before a kill, the oracle's state not yet.
        queue += [
            t
            for t, trial in sorted(self.trials.items(), key=lambda item: int(item[0]))
            if trial.status == status.RUNNING and t not in queue
        ]
        self._retry_queue = queue

    def resume(self) -> None:
        """Reloads the search's state where KerasTuner did not.

        A tuner reloads its oracle only when its own file (`tuner0.json`)
        exists (keras_tuner/src/engine/base_tuner.py, 1.4.8, lines 127-129), and in
        a parallel search only the worker `tuner0` writes that file, when it
        ends a trial (`on_trial_end`, line 340, `save`, line 455): a search
        killed before then, with another worker's trial completed, would start
        again from nothing and run that trial again.
        """
        import tensorflow as tf

        if not self.reloaded and tf.io.gfile.exists(self._get_oracle_fname()):
            self.reload()


def _tuner(
    config: TrainerConfig,
    spec: DatasetSpec,
    files: InputFiles,
    settings: SearchSettings,
    space: Callable[..., ModelConfig],
):
    """(KerasTuner's tuner over the search's directory, the ids of the trials it runs,
    the gate metric's name). A worker's (KERASTUNER_* set) asks the chief for trials."""
    # Same batches for every trial: the ranking is the models', not the shuffles'.
    config = dataclasses.replace(
        config, runtime=dataclasses.replace(config.runtime, deterministic_input=True)
    )
    runtime = resolve_runtime(config.runtime)
    gate_metric = "val_" + GATE_METRICS[spec.label.task][0]
    ran: list[str] = []

    def seeded_inputs() -> TrainingInputs:
        """Every trial, in this process or a resumed one, reads the same batches in the
        same order (`training_inputs` seeds them)."""
        return training_inputs(config, runtime, spec, files)

    input_sizes = seeded_inputs().input_sizes

    def build(hp) -> keras.Model:
        return compiled_model(space(hp), spec, runtime, input_sizes)

    class TrialTuner(keras_tuner.Tuner):
        # KerasTuner's `save` and `reload` (base_tuner.py, 1.4.8, lines 451-461), with
        # the tuner's own file written whole (`save_state`) and read by `read_state`.
        def save(self) -> None:
            if not self._is_worker():
                self.oracle.save()
            save_state(self._get_tuner_fname(), self.get_state())

        def reload(self) -> None:
            if not self._is_worker():
                self.oracle.reload()
            self.set_state(read_state(self._get_tuner_fname(), self.project_dir))

        def pre_create_trial(self) -> None:
            if settings.deadline is not None and time.time() >= settings.deadline:
                raise DeadlineReached()

        def run_trial(self, trial, *args, **kwargs) -> dict[str, float]:
            ran.append(trial.trial_id)
            inputs = seeded_inputs()
            model = build(trial.hyperparameters)
            history = model.fit(
                inputs.train,
                epochs=1,
                steps_per_epoch=settings.steps_per_trial,
                validation_data=inputs.eval,
                validation_steps=settings.eval_steps,
                callbacks=[_DeadlineCallback(settings.deadline)],
                verbose=0,
            )
            metrics = {k: float(v[-1]) for k, v in history.history.items()}
            logger.info("trial %s: %s", trial.trial_id, metrics)
            return {OBJECTIVE: metrics[OBJECTIVE], gate_metric: metrics[gate_metric]}

    tuner = TrialTuner(
        oracle=ResumingOracle(
            objective=keras_tuner.Objective(OBJECTIVE, "min"),
            max_trials=settings.max_trials,
            seed=settings.seed,
        ),
        hypermodel=build,
        directory=settings.directory,
        project_name=PROJECT_NAME,
        overwrite=False,
    )
    return tuner, ran, gate_metric


def _worker_job(
    config: TrainerConfig, spec: DatasetSpec, files: InputFiles, settings: SearchSettings
) -> dict[str, Any]:
    """What a worker builds the search's tuner from (`worker_main` reads it back)."""
    return {
        "config": config.to_custom_config(),
        "spec": spec.to_custom_config(),
        "files": dataclasses.asdict(files),
        "settings": dataclasses.asdict(settings),
    }


def worker_main(job_file: str) -> int:
    """A KerasTuner worker: asks the chief (KERASTUNER_* environment) for trials until none
    are left or the deadline passes."""
    import json

    import tensorflow as tf

    with tf.io.gfile.GFile(job_file) as f:
        job = json.loads(f.read())
    tuner, _, _ = _tuner(
        TrainerConfig.from_custom_config(job["config"], hyperparameters_class()),
        spec_from_custom_config(job["spec"]),
        InputFiles(**job["files"]),
        SearchSettings(**job["settings"]),
        search_space(),
    )
    return 0 if _search(tuner) else EXIT_DEADLINE


def _result(oracle, space, gate_metric: str, ran: list[str], partial: bool) -> SearchResult:
    trials = []
    for trial_id in sorted(oracle.trials, key=int):
        trial = oracle.trials[trial_id]
        completed = trial.status == "COMPLETED"
        trials.append(
            TrialResult(
                trial_id=trial_id,
                status=trial.status,
                score=trial.score if completed else None,
                gate_metric=(
                    trial.metrics.get_last_value(gate_metric)
                    if completed and trial.metrics.exists(gate_metric)
                    else None
                ),
                hyperparameters=dict(trial.hyperparameters.values),
                model=model_values(space(trial.hyperparameters.copy())),
            )
        )
    completed = [t for t in trials if t.status == "COMPLETED"]
    # Lowest loss; the earlier trial on a tie, so a rerun breaks ties the same way.
    best = min(completed, key=lambda t: (t.score, int(t.trial_id))) if completed else None
    # A search that stopped before its budget without trials left to run is complete;
    # one cut off by the deadline, or with no completed trial, is partial.
    running = any(t.status == "RUNNING" for t in trials)
    partial = partial or running or len(trials) < oracle.max_trials or best is None
    return SearchResult(trials=tuple(trials), best=best, partial=partial, ran=tuple(ran))


if __name__ == "__main__":
    import sys

    sys.exit(worker_main(sys.argv[1]))
