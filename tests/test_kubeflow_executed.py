"""The compiled Kubeflow package, executed step by step as KFP's backend would.

`kubeflow/standin_harness/run_compiled.py` runs the package with KFP's own local
executor (kfp.local, current kfp): it builds every step's executor input from
the spec and resolves the container's placeholders; each container command runs
as a subprocess in this project's environment (the image's). Steps are cached
across executions as open-source KFP caches them (kfp.local's cache: parameter
values, input artifacts, image and command; nothing about the data).

The data root holds spans (the dataset spec's `input.pattern`), as a scheduled
run sees it. Executions of one package:

1. span 1, with two faults a cluster brings: the Trainer's first attempt is
   killed while it writes (a preempted node), and KFP retries it on the same
   output URIs; the Pusher's and ExampleGen's commands run twice (a pod that
   died after its command finished). One model is pushed, once;
2. span 2 has arrived, so ExampleGen must not come from cache, its examples
   must be span 2's, the drift gate must read the statistics the first
   execution served, and the Evaluator must find the first model as its
   baseline;
3. nothing has changed, and ExampleGen, Transform and the Trainer come from
   cache; the Pusher pushes nothing, so the Deploy step leaves serving alone;
4. a data root without spans fails at the first step;
5. span 3 breaks the schema, so the data gate fails the run.

Every execution ends with the RunStatus exit handler's report, the failed
ones included.

The settings have a `serving:` section, and a Kubernetes stand-in plays KServe
(tests/kserve_standin.py): the first execution's Deploy step creates the
InferenceService, the second's rolls its version out through a canary to all
traffic. (Rollbacks, executed: tests/test_kubeflow_tfjob_executed.py.)
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import tensorflow as tf
import yaml

from kubeflow import pipeline_steps as kubeflow_steps
from kubeflow.tfx_spec import all_tasks, executor_labels
from pipeline import steps as dag
from tests.conftest import REPO_ROOT, read_taxi_rows
from tests.harness import (
    ANOMALOUS_FEATURE,
    CASES,
    INFERENCE_SERVICE,
    SERVING,
    TRAIN_STEPS,
    assert_scores_raw_rows,
    compile_package,
    execute,
    local_settings,
    output_metadata,
    parse,
    run_in_standin_harness,
    schema_dir_in_project,
    status_report,
    step_record,
    with_attr,
)
from tests.span_data import SPAN_ROWS, span_rows, write_span

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

# Where the Deploy step finds the Kubernetes API (a kubeconfig; a pod's service account).
NAMESPACE = "kubeflow-user-example-com"
TOKEN = "step-token"
# Span 3's rows: labels below the schema's range (tests/test_bad_input.py).
BAD_DATA_CASE = "label_outside_schema"


def kserve_cluster(tmp: Path):
    """The Kubernetes stand-in with KServe, the predictor's service account, and a kubeconfig."""
    from tests.kubernetes_standin import KubernetesStandin

    standin = KubernetesStandin(
        sys.executable, users={TOKEN: f"system:serviceaccount:{NAMESPACE}:default-editor"}
    )
    standin.kserve.add_object(NAMESPACE, "serviceaccounts", {"metadata": {"name": "kserve-models"}})
    return standin, standin.kubeconfig(tmp / "kubeconfig", namespace=NAMESPACE, token=TOKEN)


@pytest.fixture(scope="module")
def executions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kubeflow_executed")
    data_root = tmp / "data"
    write_span(data_root, 1, span_rows(1))
    schema_dir = schema_dir_in_project(tmp)
    standin, kubeconfig = kserve_cluster(tmp)
    try:
        settings = local_settings(tmp, data_root, schema_dir=schema_dir, serving=SERVING)
        package = compile_package(settings, tmp / "pipeline.yaml")
        cache = ("--cache-root", str(tmp / "kfp-cache"))
        faults = ("--preempt", dag.TRAINER, "--repeat", dag.PUSHER, "--repeat", dag.EXAMPLE_GEN)
        with standin, pytest.MonkeyPatch.context() as env:
            env.setenv("KUBECONFIG", str(kubeconfig))
            first = execute(package, tmp, "first", *cache, *faults)
            served_after_first = sorted((tmp / "serving").iterdir())
            service_after_first = standin.kserve.service(NAMESPACE, INFERENCE_SERVICE)
            write_span(data_root, 2, span_rows(2))
            second = execute(package, tmp, "second", *cache)
            service_after_second = standin.kserve.service(NAMESPACE, INFERENCE_SERVICE)
            unchanged = execute(package, tmp, "unchanged", *cache)
            applied = list(standin.kserve.applied)
            predict_requests = list(standin.kserve.predict_requests)
        no_match = execute(
            package, tmp, "no_match", *cache, "--parameter", f"data_root={tmp / 'empty'}",
            expect_success=False,
        )  # fmt: skip
        corrupt, _ = CASES[BAD_DATA_CASE]
        _, bad_rows = corrupt(None, span_rows(3))
        write_span(data_root, 3, bad_rows)
        bad_data = execute(package, tmp, "bad_data", *cache, expect_success=False)
    finally:
        shutil.rmtree(REPO_ROOT / schema_dir)
    spec = next(yaml.safe_load_all(package.read_text()))
    return {
        "tmp": tmp,
        "spec": spec,
        "data_root": data_root,
        "first": first,
        "second": second,
        "unchanged": unchanged,
        "no_match": no_match,
        "bad_data": bad_data,
        "served_after_first": served_after_first,
        "service_after_first": service_after_first,
        "service_after_second": service_after_second,
        "applied": applied,
        "predict_requests": predict_requests,
    }


# TFX's V2 entrypoint writes a custom property that shares its name with one of the
# type's properties (Examples has `span`) as `custom:<name>`.
SPAN_METADATA = "custom:span"


def records(examples_uri: str) -> int:
    return sum(
        sum(1 for _ in tf.data.TFRecordDataset(str(f), compression_type="GZIP"))
        for f in Path(examples_uri).glob("Split-*/*.gz")
    )


def test_every_step_runs_in_dependency_order(executions):
    spec = executions["spec"]
    tasks = {t: body for t, body in all_tasks(spec).items() if t in executor_labels(spec)}
    for name in ("first", "second", "unchanged"):
        order = executions[name]["order"]
        assert sorted(order) == sorted(tasks)
        for task, task_spec in tasks.items():
            for upstream in task_spec.get("dependentTasks", []):
                if upstream in tasks:
                    assert order.index(upstream) < order.index(task), (upstream, task)
        # The exit handler waits for the whole DAG.
        assert order[-1] == kubeflow_steps.RUN_STATUS


def test_every_step_ran_on_the_executor_input_the_backends_driver_builds(executions):
    """Untyped inputs named by id, an undeclared executor-logs output, the output file in
    the pod (docs/executed-spec.md, conformance): the entrypoint copes with each."""
    steps = executions["first"]["steps"]
    inputs = [
        artifact
        for step in steps.values()
        for artifact_list in step["handed"]["inputs"].values()
        for artifact in artifact_list["artifacts"]
    ]
    assert inputs and all(a["type"] == {"instanceSchema": ""} for a in inputs)
    assert all(a["name"].isdigit() and "display_name" in a["metadata"] for a in inputs)
    for step_id, step in steps.items():
        logs = step["handed"]["outputs"]["executor-logs"]["artifacts"][0]
        assert logs["type"] == {"schemaTitle": "system.Artifact"}, step_id
        # A local pipeline root has no local path in the pod: the legacy file.
        assert step["handed"]["output_file"].endswith("/tmp/kfp_outputs/output_metadata.json")
        assert "executor-logs" not in (step["executor_output"] or {}).get("artifacts", {})
    # StatisticsGen read its Examples only because the entrypoint restored their type.
    assert steps[dag.STATISTICS_GEN]["status"] == "SUCCESS"


def test_runtime_parameters_reach_example_gen_and_trainer(executions):
    steps = executions["first"]["steps"]
    assert steps["ExampleGen"]["parameters"]["input_base"] == str(executions["data_root"])
    assert json.loads(steps["Trainer"]["parameters"]["train_args"]) == {"num_steps": TRAIN_STEPS}
    # ExampleGen read exactly span 1, and recorded it as TFX's driver would.
    (examples,) = steps["ExampleGen"]["outputs"]["examples"]
    assert records(examples) == SPAN_ROWS
    metadata = output_metadata(steps["ExampleGen"], "examples")
    assert metadata[SPAN_METADATA] == 1 and metadata["spans"] == "1"
    assert metadata["input_fingerprint"].startswith("split:single_split,num_files:1")


def test_a_new_span_is_read_not_taken_from_cache(executions):
    second = executions["second"]["steps"]
    # The snapshot step ran first and saw span 2; its value changed ExampleGen's cache key.
    snapshot = json.loads(second["ExampleGen"]["parameters"]["input_snapshot"])
    assert [s["span"] for s in snapshot] == [2]
    assert second["ExampleGen"]["status"] == "SUCCESS"  # executed, not CACHED
    (examples,) = second["ExampleGen"]["outputs"]["examples"]
    assert output_metadata(second["ExampleGen"], "examples")[SPAN_METADATA] == 2
    assert records(examples) == SPAN_ROWS
    (first_examples,) = executions["first"]["steps"]["ExampleGen"]["outputs"]["examples"]
    assert examples != first_examples
    for step in ("StatisticsGen", "Transform", "Trainer"):
        assert second[step]["status"] == "SUCCESS", step


def test_the_drift_gate_reads_the_statistics_the_first_execution_served(executions):
    from components.gates.drift.result import read_result

    first_drift = read_result(executions["first"]["steps"]["DataDriftGate"]["outputs"]["drift"][0])
    assert first_drift.baseline_version is None and "no previous statistics" in first_drift.note
    (served,) = executions["served_after_first"]
    drift = read_result(executions["second"]["steps"]["DataDriftGate"]["outputs"]["drift"][0])
    assert drift.baseline_version == served.name
    assert drift.baseline_statistics == str(
        served / "assets.extra/training_statistics/FeatureStats.pb"
    )
    assert drift.comparisons and all(c.status == "ok" for c in drift.comparisons)
    # The RunReport step shows both: the span read and the comparison.
    (report,) = executions["second"]["steps"]["RunReport"]["outputs"]["report"]
    elements = parse(Path(report).read_text())
    assert with_attr(elements, "data-spans")[0]["data-spans"] == "2"
    statuses = {e["data-feature"]: e["data-status"] for e in with_attr(elements, "data-status")}
    assert statuses == {c.feature: "ok" for c in drift.comparisons}


def test_unchanged_data_reuses_the_cache_and_still_checks_what_is_outside(executions):
    steps = executions["unchanged"]["steps"]
    for step in ("ExampleGen", "StatisticsGen", "Transform", "Trainer", "SchemaImporter"):
        assert steps[step]["status"] == "CACHED", step
    # Uncached: they read the data root and the serving directory.
    for step in ("InputSnapshot", "DataDriftGate", "LatestServedModel"):
        assert steps[step]["status"] == "SUCCESS", step


def test_a_data_root_without_matching_files_fails_at_the_first_step(executions):
    no_match = executions["no_match"]
    assert not no_match["succeeded"]
    snapshot = no_match["steps"]["InputSnapshot"]
    assert snapshot["status"] == "FAILURE"
    failure = "\n".join(snapshot["log_tail"])
    assert "match the input pattern span-{SPAN}/*.csv" in failure
    assert str(executions["tmp"] / "empty") in failure
    assert "ExampleGen" not in no_match["steps"]


def test_first_execution_pushes_a_blessed_model_that_scores_raw_rows(executions, taxi_spec):
    (version,) = executions["served_after_first"]
    _, rows = read_taxi_rows(limit=50)
    assert_scores_raw_rows(version, rows, taxi_spec)
    (report,) = executions["first"]["steps"]["RunReport"]["outputs"]["report"]
    html = Path(report).read_text()
    assert "BLESSED" in html and str(version) in html
    # The template's schema dir has no frozen file; the report says so.
    (frozen,) = with_attr(parse(html), "id", id="hyperparameters")
    assert frozen["data-frozen"] == "none"


def test_second_execution_evaluates_against_the_served_model(executions):
    from components.report.evaluation import read_evaluation

    first, second = executions["first"]["steps"], executions["second"]["steps"]
    (evaluation,) = first["Evaluator"]["outputs"]["evaluation"]
    assert not read_evaluation(evaluation).has_baseline
    (evaluation,) = second["Evaluator"]["outputs"]["evaluation"]
    assert read_evaluation(evaluation).has_baseline
    (baseline,) = second["LatestServedModel"]["outputs"]["baseline_model"]
    metadata = output_metadata(second["LatestServedModel"], "baseline_model")
    assert baseline and metadata["served_path"] == str(executions["served_after_first"][0])


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


def test_a_preempted_trainer_is_retried_on_emptied_outputs(executions):
    trainer = executions["first"]["steps"][dag.TRAINER]
    assert trainer["status"] == "SUCCESS" and trainer["attempts"] == 2
    assert "[preempted: killed while writing its outputs]" in trainer["earlier_log_tails"][0]
    record = step_record(trainer)
    assert [a.outcome for a in record.attempts] == ["running", "succeeded"]
    html, states = status_report(executions["first"])
    assert set(states.values()) == {"succeeded"}
    assert "Trainer ran 2 times (KFP retried it)" in html
    assert "was killed before it finished" in html


def test_a_step_run_twice_on_its_outputs_pushes_once_and_reads_once(executions):
    steps = executions["first"]["steps"]
    (version,) = executions["served_after_first"]  # one push, not two
    pushed = output_metadata(steps[dag.PUSHER], "pushed_model")
    # The second run of the command found its own push, and recorded it as pushed.
    assert pushed["pushed"] == 1 and pushed["pushed_destination"] == str(version)
    assert [a.outcome for a in step_record(steps[dag.PUSHER]).attempts] == ["succeeded"] * 2
    (examples,) = steps[dag.EXAMPLE_GEN]["outputs"]["examples"]
    assert records(examples) == SPAN_ROWS  # nothing doubled


def test_report_and_metrics_are_artifacts_the_kfp_ui_renders(executions):
    spec = executions["spec"]
    outputs = spec["components"][kubeflow_steps.RUN_REPORT]["outputDefinitions"]["artifacts"]
    assert outputs["report"]["artifactType"]["schemaTitle"] == "system.HTML"
    assert outputs["metrics"]["artifactType"]["schemaTitle"] == "system.Metrics"
    for name in ("first", "second"):
        step = executions[name]["steps"][kubeflow_steps.RUN_REPORT]
        (report,) = step["outputs"]["report"]
        assert Path(report).is_file()  # the page itself at the URI, as the UI reads it
        metrics = output_metadata(step, "metrics")
        assert metrics["blessed"] == 1.0 and 0.5 <= metrics["binary_accuracy"] <= 1.0
        # The KFP UI shows a system.* artifact with a display name, and lists every
        # other property of a system.Metrics artifact as a metric: numbers only.
        assert metrics.pop("display_name") == "metrics"
        assert all(isinstance(v, float) for v in metrics.values()), metrics
        assert output_metadata(step, "report")["display_name"] == "report"
    second = output_metadata(executions["second"]["steps"][kubeflow_steps.RUN_REPORT], "metrics")
    assert 0.5 <= second["baseline_binary_accuracy"] <= 1.0  # the first model, scored again
    assert "baseline_binary_accuracy" not in output_metadata(
        executions["first"]["steps"][kubeflow_steps.RUN_REPORT], "metrics"
    )


def test_a_failed_run_gets_a_report_naming_the_gate_and_the_feature(executions):
    bad_data = executions["bad_data"]
    assert not bad_data["succeeded"]
    assert bad_data["steps"][dag.DATA_GATE]["status"] == "FAILURE"
    assert dag.TRAINER not in bad_data["steps"]
    html, states = status_report(bad_data)
    assert states[dag.DATA_GATE] == "failed"
    assert states[dag.STATISTICS_GEN] == states[dag.EXAMPLE_VALIDATOR] == "succeeded"
    assert (
        states[dag.TRAINER] == states[dag.PUSHER] == states[kubeflow_steps.RUN_REPORT] == "not run"
    )
    feature = ANOMALOUS_FEATURE[BAD_DATA_CASE]
    assert "DataValidationGate failed: DataValidationError: data validation failed" in html
    assert f"feature &#39;{feature}&#39;" in html
    # What did run is in the report: the statistics and the anomaly.
    elements = parse(html)
    assert feature in {a["data-feature"] for a in with_attr(elements, "class", class_="anomaly")}
    assert with_attr(elements, "data-examples")
    assert "FAILED" in html


def test_a_run_that_fails_at_its_first_step_gets_a_report_too(executions):
    html, states = status_report(executions["no_match"])
    assert states[kubeflow_steps.INPUT_SNAPSHOT] == "failed"
    assert states[dag.EXAMPLE_GEN] == states[dag.TRAINER] == "not run"
    assert "InputSnapshot failed: InputPatternError" in html
    assert "match the input pattern span-{SPAN}/*.csv" in html


def test_steps_served_from_cache_are_listed_as_cached(executions):
    _, states = status_report(executions["unchanged"])
    for step in (dag.EXAMPLE_GEN, dag.STATISTICS_GEN, dag.TRANSFORM, dag.TRAINER):
        assert states[step] == "cached", step
    for step in (kubeflow_steps.INPUT_SNAPSHOT, dag.DRIFT_GATE, dag.BASELINE, dag.EVALUATOR):
        assert states[step] == "succeeded", step


def test_the_report_and_metrics_are_where_kfps_own_artifact_classes_put_them(executions, tmp_path):
    """kfp's `dsl.Metrics.log_metric` gives the same metadata; `dsl.HTML` writes the page
    at the artifact's URI, where ours is (reference environment, current kfp)."""
    step = executions["second"]["steps"][kubeflow_steps.RUN_REPORT]
    metrics = {k: v for k, v in output_metadata(step, "metrics").items() if k != "display_name"}
    (report,) = step["outputs"]["report"]
    given = tmp_path / "artifacts.json"
    given.write_text(json.dumps({"metrics": metrics, "html_uri": report}))
    proc = run_in_standin_harness("check_spec.py", "--kfp-artifacts", str(given), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reference = json.loads(proc.stdout.strip().splitlines()[-1])
    assert reference["metrics_metadata"] == metrics
    assert reference["html_path"] == report and Path(report).is_file()


def deploy_outcome(execution: dict) -> dict:
    from kubeflow.steps.deploy.executor import read_outcome

    (uri,) = execution["steps"][kubeflow_steps.DEPLOY]["outputs"]["deployment"]
    return read_outcome(uri)


def run_report_metrics(execution: dict) -> dict:
    return output_metadata(execution["steps"][kubeflow_steps.RUN_REPORT], "metrics")


def test_first_execution_creates_the_inference_service_on_the_versions_base_path(executions):
    from kubeflow.kserve.manifest import PredictorStatus, storage_uri

    (version,) = executions["served_after_first"]
    service = executions["service_after_first"]
    uri = storage_uri(service)
    assert uri == f"{executions['tmp']}/serving-kserve/{version.name}"
    assert (Path(uri) / version.name / "saved_model.pb").exists()  # TF Serving's layout
    predictor = service["spec"]["predictor"]
    assert predictor["model"]["modelFormat"] == {"name": "tensorflow"}
    # The TF Serving of the TensorFlow line that exported it (2.16.2: 2.16.1, its only release).
    assert predictor["model"]["runtime"] == "kserve-tensorflow-serving"
    assert predictor["model"]["runtimeVersion"] == "2.16.1"
    assert predictor["serviceAccountName"] == "kserve-models"
    status = PredictorStatus.of(service)
    assert status.percent_of(status.latest_ready) == 100
    outcome = deploy_outcome(executions["first"])
    assert (outcome["outcome"], outcome["version"]) == ("created", version.name)
    metrics = run_report_metrics(executions["first"])
    assert metrics["deployed"] == 1.0 and metrics["serving_version"] == float(version.name)
    (report,) = executions["first"]["steps"][kubeflow_steps.RUN_REPORT]["outputs"]["report"]
    assert 'data-outcome="created"' in Path(report).read_text()


def test_second_execution_rolls_its_version_out_through_a_canary(executions):
    from kubeflow.kserve.manifest import PredictorStatus, storage_uri

    verbs = [verb for verb, _ in executions["applied"]]
    assert verbs == ["create", "patch", "patch", "patch"]
    model, canary, promotion = (body for _, body in executions["applied"][1:])
    assert model["spec"]["predictor"]["canaryTrafficPercent"] == 0  # no traffic before the smoke
    assert canary == {"spec": {"predictor": {"canaryTrafficPercent": 10}}}
    assert promotion == {"spec": {"predictor": {"canaryTrafficPercent": None}}}
    service = executions["service_after_second"]
    pushed = output_metadata(executions["second"]["steps"][dag.PUSHER], "pushed_model")
    version = Path(pushed["pushed_destination"]).name
    assert storage_uri(service).endswith(f"/serving-kserve/{version}")
    status = PredictorStatus.of(service)
    assert status.latest_ready.endswith("-00002") and status.percent_of(status.latest_ready) == 100
    # Each new revision answered eval rows through the JSON signature at its own tag URL, the
    # second before it had any traffic.
    requests = executions["predict_requests"]
    assert [(r["revision"][-5:], r["tag"]) for r in requests] == [
        ("00001", "latest"),
        ("00002", "latest"),
    ]
    assert requests[1]["percent"] == 0
    assert all(r["body"]["signature_name"] == "serving_json" for r in requests)
    assert deploy_outcome(executions["second"])["outcome"] == "promoted"
    assert run_report_metrics(executions["second"])["new_version_traffic_percent"] == 100.0


def test_nothing_pushed_leaves_the_inference_service_alone(executions):
    steps = executions["unchanged"]["steps"]
    assert output_metadata(steps[dag.PUSHER], "pushed_model")["pushed"] == 0
    assert steps[kubeflow_steps.DEPLOY]["status"] == "SUCCESS"  # never from cache
    assert deploy_outcome(executions["unchanged"])["outcome"] == "skipped"
    assert run_report_metrics(executions["unchanged"])["deployed"] == 0.0
