"""The step entrypoint on the executor input open-source KFP's driver really builds.

The driver hands input artifacts typed `instanceSchema: ""` and adds an
`executor-logs` output typed `system.Artifact` (kubeflow/step_entrypoint.py,
`as_declared`, cites the source). TFX 1.16's own parser fails on both; the
entrypoint puts the executor input back into the shape the component
declares. The whole package runs on that shape in the executed tests
(kubeflow/standin_harness/run_compiled.py plays the driver).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from kubeflow.step_entrypoint import (
    DECLARED_OUTPUTS_FLAG,
    INVOCATION_FLAG,
    TFX_ENTRYPOINT_MODULE,
    as_declared,
    step_arguments,
)
from tests.conftest import REPO_ROOT, golden_path

EXAMPLES_TYPE = {"instanceSchema": "title: tfx.Examples\ntype: object\n"}
STATISTICS_TYPE = {"instanceSchema": "title: tfx.ExampleStatistics\ntype: object\n"}
INPUTS_SPEC = {
    "artifacts": {"examples": {"artifactType": EXAMPLES_TYPE}},
    "parameters": {"exclude_splits": {"parameterType": "STRING"}},
}


def driver_executor_input(tmp_path) -> dict:
    """StatisticsGen's executor input as the 2.x driver builds it (metadata/client.go:1144,
    driver.go:755 at 2.17.0)."""
    return {
        "inputs": {
            "artifacts": {
                "examples": {
                    "artifacts": [
                        {
                            "name": "42",
                            "type": {"instanceSchema": ""},
                            "uri": str(tmp_path / "ExampleGen" / "examples"),
                            "metadata": {
                                "split_names": '["train", "eval"]',
                                "span": 1.0,
                                "display_name": "examples",
                                "store_session_info": "null",
                            },
                        }
                    ]
                }
            },
            "parameterValues": {"exclude_splits": "[]"},
        },
        "outputs": {
            "artifacts": {
                "statistics": {
                    "artifacts": [
                        {
                            "name": "statistics",
                            "type": STATISTICS_TYPE,
                            "uri": str(tmp_path / "StatisticsGen" / "statistics"),
                        }
                    ]
                },
                "executor-logs": {
                    "artifacts": [
                        {
                            "name": "executor-logs",
                            "type": {"schemaTitle": "system.Artifact"},
                            "uri": str(tmp_path / "StatisticsGen" / "executor-logs"),
                        }
                    ]
                },
            },
            "outputFile": str(tmp_path / "pod" / "tmp/kfp_outputs/output_metadata.json"),
        },
    }


def test_tfx_cannot_read_what_the_driver_hands_it(tmp_path):
    """The faults themselves, in TFX 1.16's own parser (what every step runs)."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as tfx

    executor_input = json_format.ParseDict(
        driver_executor_input(tmp_path), pipeline_spec_pb2.ExecutorInput()
    )
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'get'"):
        tfx.parse_raw_artifact_dict(executor_input.inputs.artifacts)
    with pytest.raises(ImportError, match=r"system\.Artifact"):
        tfx.parse_raw_artifact_dict(executor_input.outputs.artifacts)


def test_as_declared_gives_tfx_the_declared_types_and_outputs(tmp_path):
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as tfx

    fixed, changes = as_declared(driver_executor_input(tmp_path), INPUTS_SPEC, ["statistics"])
    assert changes == [
        "input examples: type {'instanceSchema': ''} -> the declared one",
        "output executor-logs: not declared by the component, not handed to TFX",
    ]
    executor_input = json_format.ParseDict(fixed, pipeline_spec_pb2.ExecutorInput())
    [examples] = tfx.parse_raw_artifact_dict(executor_input.inputs.artifacts)["examples"]
    assert examples.type_name == "Examples"
    assert examples.split_names == '["train", "eval"]'
    assert examples.span == 1
    assert list(tfx.parse_raw_artifact_dict(executor_input.outputs.artifacts)) == ["statistics"]


def test_a_type_the_backend_kept_is_left_alone(tmp_path):
    typed = driver_executor_input(tmp_path)
    typed["inputs"]["artifacts"]["examples"]["artifacts"][0]["type"] = EXAMPLES_TYPE
    fixed, changes = as_declared(typed, INPUTS_SPEC, None)
    assert changes == []
    assert fixed == typed


def test_an_input_with_no_type_at_all_gets_the_declared_one(tmp_path):
    """Inputs passed down from a parent DAG come with no type (driver/resolve.go)."""
    untyped = driver_executor_input(tmp_path)
    del untyped["inputs"]["artifacts"]["examples"]["artifacts"][0]["type"]
    fixed, _ = as_declared(untyped, INPUTS_SPEC, None)
    assert fixed["inputs"]["artifacts"]["examples"]["artifacts"][0]["type"] == EXAMPLES_TYPE


def test_our_flag_is_taken_out_before_tfx_parses_the_rest(tmp_path):
    """TFX hands flags it does not know to Beam: ours must not reach it."""
    argv = [
        DECLARED_OUTPUTS_FLAG, '["statistics"]',
        "--executor_class_path", "tfx.components.statistics_gen.executor.Executor",
        INVOCATION_FLAG, json.dumps(driver_executor_input(tmp_path)),
        "--json_serialized_inputs_spec_args", json.dumps(INPUTS_SPEC),
        "--runner=DirectRunner",
    ]  # fmt: skip
    tfx_argv, executor_input, changes = step_arguments(argv)
    assert DECLARED_OUTPUTS_FLAG not in tfx_argv
    assert tfx_argv[-1] == "--runner=DirectRunner"
    handed = json.loads(tfx_argv[tfx_argv.index(INVOCATION_FLAG) + 1])
    assert handed == executor_input
    assert list(handed["outputs"]["artifacts"]) == ["statistics"]
    assert len(changes) == 2


def test_every_compiled_step_declares_its_outputs():
    """The compile writes each container's declared outputs (golden spec)."""
    spec, _ = list(yaml.safe_load_all(golden_path("kubeflow_pipeline.yaml").read_text()))
    for label, executor in spec["deploymentSpec"]["executors"].items():
        args = executor["container"]["args"]
        assert args[0] == DECLARED_OUTPUTS_FLAG, label
        component = next(c for c in spec["components"].values() if c.get("executorLabel") == label)
        declared = sorted(component.get("outputDefinitions", {}).get("artifacts", {}))
        assert json.loads(args[1]) == declared, label


@pytest.mark.slow
def test_tfx_own_entrypoint_exits_1_on_the_driver_input_and_ours_does_not_fail_there(tmp_path):
    """As every step would start on a stock 2.x backend without our entrypoint."""
    executor_input = json.dumps(driver_executor_input(tmp_path))
    common = [
        "--executor_class_path", "tfx.components.statistics_gen.executor.Executor",
        INVOCATION_FLAG, executor_input,
        "--json_serialized_inputs_spec_args", json.dumps(INPUTS_SPEC),
    ]  # fmt: skip
    stock = subprocess.run(
        [sys.executable, "-m", TFX_ENTRYPOINT_MODULE, *common],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert stock.returncode == 1
    assert "AttributeError: 'NoneType' object has no attribute 'get'" in stock.stderr
    ours = subprocess.run(
        [sys.executable, "-m", "kubeflow.step_entrypoint",
         DECLARED_OUTPUTS_FLAG, '["statistics"]', *common],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    # The types parse; the executor then finds no Examples files (none were written).
    assert "AttributeError" not in ours.stderr and "ImportError" not in ours.stderr
    assert "Executor input as declared: input examples" in ours.stderr
    assert "Starting executor" in ours.stderr
