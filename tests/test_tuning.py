"""Tuning: the search space, the search (seeded, resumable, deadline), the frozen file."""

from __future__ import annotations

import time
from pathlib import Path

import keras_tuner
import pytest

from schemas import load_schema_dir
from trainer.config import ModelConfig, TrainerConfig
from trainer.hyperparameters import (
    FrozenHyperparameters,
    HyperparametersError,
    load_frozen,
    write_frozen,
)

WINNER = {"hidden_units": [32, 16], "embedding_dim": 4, "learning_rate": 0.001, "dropout": 0.2}


def test_the_search_space_builds_the_trainers_model():
    from trainer.model import build_model
    from trainer.search_space import search_space

    spec = load_schema_dir().spec
    hp = keras_tuner.HyperParameters()
    config = search_space(hp)
    assert isinstance(config, ModelConfig)
    assert set(hp.values) == {"width", "depth", "embedding_dim", "learning_rate", "dropout"}
    hp.values.update(width=64, depth=3)
    assert search_space(hp).hidden_units == (64, 32, 16)
    model = build_model(config, spec.label, spec.model_input_sizes())
    assert [layer.name for layer in model.layers if layer.name.startswith("hidden_")] == [
        f"hidden_{i}" for i in range(len(config.hidden_units))
    ]


def test_frozen_values_replace_the_configs_and_round_trip(tmp_path):
    from pipeline.config import PipelineConfig

    frozen = FrozenHyperparameters(model=WINNER, provenance={"partial": False, "trials": 3})
    path = write_frozen(tmp_path / "hyperparameters.yaml", frozen)
    assert load_frozen(path) == frozen
    config = PipelineConfig().with_hyperparameters(load_frozen(path))
    assert config.trainer.model == ModelConfig(
        hidden_units=(32, 16), embedding_dim=4, learning_rate=0.001, dropout=0.2
    )
    assert config.trainer.runtime == PipelineConfig().trainer.runtime
    # No file: the configuration's own values.
    assert load_frozen(tmp_path / "absent.yaml") is None
    assert PipelineConfig().with_hyperparameters(None) == PipelineConfig()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("model: {hidden_unit: [8]}", "model.hidden_unit: not a ModelConfig field"),
        ("model: {hidden_units: 8}", "model.hidden_units: must be a list of integers"),
        ("model: {learning_rate: fast}", "model.learning_rate: must be a number"),
        ("model: {embedding_dim: true}", "model.embedding_dim: must be int"),
        ("model: {dropout: 1.5}", "model.dropout must be in [0, 1)"),
        ("model: {}\nprovenance: {partial: 'no'}", "provenance.partial: must be true or false"),
        ("model: {}\nprovenance: {score: 1}", "provenance.score: unknown key"),
        ("model: {}\nprovenance: {data: {spanz: [0]}}", "provenance.data.spanz: unknown key"),
        ("modle: {}", "modle: unknown key"),
        ("[1, 2]", "must be a mapping"),
        ("model: [", "not valid YAML"),
    ],
)
def test_unknown_or_mistyped_keys_are_refused_by_name(tmp_path, text, named):
    path = tmp_path / "hyperparameters.yaml"
    path.write_text(text)
    with pytest.raises(HyperparametersError) as err:
        load_frozen(path)
    assert str(err.value).startswith(f"{path}: ")
    assert named in str(err.value)
    assert "\n" not in str(err.value)


def test_data_age_is_read_from_the_provenance():
    import datetime

    frozen = FrozenHyperparameters(
        model={}, provenance={"data": {"read_at": "2026-11-20T12:00:00+00:00"}}
    )
    now = datetime.datetime(2026, 11, 27, 12, tzinfo=datetime.timezone.utc)
    assert frozen.data_age(now) == datetime.timedelta(days=7)
    assert FrozenHyperparameters(model={}).data_age(now) is None


# The search on real Transform output: tiny trials.
STEPS_PER_TRIAL = 10


def tiny_search(inputs, spec, directory: Path, max_trials: int, deadline=None):
    from trainer.config import RuntimeConfig
    from trainer.run import InputFiles
    from trainer.tuning import SearchSettings, search

    config = TrainerConfig(
        runtime=RuntimeConfig(
            accelerator="cpu",
            precision="float32",
            per_replica_batch_size=64,
            shuffle_buffer_size=200,
        )
    )
    return search(
        config=config,
        spec=spec,
        files=InputFiles(
            [inputs["train_files"]], [inputs["eval_files"]], inputs["transform_output"]
        ),
        settings=SearchSettings(
            directory=str(directory),
            max_trials=max_trials,
            steps_per_trial=STEPS_PER_TRIAL,
            eval_steps=2,
            deadline=deadline,
        ),
    )


def test_a_seeded_search_picks_the_same_best_trial_and_resumes(
    tmp_path, taxi_trainer_inputs, taxi_spec
):
    first = tiny_search(taxi_trainer_inputs, taxi_spec, tmp_path / "a", max_trials=2)
    again = tiny_search(taxi_trainer_inputs, taxi_spec, tmp_path / "b", max_trials=2)
    assert not first.partial and first.ran == ("0", "1")
    assert [t.hyperparameters for t in first.trials] == [t.hyperparameters for t in again.trials]
    assert first.best.trial_id == again.best.trial_id
    assert first.best.score == pytest.approx(again.best.score, rel=1e-4)
    # Resumed with a larger budget: the completed trials are not run again.
    resumed = tiny_search(taxi_trainer_inputs, taxi_spec, tmp_path / "a", max_trials=3)
    assert resumed.ran == ("2",)
    assert [t.score for t in resumed.trials[:2]] == [t.score for t in first.trials]


def test_a_deadline_keeps_the_best_so_far_marked_partial(tmp_path, taxi_trainer_inputs, taxi_spec):
    past = tiny_search(
        taxi_trainer_inputs, taxi_spec, tmp_path / "s", max_trials=3, deadline=time.time() - 1
    )
    assert past.partial and past.best is None and past.ran == ()
    one = tiny_search(taxi_trainer_inputs, taxi_spec, tmp_path / "s", max_trials=1)
    assert not one.partial
    # Budget raised, deadline passed: the completed trial stands, marked partial.
    cut = tiny_search(
        taxi_trainer_inputs, taxi_spec, tmp_path / "s", max_trials=3, deadline=time.time() - 1
    )
    assert cut.partial and cut.ran == () and cut.best == one.best
