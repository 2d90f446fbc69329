"""What the template supplies around the fork's model (trainer/model.py).

The fork writes the network (`build_model`), its loss and metrics and, if it
likes, its optimizer; the Trainer reaches them through trainer/fork/. The rest
is the template's and lives here, so that `copier update` brings its fixes:

- the serving signature's output names (`output_name`): the scorer, the
  Evaluator's `prediction_key` and the export read the same one;
- the model's inputs (`model_input_sizes`): the spec's features plus the fork's
  extra features;
- the compile (`compile_model`): the fork's loss, metrics and optimizer, with
  loss scaling under mixed float16;
- random inputs shaped like Transform's output (`random_model_inputs`), for
  smoke tests and benchmarks.

Keras is imported where a function needs it: the scorer and the DAG's factory
read the output names without loading it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contract.dataset.names import LABEL_KEY
from contract.dataset.sections import LabelSpec

if TYPE_CHECKING:
    import keras

    from trainer.config import ModelConfig

# The serving signature's output: class probabilities, or the regression value.
PROBABILITIES_OUTPUT = "probabilities"
PREDICTION_OUTPUT = "prediction"


def output_name(label: LabelSpec) -> str:
    return PREDICTION_OUTPUT if label.task == "regression" else PROBABILITIES_OUTPUT


def model_input_sizes(
    spec_input_sizes: dict[str, int | None], transformed_feature_spec: dict
) -> dict[str, int | None]:
    """The spec's model inputs Transform wrote, plus the extra dense features of
    `trainer/custom.py`.

    Extra features are the Transform outputs the spec does not describe
    (besides the label); they are dense floats by contract. A spec input Transform
    did not write is one the fork's `adjust_features` dropped: not an input.
    """
    sizes = {n: s for n, s in spec_input_sizes.items() if n in transformed_feature_spec}
    for name in sorted(transformed_feature_spec):
        if name != LABEL_KEY and name not in sizes:
            sizes[name] = None
    return sizes


def compile_model(
    model: keras.Model,
    config: ModelConfig,
    label: LabelSpec,
    *,
    precision: str,
    jit_compile: bool,
) -> None:
    """The fork's optimizer and its task's loss and metrics; float16 training gets dynamic
    loss scaling."""
    import keras

    from trainer.fork import model_file

    optimizer = model_file.optimizer(config)
    if precision == "mixed_float16" and not isinstance(
        optimizer, keras.optimizers.LossScaleOptimizer
    ):
        # float16 gradients underflow without it; bfloat16 has float32's range and needs none.
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    loss, metrics = model_file.loss_and_metrics(label)
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=jit_compile)


def random_model_inputs(
    input_sizes: dict[str, int | None], label: LabelSpec, num_examples: int, seed: int = 0
):
    """Random (inputs, labels) shaped like Transform's output, for smoke tests and benchmarks.

    Values are in range for every input (ids below their category counts) and
    labels are valid for the task, so the model trains on them; they carry no
    signal.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    inputs = {}
    for name, size in input_sizes.items():
        if size is None:
            inputs[name] = rng.normal(size=num_examples).astype("float32")
        else:
            inputs[name] = rng.integers(0, size, size=num_examples).astype("int64")
    if label.task == "regression":
        mean, std = label.mean or 0.0, label.std or 1.0
        labels = rng.normal(mean, std, size=num_examples).astype("float32")
    else:
        labels = rng.integers(0, label.num_classes, size=num_examples).astype("int64")
    return inputs, labels
