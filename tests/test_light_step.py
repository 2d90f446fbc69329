"""A light step's pod (kubeflow/light_step.py) writes what TFX's container entrypoint writes.

Each light step is run twice on the same driver-shaped executor input (the
arguments of the packages compiled here, Deploy's included, and
`benchmarks.step_startup.light_step_arguments`):
through TFX 1.16's entrypoint (`kubeflow.step_entrypoint.run_tfx`) and as its
pod runs it (`python -m kubeflow.step_entrypoint`, the light runner). The
executor output files, the outputs and the step records must agree; the
reference is TFX's run, taken in the test. The data gates are run failing
too (`GATE_VARIANTS`): the same error must end both. The Pusher's serving
directory is compared too, its new version's name (the second of the push)
read as PUSHED; it is also run against TFX's own Pusher executor.

Each reference run is a process of its own, forked from one that imported TFX's
entrypoint and the executor classes once for the module (tests/tfx_entrypoint_fork.py):
what a run writes depends on its arguments, not on when its imports happened, and the
light runner's start-up without those imports is tests/test_step_startup.py's to check.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.step_startup import (
    CANDIDATE_DIR,
    CANDIDATE_FILES,
    GATE_VARIANTS,
    LIGHT_STEP_INPUTS,
    PUSHER,
    ROOT,
    compiled_packages,
    light_step_arguments,
    pushed_candidate,
)
from components.serving.serving_dir import PUSH_RECORD_FILE, TRAINING_STATISTICS_FILE
from kubeflow import light_step
from tests.conftest import REPO_ROOT
from tests.harness import run_report_inputs
from tests.tfx_entrypoint_fork import ForkedEntrypoint


@pytest.fixture(scope="module")
def compiled_arguments(tmp_path_factory) -> dict[str, list[str]]:
    """Each executor class of the compiled packages (Deploy included) -> its container args."""
    packages = compiled_packages(tmp_path_factory.mktemp("packages"))
    return {c: args for classes in packages.values() for c, args in classes.items()}


@pytest.fixture(scope="module")
def tfx_entrypoint(tmp_path_factory):
    """TFX's entrypoint with the light steps' executor classes imported, forked per run."""
    entrypoint = ForkedEntrypoint(sorted(light_step.LIGHT_STEPS), tmp_path_factory.mktemp("fork"))
    yield entrypoint
    entrypoint.close()


@pytest.fixture(scope="module")
def default_runs(compiled_arguments, tfx_entrypoint, tmp_path_factory):
    """Each light step run on its LIGHT_STEP_INPUTS entry, by TFX's entrypoint (tfx=True) and
    by the light runner, once per module: what `_run` returns holds no temporary path, so
    the tests that read the same run share it."""
    done: dict[tuple[str, bool], dict] = {}

    def run(class_path: str, tfx: bool) -> dict:
        if (class_path, tfx) not in done:
            root = tmp_path_factory.mktemp("tfx" if tfx else "light")
            done[class_path, tfx] = _run(
                root, class_path, compiled_arguments[class_path], tfx_entrypoint if tfx else None
            )
        return done[class_path, tfx]

    return run


def _output_tree(root: Path, executor_output: dict) -> dict[str, dict[str, str]]:
    """Each output's files and directories under its URI, each file's text (ROOT for
    `root`; bytes as hex): what the step wrote, compared whole."""
    found = {}
    for key, artifacts in executor_output.get("artifacts", {}).items():
        top = Path(artifacts["artifacts"][0]["uri"].replace("ROOT", str(root)))
        paths = [top] if top.is_file() else sorted(top.rglob("*")) if top.exists() else []
        found[key] = {
            str(p.relative_to(top)): "dir" if p.is_dir() else _text(p, root) for p in paths
        }
    return found


# A report's time of writing (components/report/report.html.j2's header): two runs differ by it.
_WRITTEN_AT = re.compile(r"report written \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


# A version the Pusher names by the second it pushes (its executor, lines 183-191), as it
# appears in a path or in the `pushed_version` property: two runs differ by it.
_PUSHED_VERSION = re.compile(r'(?<=/serving/)\d{10}\b|(?<="pushed_version": ")\d{10}(?=")')


def _pushed(text: str) -> str:
    return _PUSHED_VERSION.sub("PUSHED", text)


def _served_tree(root: Path) -> dict[str, str]:
    """The serving directory under `root` (a Pusher's destination): each file's text and each
    directory, by path, a version pushed in the run read as PUSHED."""
    top = root / "serving"
    paths = sorted(top.rglob("*")) if top.exists() else []
    return {
        _pushed(f"/serving/{p.relative_to(top)}"): "dir" if p.is_dir() else _text(p, root)
        for p in paths
    }


def _text(path: Path, root: Path) -> str:
    return _decoded(path.read_bytes(), root)


def _decoded(data: bytes, root: Path | None = None) -> str:
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return data.hex()
    text = text.replace(str(root), "ROOT") if root is not None else text
    return _WRITTEN_AT.sub("report written WHEN", text)


def _run(
    root: Path,
    class_path: str,
    compiled: list[str],
    tfx: ForkedEntrypoint | None,
    given: dict | None = None,
) -> dict:
    """The step run on `given` (LIGHT_STEP_INPUTS's by default) through TFX's entrypoint
    (`tfx`, the module's `tfx_entrypoint`) or, None, as its pod runs it: what it wrote, and
    how it ended (a `fails` run exits 1 with its error last on stderr, as TFX's does)."""
    given = LIGHT_STEP_INPUTS[class_path] if given is None else given
    args = light_step_arguments(class_path, compiled, root, given)
    if tfx is not None:
        returncode, stderr = tfx.run(args)
    else:
        done = subprocess.run(
            [sys.executable, "-m", "kubeflow.step_entrypoint", *args],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        returncode, stderr = done.returncode, done.stderr
    assert returncode == (1 if given.get("fails") else 0), stderr[-3000:]
    step = class_path.rsplit(".", 1)[1].removesuffix("_Executor")
    output_file = root / "pod" / step / "output_metadata.json"
    text = output_file.read_text().replace(str(root), "ROOT") if output_file.exists() else "{}"
    text = _pushed(text)
    record = json.loads(_pushed((root / "run-1" / step / "step_record.json").read_text()))
    executor_output = json.loads(text)
    # An HTML report carries the time it was written: compared by what it shows, not as written.
    stamped = {
        name for name, kind in given["outputs"].items() if kind.get("schemaTitle") == "system.HTML"
    }
    return {
        # The error the step ended with: the last line of its traceback.
        "error": stderr.strip().splitlines()[-1] if given.get("fails") else None,
        "errors": [a["error"] for a in record["attempts"]],
        # Every file under the step's outputs by path, whether or not the step ended well
        # (a failing drift gate writes drift.json first); `written` reads the executor output.
        "written_files": {
            str(p.relative_to(root / "run-1" / step)): p.read_text().replace(str(root), "ROOT")
            for p in sorted((root / "run-1" / step).rglob("*"))
            if p.is_file()
            and p.name != "step_record.json"
            and p.relative_to(root / "run-1" / step).parts[0] not in stamped
        },
        # Each output parameter's value artifact, as written at its URI.
        "values": {
            key: Path(
                executor_output["artifacts"][key]["artifacts"][0]["uri"].replace("ROOT", str(root))
            ).read_text()
            for key in executor_output.get("parameterValues", {})
        },
        # The line run_compiled.py times a step's start-up by (TFX's, in absl's format).
        "started": bool(re.search(r"^I\d{4} [\d:.]+ .*\] Starting executor$", stderr, re.M)),
        "executor_output": executor_output,
        "written": _output_tree(root, executor_output),
        "outputs": sorted(p.name for p in (root / "run-1" / step).iterdir()),
        "outcomes": [a["outcome"] for a in record["attempts"]],
        "recorded_outputs": json.loads(json.dumps(record["outputs"]).replace(str(root), "ROOT")),
        "served": _served_tree(root),
    }


@pytest.mark.slow  # compiles the packages; TFX's entrypoint imports TensorFlow and TFMA
@pytest.mark.parametrize("class_path", sorted(light_step.LIGHT_STEPS))
def test_the_light_runner_writes_what_tfx_entrypoint_writes(class_path, default_runs):
    reference = default_runs(class_path, tfx=True)
    light = default_runs(class_path, tfx=False)
    assert light == reference
    assert reference["executor_output"]["artifacts"]  # the comparison compared something
    assert reference["started"]
    declared = LIGHT_STEP_INPUTS[class_path].get("output_parameters", [])
    assert sorted(reference["executor_output"].get("parameterValues", {})) == sorted(declared)
    assert reference["values"] == {
        key: reference["executor_output"]["parameterValues"][key] for key in declared
    }


@pytest.mark.slow  # compiles the packages; TFX's entrypoint imports TensorFlow and TFMA
@pytest.mark.parametrize("variant", sorted(GATE_VARIANTS))
def test_a_gate_that_fails_fails_as_under_tfx_entrypoint(
    variant, compiled_arguments, tfx_entrypoint, tmp_path
):
    """The same error ends the step, recorded as its attempt's, after the same outputs
    (the drift gate writes its result before it fails); the drift gate against served
    statistics measures with TFDV in both."""
    class_path, given = GATE_VARIANTS[variant]
    compiled = compiled_arguments[class_path]
    reference = _run(tmp_path / "tfx", class_path, compiled, tfx_entrypoint, given=given)
    light = _run(tmp_path / "light", class_path, compiled, None, given=given)
    assert light == reference
    assert given["fails"] in reference["error"]
    assert reference["outcomes"] == ["failed"] and given["fails"] in reference["errors"][0]
    for output, texts in given["shows"].items():
        assert [t for t in texts if t not in reference["written_files"][output]] == [], output


LATEST_SERVED = "components.serving.baseline.component.LatestServedModel_Executor"
RUN_REPORT = "kubeflow.steps.run_report.component.RunReport_Executor"
# Cases of a light step beside its LIGHT_STEP_INPUTS entry: case -> (class, what it is handed).
OTHER_CASES = {
    # Nothing served yet (the first run): the empty Model artifact, `has_model` 0.
    "nothing served": (
        LATEST_SERVED,
        {**LIGHT_STEP_INPUTS[LATEST_SERVED], "files": {}, "dirs": ()},
    ),
    # With KServe: the version the rollout's record names (3), not a newer complete one.
    "the rollout's record": (
        LATEST_SERVED,
        {
            **LIGHT_STEP_INPUTS[LATEST_SERVED],
            "parameters": {
                "serving_model_dir": f"{ROOT}/serving",
                "rolled_out_record": f"{ROOT}/kserve/rolled_out.json",
            },
            "files": {
                **LIGHT_STEP_INPUTS[LATEST_SERVED]["files"](),
                "serving/20/saved_model.pb": b"\x08\x01a newer version, never rolled out",
                "kserve/rolled_out.json": '{"version": "3", "storage_uri": "s3://m/3", '
                '"inference_service": "taxi"}',
            },
        },
    ),
    # A run without Deploy whose later steps wrote nothing the report reads (no Trainer
    # logs, no evaluation, not blessed, not pushed): the optional `deployment` absent.
    "later steps did not run": (
        RUN_REPORT,
        {
            **LIGHT_STEP_INPUTS[RUN_REPORT],
            "files": {},
            "inputs": {
                **{
                    k: v
                    for k, v in LIGHT_STEP_INPUTS[RUN_REPORT]["inputs"].items()
                    if k != "deployment"
                },
                "blessing": (
                    LIGHT_STEP_INPUTS[RUN_REPORT]["inputs"]["blessing"][0],
                    {"blessed": 0.0},
                ),
            },
        },
    ),
}


@pytest.mark.slow  # compiles the packages; TFX's entrypoint imports TensorFlow and TFMA
@pytest.mark.parametrize("case", sorted(OTHER_CASES))
def test_the_light_runner_writes_what_tfx_entrypoint_writes_in_other_cases(
    case, compiled_arguments, tfx_entrypoint, tmp_path
):
    class_path, given = OTHER_CASES[case]
    compiled = compiled_arguments[class_path]
    reference = _run(tmp_path / "tfx", class_path, compiled, tfx_entrypoint, given=given)
    light = _run(tmp_path / "light", class_path, compiled, None, given=given)
    assert light == reference
    outputs = reference["executor_output"]["artifacts"]
    if case == "the rollout's record":
        metadata = outputs["baseline_model"]["artifacts"][0]["metadata"]
        assert metadata["has_model"] == 1.0 and metadata["served_version"] == "3"
    elif class_path == LATEST_SERVED:
        assert outputs["baseline_model"]["artifacts"][0]["metadata"]["has_model"] == 0.0
        assert reference["written"]["baseline_model"] == {}
    else:
        assert outputs["metrics"]["artifacts"][0]["metadata"]["blessed"] == 0.0
        assert "report" in reference["outputs"]


@pytest.mark.slow  # compiles the packages; TFX's entrypoint imports TensorFlow and TFMA
def test_the_served_version_is_copied_whole_as_tfx_copies_it(default_runs):
    """io_utils.copy_dir through TFX's entrypoint and store_files.copy_dir through the light
    runner: the newest complete version's files and its empty directory, nothing of the
    version still being copied; `has_model` 1 with its version and path."""
    reference = default_runs(LATEST_SERVED, tfx=True)
    light = default_runs(LATEST_SERVED, tfx=False)
    assert light == reference
    written = reference["written"]["baseline_model"]
    assert sorted(written) == [
        "Format-Serving", "Format-Serving/assets", "Format-Serving/assets.extra",
        "Format-Serving/assets.extra/push.json", "Format-Serving/saved_model.pb",
        "Format-Serving/variables", "Format-Serving/variables/variables.data-00000-of-00001",
        "Format-Serving/variables/variables.index",
    ]  # fmt: skip
    metadata = reference["executor_output"]["artifacts"]["baseline_model"]["artifacts"][0]
    assert metadata["metadata"]["has_model"] == 1.0
    assert metadata["metadata"]["served_version"] == "3"
    assert metadata["metadata"]["served_path"] == "ROOT/serving/3"


@pytest.mark.slow  # compiles the packages
def test_a_second_attempt_over_the_first_ones_output_file_runs_as_the_first(
    compiled_arguments, tmp_path
):
    """kubeflow_v2_run_executor.py, lines 89-102, reads a driver's output file, and a second
    attempt in the same place finds the first's, whose output parameters then come in as
    parameters: TFX's function executor hands the function only what it takes."""
    class_path = "kubeflow.steps.input_snapshot.component.InputSnapshot_Executor"
    compiled = compiled_arguments[class_path]
    first = _run(tmp_path, class_path, compiled, None)
    second = _run(tmp_path, class_path, compiled, None)
    assert second["executor_output"] == first["executor_output"]
    assert second["outcomes"] == ["succeeded", "succeeded"]


def _input(parameters: dict, *, legacy: bool = False, output_file: str = "") -> dict:
    key = "parameters" if legacy else "parameterValues"
    return {"inputs": {key: parameters}, "outputs": {"outputFile": output_file}}


def test_parameters_are_read_as_tfx_reads_them():
    """kubeflow_v2_entrypoint_utils.py, `parse_execution_properties`: a number is a double
    unless the spec says NUMBER_INTEGER; `input_base_uri` is `input_base`."""
    spec = {"parameters": {"n": {"parameterType": "NUMBER_INTEGER"}}}
    found = light_step.parameters(
        _input({"n": 3.0, "x": 2, "s": "a", "input_base_uri": "/d", "b": True}), spec
    )
    assert found == {"n": 3, "x": 2.0, "s": "a", "input_base": "/d", "b": True}
    assert isinstance(found["n"], int) and isinstance(found["x"], float)
    # Without an inputs spec, the deprecated `parameters` field, KFP Value protos.
    legacy = {"a": {"intValue": "4"}, "b": {"stringValue": "t"}, "c": {"doubleValue": 0.5}}
    assert light_step.parameters(_input(legacy, legacy=True), None) == {
        "a": 4.0, "b": "t", "c": 0.5,
    }  # fmt: skip


def test_a_parameter_without_a_value_is_refused():
    with pytest.raises(light_step.LightStepError, match="parameter 'p' has no value"):
        light_step.parameters(_input({"p": None}), {"parameters": {}})


def test_an_input_of_two_artifacts_is_refused():
    """A function-based component takes one artifact per input and output."""
    two = {"examples": {"artifacts": [{"uri": "/a"}, {"uri": "/b"}]}}
    with pytest.raises(light_step.LightStepError, match="'examples': 2 artifacts, not one"):
        light_step._artifacts(two)


def test_input_artifacts_carry_their_properties_and_metadata():
    """`_parse_raw_artifact`: properties, custom properties and the metadata Struct."""
    raw = {
        "m": {
            "artifacts": [
                {
                    "name": "n1",
                    "uri": "s3://b/m",
                    "customProperties": {"pushed": {"intValue": "1"}},
                    "metadata": {"pushed_destination": "s3://b/serving/7"},
                }
            ]
        }
    }
    artifact = light_step._artifacts(raw)["m"]
    assert (artifact.uri, artifact.name) == ("s3://b/m", "n1")
    assert artifact.get_custom_property("pushed") == 1.0
    assert artifact.get_custom_property("pushed_destination") == "s3://b/serving/7"


def test_parameters_a_driver_wrote_in_the_output_file_win(tmp_path):
    """kubeflow_v2_run_executor.py, lines 84-97: a driver's output file overrides inputs."""
    output_file = tmp_path / "output_metadata.json"
    output_file.write_text(json.dumps({"parameterValues": {"p": "from the driver"}}))
    assert light_step._driver_parameters(str(output_file)) == {
        "parameterValues": {"p": "from the driver"}
    }
    assert light_step._driver_parameters(str(tmp_path / "none.json")) == {}


def test_the_benchmark_gives_every_light_step_an_input():
    assert set(LIGHT_STEP_INPUTS) == set(light_step.LIGHT_STEPS)


def test_a_returned_value_is_written_as_tfx_writes_a_string_artifact(tmp_path):
    """decorators.py `_assign_returned_values` and value_artifact.py `write`: the value at the
    artifact's URI and `__is_null__` 0; run_executor.py lines 156-174: the parameter's value."""
    snapshot = light_step.StepArtifact(uri=str(tmp_path / "snapshot"), title="tfx.String")
    light_step._write_returned_values("C", {"snapshot": "[1]"}, {"snapshot": snapshot})
    assert (tmp_path / "snapshot").read_text() == "[1]"
    assert snapshot.metadata == {"__is_null__": 0.0}
    declared = {"snapshot": {"outputFile": "/tmp/outputs/snapshot"}}
    found = light_step._parameter_values("C", declared, {"snapshot": snapshot}, {"snapshot": "[1]"})
    assert found == {"snapshot": "[1]"}


def test_an_output_value_the_light_runner_cannot_write_is_refused(tmp_path):
    number = light_step.StepArtifact(uri=str(tmp_path / "n"), title="tfx.Float")
    with pytest.raises(light_step.LightStepError, match=r"output 'n' \(tfx.Float, float\)"):
        light_step._write_returned_values("C", {"n": 3.0}, {"n": number})
    count = light_step.StepArtifact(uri=str(tmp_path / "c"), title="tfx.Integer")
    with pytest.raises(light_step.LightStepError, match=r"output 'c' \(tfx.Integer, str\)"):
        light_step._write_returned_values("C", {"c": "3"}, {"c": count})
    with pytest.raises(light_step.LightStepError, match="'x', which is no output of the step"):
        light_step._write_returned_values("C", {"x": "v"}, {})
    with pytest.raises(light_step.LightStepError, match="no output artifact of its name"):
        light_step._parameter_values("C", {"p": {}}, {}, {"p": "v"})
    with pytest.raises(light_step.LightStepError, match="returned no value for output 'p'"):
        light_step._parameter_values("C", {"p": {}}, {"p": number}, {})


def test_an_artifact_type_is_read_by_its_schema_title():
    """kubeflow_v2_entrypoint_utils.py, `_retrieve_class_path`."""
    raw = {"s": {"artifacts": [{"uri": "/s", "type": {"instanceSchema": "title: tfx.String\n"}}]}}
    assert light_step._artifacts(raw)["s"].title == "tfx.String"
    raw["s"]["artifacts"][0]["type"] = {"schemaTitle": "system.HTML"}
    assert light_step._artifacts(raw)["s"].title == "system.HTML"
    raw["s"]["artifacts"][0]["type"] = {"instanceSchema": "type: object\n"}
    assert light_step._artifacts(raw)["s"].title == "tfx.Artifact"


# Input artifacts as a driver hands them: type property and custom property by one name, a
# value that does not fit its property's type, a KFP Value, falsy values, a type without
# properties.
_RAW_INPUTS = [
    (
        "tfx.Examples",
        {
            "customProperties": {"n": {"intValue": "4"}, "s": {"stringValue": "t"}},
            "metadata": {
                "span": 4,
                "custom:span": 5,
                "version": "not a number",
                "split_names": '["train"]',
                "input_fingerprint": "f",
                "zero": 0,
                "empty": "",
            },
        },
    ),
    ("tfx.ExampleStatistics", {"metadata": {"span": 1.0, "split_names": 3}}),
    ("tfx.ModelBlessing", {"metadata": {"blessed": 0.0, "custom:span": 2}}),
]


@pytest.mark.slow  # imports TFX's entrypoint (TensorFlow, TFMA)
@pytest.mark.parametrize(("title", "raw"), _RAW_INPUTS, ids=[t for t, _ in _RAW_INPUTS])
def test_an_inputs_custom_properties_are_those_of_tfx_s_artifact(title, raw):
    """`_parse_raw_artifact` (kubeflow_v2_entrypoint_utils.py, lines 296-332), run here, and
    `custom_properties_of` on the same raw artifact: the same custom properties, each read as
    its value (kubeflow/steps/run_report/component.py's `_custom_value`, which keeps a falsy
    one)."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as utils

    from kubeflow.steps.run_report.component import _custom_value

    runtime = json_format.ParseDict(
        {"uri": "/a", "type": {"instanceSchema": f"title: {title}\n"}, **raw},
        pipeline_spec_pb2.RuntimeArtifact(),
    )
    artifact = utils._parse_raw_artifact(runtime, {})
    expected = {
        name: _custom_value(artifact, name) for name in artifact.mlmd_artifact.custom_properties
    }
    found = light_step.custom_properties_of(raw, title)
    assert found == expected
    assert {k: type(v) for k, v in found.items()} == {k: type(v) for k, v in expected.items()}


def test_an_input_without_artifacts_is_left_to_the_functions_default():
    """decorators.py, `_extract_func_args`, lines 59-68: a missing optional input is not
    passed; an output is always one artifact."""
    assert light_step._artifacts({"deployment": {"artifacts": []}}, inputs=True) == {}
    with pytest.raises(light_step.LightStepError, match="'report': 0 artifacts, not one"):
        light_step._artifacts({"report": {"artifacts": []}})


def _real_run_report_inputs(output_dir: Path, run_id: str) -> dict:
    """RunReport's LIGHT_STEP_INPUTS entry on the outputs of a local run (`run_id`): each
    input's files (copied under the test's run) and the metadata its producer's executor
    output carried (TFX's entrypoint's `_get_json_metadata_mapping`, run here)."""
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as utils

    found = run_report_inputs(output_dir, run_id)
    given = LIGHT_STEP_INPUTS[RUN_REPORT]
    inputs = {
        key: (given["inputs"][key][0], utils._get_json_metadata_mapping(artifact))
        for key, artifact in found.items()
    }

    def files() -> dict[str, bytes]:
        copied = {}
        for key, artifact in found.items():
            top = Path(artifact.uri)
            for path in (p for p in top.rglob("*") if p.is_file()):
                copied[f"run-1/upstream/{key}/{path.relative_to(top)}"] = path.read_bytes()
        return copied

    return {**given, "files": files, "inputs": inputs, "shows": {}}


@pytest.mark.slow  # two local runs; TFX's entrypoint imports TensorFlow and TFMA
def test_the_run_report_of_a_real_run_is_what_tfx_entrypoint_writes(
    two_local_runs, compiled_arguments, tfx_entrypoint, tmp_path
):
    """RunReport on the second local run's outputs (the first run's model served, trained,
    evaluated against it): TFX's entrypoint and the light runner write the same page and
    the same metrics, and the page reads every section of the run."""
    given = _real_run_report_inputs(two_local_runs.output_dir, two_local_runs.second.run_id)
    compiled = compiled_arguments[RUN_REPORT]
    reference = _run(tmp_path / "tfx", RUN_REPORT, compiled, tfx_entrypoint, given=given)
    light = _run(tmp_path / "light", RUN_REPORT, compiled, None, given=given)
    assert light == reference
    html = reference["written"]["report"]["."]
    assert "left out" not in html
    for section in ('id="statistics"', 'id="training"', 'id="evaluation"', 'data-epoch="1"'):
        assert section in html, section
    metrics = reference["executor_output"]["artifacts"]["metrics"]["artifacts"][0]["metadata"]
    assert metrics["blessed"] == (1.0 if two_local_runs.second.blessed else 0.0)
    assert any(name.startswith("baseline_") for name in metrics)


# --- the Pusher -------------------------------------------------------------------------------
# Its step name in the paths `light_step_arguments` gives (the class name).
_PUSHER_STEP = PUSHER.rsplit(".", 1)[1]
_PUSHED_MODEL = f"ROOT/run-1/{_PUSHER_STEP}/pushed_model"


def _candidate_served(push_record: str) -> dict[str, str | bytes]:
    """The Pusher's files with the candidate served as version 3, whose push record names
    `push_record` (a Pusher execution's output URI; ROOT stands for the run's root)."""
    found = {k: v for k, v in pushed_candidate().items() if not k.startswith("serving/3/")}
    for path, content in CANDIDATE_FILES.items():
        found[f"serving/3/{path[len(CANDIDATE_DIR) + 1 :]}"] = content
    found[f"serving/3/{PUSH_RECORD_FILE}"] = json.dumps({"pushed_model": push_record})
    return found


def _given(blessed: float = 1.0, files=pushed_candidate, extras: bool = True) -> dict:
    """The Pusher's LIGHT_STEP_INPUTS entry with another blessing, files, or without the
    training statistics and the evaluation (`extras` False: TFX's own Pusher takes neither)."""
    given = LIGHT_STEP_INPUTS[PUSHER]
    inputs = {**given["inputs"], "model_blessing": (given["inputs"]["model_blessing"][0], {})}
    inputs["model_blessing"][1]["blessed"] = blessed
    if not extras:
        inputs = {k: v for k, v in inputs.items() if k not in ("training_statistics", "evaluation")}
    return {**given, "inputs": inputs, "files": files, "shows": {}}


# The Pusher's cases beside its LIGHT_STEP_INPUTS entry: case -> (its inputs, the metadata
# its PushedModel must carry). The serving directory's versions: 3, and 12 half-copied.
# (Not blessed: against TFX's own Pusher below, which reads the blessing as ours does.)
PUSHER_CASES = {
    # The candidate is the model version 3 serves, pushed by another run: nothing pushed.
    "already served": (
        _given(files=lambda: _candidate_served("ROOT/run-0/Pusher/pushed_model")),
        {"pushed": 0.0, "already_served": "ROOT/serving/3"},
    ),
    # A retried attempt (same output URI) finds the version its first attempt pushed.
    "a retried attempt": (
        _given(files=lambda: _candidate_served(f"{ROOT}/run-1/{_PUSHER_STEP}/pushed_model")),
        {"pushed": 1.0, "pushed_destination": "ROOT/serving/3", "pushed_version": "3"},
    ),
}


def _pushed_metadata(run: dict) -> dict:
    metadata = run["executor_output"]["artifacts"]["pushed_model"]["artifacts"][0]["metadata"]
    return {k: v for k, v in metadata.items() if k != light_step.TFX_VERSION_PROPERTY}


@pytest.mark.slow  # compiles the packages; TFX's entrypoint imports TensorFlow and TFMA
def test_a_blessed_candidate_is_pushed_as_under_tfx_entrypoint(default_runs):
    """A new version (named by the second of the push) with the candidate's files, the
    training statistics, the Evaluator's record and the push record; the version 3 served
    and the half-copied 12 untouched; the candidate kept under the PushedModel."""
    reference = default_runs(PUSHER, tfx=True)
    assert default_runs(PUSHER, tfx=False) == reference
    assert _pushed_metadata(reference) == {
        "pushed": 1.0,
        "pushed_destination": "ROOT/serving/PUSHED",
        "pushed_version": "PUSHED",
    }
    served = reference["served"]
    assert sorted(p for p in served if p.startswith("/serving/PUSHED")) == [
        "/serving/PUSHED", "/serving/PUSHED/assets", "/serving/PUSHED/assets.extra",
        "/serving/PUSHED/assets.extra/evaluation.json", "/serving/PUSHED/assets.extra/push.json",
        "/serving/PUSHED/assets.extra/training_statistics",
        "/serving/PUSHED/assets.extra/training_statistics/FeatureStats.pb",
        "/serving/PUSHED/saved_model.pb", "/serving/PUSHED/variables",
        "/serving/PUSHED/variables/variables.data-00000-of-00001",
        "/serving/PUSHED/variables/variables.index",
    ]  # fmt: skip
    assert json.loads(served["/serving/PUSHED/assets.extra/push.json"]) == {
        "pushed_model": _PUSHED_MODEL
    }
    files = pushed_candidate()
    statistics = files["run-1/upstream/training_statistics/Split-train/FeatureStats.pb"]
    assert served[f"/serving/PUSHED/{TRAINING_STATISTICS_FILE}"] == _decoded(statistics)
    assert served["/serving/PUSHED/saved_model.pb"] == "\x08\x01candidate"
    assert served["/serving/3/saved_model.pb"] == "\x08\x01saved model"
    assert "/serving/12/saved_model.pb" not in served
    assert sorted(reference["written"]["pushed_model"]) == [
        "assets", "saved_model.pb", "variables",
        "variables/variables.data-00000-of-00001", "variables/variables.index",
    ]  # fmt: skip


@pytest.mark.slow  # compiles the packages; TFX's entrypoint imports TensorFlow and TFMA
@pytest.mark.parametrize("case", sorted(PUSHER_CASES))
def test_the_pusher_runs_light_as_under_tfx_entrypoint_in_other_cases(
    case, compiled_arguments, tfx_entrypoint, tmp_path
):
    """The candidate already served, a retried attempt: no new version, the same
    PushedModel; a retried attempt keeps the candidate as its PushedModel again."""
    given, metadata = PUSHER_CASES[case]
    compiled = compiled_arguments[PUSHER]
    reference = _run(tmp_path / "tfx", PUSHER, compiled, tfx_entrypoint, given=given)
    light = _run(tmp_path / "light", PUSHER, compiled, None, given=given)
    assert light == reference
    assert _pushed_metadata(reference) == metadata
    assert sorted(v for v in {p.split("/")[2] for p in reference["served"]}) == ["12", "3"]
    assert bool(reference["written"]["pushed_model"]) == (metadata["pushed"] == 1.0)


# TFX 1.16's own Pusher executor, which components/serving/push/executor.py ports.
TFX_PUSHER = "tfx.components.pusher.executor.Executor"


@pytest.mark.slow  # compiles the packages; TFX's entrypoint imports TensorFlow and TFMA
@pytest.mark.parametrize("blessed", [1.0, 0.0])
def test_the_pusher_pushes_as_tfx_s_own_pusher_does(
    blessed, compiled_arguments, tfx_entrypoint, tmp_path
):
    """Without the training statistics and the evaluation (inputs TFX's Pusher does not
    take), TFX's own executor through its entrypoint and the light runner: the same version
    (the candidate's files, saved_model.pb included, no push record) and PushedModel."""
    given = _given(blessed=blessed, extras=False)
    compiled = list(compiled_arguments[PUSHER])
    compiled[compiled.index("--executor_class_path") + 1] = TFX_PUSHER
    reference = _run(tmp_path / "tfx", PUSHER, compiled, tfx_entrypoint, given=given)
    light = _run(tmp_path / "light", PUSHER, compiled_arguments[PUSHER], None, given=given)
    assert light == reference
    pushed = {p for p in reference["served"] if p.startswith("/serving/PUSHED")}
    if blessed:
        assert _pushed_metadata(reference)["pushed_version"] == "PUSHED"
        assert "/serving/PUSHED/saved_model.pb" in pushed
        assert not [p for p in pushed if "assets.extra" in p]
    else:
        assert _pushed_metadata(reference) == {"pushed": 0.0}
        assert not pushed
