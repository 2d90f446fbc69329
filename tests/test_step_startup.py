"""Each executor the compiled packages name, started in a fresh process: what it loads.

A pod imports `kubeflow.step_entrypoint`, then the executor class its spec
names (benchmarks/step_startup.py starts it the same way and prints the
table). The project's own executors that never run TFMA must not load it
(their classes imported in turn in one fresh process), and the light ones,
each run in a fresh process as its pod runs it, stay within a peak-memory
budget. What TFX's package layout
forces on every pod (TensorFlow, and TFMA through TFX's container
entrypoint) is listed in docs/kubeflow.md, "What a step loads"; the
import-linter contracts in pyproject.toml state the same boundary for the
modules.
"""

from __future__ import annotations

import json

import pytest

from benchmarks.step_startup import (
    HEAVY,
    LIGHT_STEP_INPUTS,
    RUN,
    compiled_packages,
    light_step_arguments,
    start,
    started_in_turn,
)
from kubeflow.light_step import LIGHT_STEPS

# TFX's own executors: under tfx.components, so TFX's component package, so TFMA.
TFX_PREFIX = "tfx."
# Ours, on TFX's component package (docs/kubeflow.md, the table's first row):
# the ExampleGen and Transform executors extend TFX's, the Pusher's module declares
# TFX's Pusher component (its pod runs light: LIGHT_STEPS), and the Evaluator runs TFMA.
ON_TFX_COMPONENTS = frozenset(
    {
        "components.example_gen.executor.SpanResolvingExecutor",
        "components.transform.executor.ParquetAnalysisExecutor",
        "components.serving.push.component.NoDuplicatePushExecutor",
        "components.evaluator.executor.ServedBaselineExecutor",
    }
)
# Ours, loading no TFMA: the light steps, the scorer and the tuner.
WITHOUT_TFMA = frozenset(
    {
        "kubeflow.steps.run_status.component.RunStatus_Executor",
        "kubeflow.steps.scoring_report.component.ScoringReport_Executor",
        "kubeflow.steps.run_report.component.RunReport_Executor",
        "kubeflow.steps.deploy.component.Deploy_Executor",
        "kubeflow.steps.input_snapshot.component.InputSnapshot_Executor",
        "components.serving.baseline.component.LatestServedModel_Executor",
        "components.scoring.component.BatchScorer_Executor",
        "kubeflow.tuning.component.Tune_Executor",
        # The data gates (issue 62): their statistics read as
        # components/gates/data_validation/executor.py reads them.
        "components.gates.data_validation.component.DataValidationGate_Executor",
        "components.gates.drift.component.DataDriftGate_Executor",
        "components.gates.serving_data.component.ServingDataGate_Executor",
    }
)
TFMA = "tensorflow_model_analysis"
# Peak resident memory (the fresh process's own, benchmarks/step_startup.py) of
# a step that loads TensorFlow and Beam but not TFMA (TFX's artifact classes
# and `@component` import both); TFMA adds more than the margin.
# docs/benchmarks.md, "Step start-up", has the command that measures it.
PEAK_MB_WITHOUT_TFMA = 740
# A light step's pod (kubeflow/light_step.py), run on a real executor input: issue
# 62's budget. Its start-up seconds are benchmarks/step_startup.py's, not a test's.
LIGHT_PEAK_MB = 300


@pytest.fixture(scope="module")
def package_executors(tmp_path_factory) -> dict[str, dict[str, list[str]]]:
    return compiled_packages(tmp_path_factory.mktemp("packages"))


@pytest.mark.slow  # compiles the three packages (TFX in this process)
def test_every_executor_of_the_packages_is_accounted_for(package_executors):
    named = {c for classes in package_executors.values() for c in classes}
    ours = {c for c in named if not c.startswith(TFX_PREFIX)}
    placed = ON_TFX_COMPONENTS | WITHOUT_TFMA
    # A new step is placed in one of the two sets, so the next test starts it.
    assert ours == placed, sorted(ours ^ placed)
    assert "kubeflow.steps.deploy.component.Deploy_Executor" in package_executors["training"]
    assert package_executors["scoring"] and package_executors["tuning"]


@pytest.mark.slow  # one fresh interpreter importing TensorFlow and every class in turn
def test_a_step_that_runs_no_tfma_does_not_load_it():
    """Each class imported in turn in one fresh process: TFMA is absent after every import,
    so none loads it (what the classes before it imported had not loaded it either), and
    each import in turn peaks at least as high as it would alone, so the budget holds for
    each. The first class after whose import TFMA is loaded is the one that loads it."""
    classes = sorted(WITHOUT_TFMA)
    started = started_in_turn(classes)
    assert list(started) == classes  # every class imported, in order
    loading = [c for c in classes if TFMA in started[c].modules]
    assert not loading, f"{loading[0]} loads TFMA"
    over = [c for c in classes if started[c].peak_mb > PEAK_MB_WITHOUT_TFMA]
    assert not over, (
        f"{over[0]}: peak {started[over[0]].peak_mb:.0f} MB > {PEAK_MB_WITHOUT_TFMA} MB"
    )


def test_every_light_step_is_run_by_the_benchmark():
    """The steps the entrypoint runs light are the ones the next test starts."""
    assert set(LIGHT_STEPS) == set(LIGHT_STEP_INPUTS)


@pytest.mark.slow  # compiles the packages; a fresh interpreter per light step
@pytest.mark.parametrize("class_path", sorted(LIGHT_STEP_INPUTS))
def test_a_light_step_runs_as_its_pod_runs_it_without_tensorflow(
    class_path, package_executors, tmp_path
):
    """`python -m kubeflow.step_entrypoint` with the compiled arguments and a driver-shaped
    executor input: the step's work and its executor output file, without TensorFlow,
    TFMA or Beam, within LIGHT_PEAK_MB (the serving gate, whose work is TFDV's: with
    TensorFlow and Beam, not TFMA, within PEAK_MB_WITHOUT_TFMA). RunStatus's run has a
    Trainer and an Evaluator that succeeded: its report reads their curves and evaluation
    (issue 62)."""
    args = next(found[class_path] for found in package_executors.values() if class_path in found)
    started = start(class_path, RUN, args=light_step_arguments(class_path, args, tmp_path))
    loaded = sorted(label for label, module in HEAVY.items() if module in started.modules)
    given = LIGHT_STEP_INPUTS[class_path]
    # A step whose work runs TFDV loads what TFDV's package loads (`loads`), never TFMA.
    assert loaded == sorted(given.get("loads", [])), f"{class_path} loads {loaded}"
    budget = PEAK_MB_WITHOUT_TFMA if given.get("loads") else LIGHT_PEAK_MB
    assert started.peak_mb <= budget, f"{class_path}: peak {started.peak_mb:.0f} MB > {budget} MB"
    step = class_path.rsplit(".", 1)[1].removesuffix("_Executor")
    written = json.loads((tmp_path / "pod" / step / "output_metadata.json").read_text())
    given = LIGHT_STEP_INPUTS[class_path]
    assert set(written["artifacts"]) == set(given["outputs"])
    for output, texts in given.get("shows", {}).items():
        text = (tmp_path / "run-1" / step / output).read_text()
        assert [t for t in texts if t not in text] == [], f"{class_path}'s {output}"
    for output, texts in given.get("hides", {}).items():
        text = (tmp_path / "run-1" / step / output).read_text()
        assert [t for t in texts if t in text] == [], f"{class_path}'s {output}"
