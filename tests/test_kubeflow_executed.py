"""The compiled Kubeflow package, executed step by step as KFP's backend would.

`kubeflow/reference/run_compiled.py` runs the package with KFP's own local
executor (kfp.local, current kfp): it builds every step's executor input from
the spec and resolves the container's placeholders; each container command runs
as a subprocess in this project's environment (the image's). Twice: the second
execution must find the first one's pushed model as its baseline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml

from kubeflow.settings import DEFAULT_SETTINGS_FILE
from tests.conftest import REPO_ROOT, load_schema, read_taxi_rows, write_csv
from tests.test_kubeflow_reference import run_in_reference_env
from trainer.export import SERVING_SIGNATURE
from trainer.model import PROBABILITIES_OUTPUT
from trainer.raw_examples import serialize_rows

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

ROWS = 1000
TRAIN_STEPS = 20
EXECUTION_TIMEOUT_S = 900


def local_settings(tmp: Path, data_root: Path | str, **overrides) -> Path:
    """kubeflow/pipeline.yaml with local paths, a CPU variant and few train steps.

    `overrides` replace top-level settings after that (object-store paths, say).
    """
    settings = yaml.safe_load(DEFAULT_SETTINGS_FILE.read_text())
    settings.update(
        pipeline_root=str(tmp / "pipeline_root"),
        serving_model_dir=str(tmp / "serving"),
        # The steps read the schema where the image holds the project: here, this checkout.
        project_root_in_image=str(REPO_ROOT),
        config_variant="local_cpu",
        parameters={"data_root": str(data_root), "train_steps": TRAIN_STEPS},
        # A thousand rows: Beam in one process beats starting a worker per core.
        beam={"defaults": {"engine": "direct", "options": {"direct_running_mode": "in_memory"}}},
    )
    settings.pop("schedule", None)
    settings.update(overrides)
    path = tmp / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def execute(
    package: Path, tmp: Path, name: str, *options: str, expect_success: bool = True
) -> dict:
    """The package executed by run_compiled.py; `options` are its further flags."""
    summary_file = tmp / f"{name}.json"
    proc = run_in_reference_env(
        "run_compiled.py",
        "--package", str(package),
        "--pipeline-root", str(tmp / "pipeline_root"),
        "--python", sys.executable,
        "--summary", str(summary_file),
        *options,
        timeout=EXECUTION_TIMEOUT_S,
    )  # fmt: skip
    assert summary_file.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    if expect_success:
        failed = {k: v["log_tail"] for k, v in summary["steps"].items() if v["status"] != "SUCCESS"}
        assert proc.returncode == 0 and summary["succeeded"], (summary["error"], failed)
    return summary


def compile_package(settings_file: Path, package: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "kubeflow.compile", "--config", str(settings_file),
         "--output", str(package)],
        cwd=REPO_ROOT, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return package


@pytest.fixture(scope="module")
def executions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kubeflow_executed")
    header, rows = read_taxi_rows(limit=ROWS)
    data_root = tmp / "data"
    write_csv(data_root / "data.csv", header, rows)
    package = compile_package(local_settings(tmp, data_root), tmp / "pipeline.yaml")
    first = execute(package, tmp, "first")
    served_after_first = sorted((tmp / "serving").iterdir())
    second = execute(package, tmp, "second")
    spec = next(yaml.safe_load_all(package.read_text()))
    return {
        "tmp": tmp,
        "spec": spec,
        "data_root": data_root,
        "first": first,
        "second": second,
        "served_after_first": served_after_first,
    }


def test_every_step_runs_in_dependency_order(executions):
    tasks = executions["spec"]["root"]["dag"]["tasks"]
    for name in ("first", "second"):
        order = executions[name]["order"]
        assert sorted(order) == sorted(tasks)
        for task, task_spec in tasks.items():
            for upstream in task_spec.get("dependentTasks", []):
                assert order.index(upstream) < order.index(task), (upstream, task)


def test_runtime_parameters_reach_example_gen_and_trainer(executions):
    steps = executions["first"]["steps"]
    assert steps["CsvExampleGen"]["parameters"]["input_base"] == str(executions["data_root"])
    assert json.loads(steps["Trainer"]["parameters"]["train_args"]) == {"num_steps": TRAIN_STEPS}
    # ExampleGen read exactly that data: its splits hold every row.
    (examples,) = steps["CsvExampleGen"]["outputs"]["examples"]
    records = sum(
        sum(1 for _ in tf.data.TFRecordDataset(str(f), compression_type="GZIP"))
        for f in Path(examples).glob("Split-*/*.gz")
    )
    assert records == ROWS


def assert_scores_raw_rows(model_dir: Path, rows: list[dict[str, str]], spec) -> None:
    """The served signature turns raw CSV rows into one float32 probability each."""
    serve = tf.saved_model.load(str(model_dir)).signatures[SERVING_SIGNATURE]
    serialized = serialize_rows(rows, load_schema(), drop=spec.serving_excluded_columns())
    probabilities = serve(examples=tf.constant(serialized))[PROBABILITIES_OUTPUT].numpy()
    assert probabilities.shape == (len(rows), 1) and probabilities.dtype == np.float32
    assert np.all((probabilities >= 0) & (probabilities <= 1))


def test_first_execution_pushes_a_blessed_model_that_scores_raw_rows(executions, taxi_spec):
    (version,) = executions["served_after_first"]
    _, rows = read_taxi_rows(limit=50)
    assert_scores_raw_rows(version, rows, taxi_spec)
    (report_dir,) = executions["first"]["steps"]["RunReport"]["outputs"]["report"]
    html = (Path(report_dir) / "report.html").read_text()
    assert "BLESSED" in html and str(version) in html


def test_second_execution_evaluates_against_the_served_model(executions):
    from pipeline.report.contents import read_evaluation

    first, second = executions["first"]["steps"], executions["second"]["steps"]
    (evaluation,) = first["Evaluator"]["outputs"]["evaluation"]
    assert not read_evaluation(evaluation).has_baseline
    (evaluation,) = second["Evaluator"]["outputs"]["evaluation"]
    assert read_evaluation(evaluation).has_baseline
    (baseline,) = second["LatestServedModel"]["outputs"]["baseline_model"]
    metadata = json.loads((Path(baseline).parent / "executor_output.json").read_text())[
        "artifacts"
    ]["baseline_model"]["artifacts"][0]["metadata"]
    assert metadata["served_path"] == str(executions["served_after_first"][0])


def test_step_start_up_is_measured(executions, capsys):
    steps = executions["first"]["steps"]
    assert all(v["startup_seconds"] is not None for v in steps.values())
    lines = [f"{'step':<20} {'start-up s':>10} {'total s':>8}"]
    lines += [
        f"{k:<20} {v['startup_seconds']:>10.1f} {v['seconds']:>8.1f}" for k, v in steps.items()
    ]
    lines.append(f"{'pipeline':<20} {'':>10} {executions['first']['seconds']:>8.1f}")
    with capsys.disabled():
        print("\nCompiled spec executed with kfp.local (first execution):\n" + "\n".join(lines))
