"""The search: KerasTuner trials of the search space, on the Trainer's own inputs and model.

Each trial builds `trainer/search_space.py`'s `ModelConfig` with the
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

With `KERASTUNER_ORACLE_IP`, `KERASTUNER_ORACLE_PORT` and
`KERASTUNER_TUNER_ID` set, KerasTuner's own chief/worker protocol runs: the
chief (`KERASTUNER_TUNER_ID=chief`) serves the oracle over gRPC and runs no
trial; each worker asks it for trials.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import keras

from trainer.config import ModelConfig, TrainerConfig
from trainer.dataset_spec import GATE_METRICS, DatasetSpec
from trainer.run import InputFiles, TrainingInputs, compiled_model, training_inputs
from trainer.runtime import resolve_runtime
from trainer.search_space import search_space

logger = logging.getLogger(__name__)

OBJECTIVE = "val_loss"
PROJECT_NAME = "search"


class DeadlineReached(Exception):
    """The search's wall-clock deadline passed; the best completed trial stands."""


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
            # A FatalError leaves KerasTuner's search loop with the trial still
            # running in the oracle's state: a resumed search reruns it.
            import keras_tuner

            raise keras_tuner.errors.FatalError("deadline") from DeadlineReached()


def search(
    *,
    config: TrainerConfig,
    spec: DatasetSpec,
    files: InputFiles,
    settings: SearchSettings,
    space: Callable[..., ModelConfig] = search_space,
) -> SearchResult:
    """Runs (or resumes) the search in `settings.directory`; returns every trial and the best."""
    import keras_tuner

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
        oracle=keras_tuner.oracles.RandomSearchOracle(
            objective=keras_tuner.Objective(OBJECTIVE, "min"),
            max_trials=settings.max_trials,
            seed=settings.seed,
        ),
        hypermodel=build,
        directory=settings.directory,
        project_name=PROJECT_NAME,
        overwrite=False,
    )
    partial = False
    try:
        tuner.search()
    except DeadlineReached:
        partial = True
    except keras_tuner.errors.FatalError as err:
        if not isinstance(err.__cause__, DeadlineReached):
            raise
        partial = True
    return _result(tuner.oracle, space, gate_metric, ran, partial)


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
    partial = partial or len(trials) < oracle.max_trials or best is None
    return SearchResult(trials=tuple(trials), best=best, partial=partial, ran=tuple(ran))
