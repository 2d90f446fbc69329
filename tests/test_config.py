import dataclasses

import pytest

from pipeline.pipeline_config import PipelineConfig
from trainer.config import ModelConfig, RuntimeConfig, TrainerConfig
from trainer.fork.config_file import variant


def test_trainer_config_round_trips_through_custom_config():
    config = TrainerConfig(
        model=ModelConfig(hidden_units=(32, 16)),
        runtime=RuntimeConfig(
            strategy="mirrored", precision="mixed_bfloat16", profile_steps=(2, 4)
        ),
        seed=7,
    )
    assert TrainerConfig.from_custom_config(config.to_custom_config()) == config


def test_missing_custom_config_gives_defaults():
    assert TrainerConfig.from_custom_config(None) == TrainerConfig()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"runtime": {"strategy": "horovod"}}, "runtime.strategy must be one of"),
        ({"runtime": {"precision": "float8"}}, "runtime.precision must be one of"),
        ({"runtime": {"per_replica_batch_size": 0}}, "per_replica_batch_size"),
        ({"runtime": {"profile_steps": [5, 2]}}, "profile_steps"),
        ({"runtime": {"batchsize": 3}}, "unknown runtime field(s): batchsize"),
        ({"model": {"hidden_units": []}}, "hidden_units"),
        ({"model": {"dropout": 1.5}}, "dropout"),
        ({"optimizer": "sgd"}, "unknown trainer config field(s): optimizer"),
    ],
)
def test_bad_trainer_config_is_rejected_with_the_field_named(values, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TrainerConfig.from_dict(values)


def test_variants_derive_from_the_default():
    default = PipelineConfig()
    gpu = variant("gpu_8x_amp")
    assert gpu.trainer.runtime.strategy == "mirrored"
    assert gpu.trainer.runtime.precision == "mixed_float16"
    # Only the runtime and the step count differ from the default.
    assert (
        dataclasses.replace(gpu, trainer=default.trainer, train_steps=default.train_steps)
        == default
    )


def test_unknown_variant_is_named():
    with pytest.raises(ValueError, match="unknown config variant 'tpu_pod'"):
        variant("tpu_pod")


def test_steps_must_be_positive():
    with pytest.raises(ValueError, match="train_steps"):
        PipelineConfig(train_steps=0)
