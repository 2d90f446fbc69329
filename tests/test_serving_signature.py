"""The JSON serving signature, called the way TF Serving's REST API calls it.

The small model (conftest's `small_model_base`: a few steps on real Transform
output) sits in a TF Serving base path (`<base>/1/`). Requests go through
tests/tf_serving_standin.py, which turns `instances` and `inputs` bodies into
the signature's named tensors with TF Serving's rules, and the answers are
compared with `serving_default` on the same rows as serialized tf.Examples.
"""

from __future__ import annotations

import base64
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from contract.dataset.error import DatasetSpecError
from tests.harness import ROWS, contract, examples, instances, rows_with_gaps
from tests.tf_serving_standin import ModelServer, served_version
from trainer.export import SERVING_SIGNATURE, TRANSFORM_SIGNATURE, _parsed_spec
from trainer.json_signature import (
    JSON_SIGNATURE,
    instance_from_example,
    json_inputs,
)
from trainer.model_support import PROBABILITIES_OUTPUT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(small_model_base):
    """The small model's TF Serving base path, and TF Serving's REST API on it."""
    return {"base": small_model_base, "server": ModelServer(small_model_base)}


def default_scores(server: ModelServer, serialized: list[bytes]) -> np.ndarray:
    signature = server._model.signatures[SERVING_SIGNATURE]
    return signature(examples=tf.constant(serialized))[PROBABILITIES_OUTPUT].numpy()


def post(server: ModelServer, body: dict) -> tuple[int, dict]:
    # As a client sends it: JSON text, NaN written as TF Serving reads it.
    return server.predict(json.dumps(body))


def test_both_signatures_score_the_same_rows_alike(served, taxi_trainer_inputs, taxi_spec):
    rows = rows_with_gaps(taxi_trainer_inputs, taxi_spec)
    serialized = examples(rows, taxi_spec)
    expected = default_scores(served["server"], serialized)
    body = {"signature_name": JSON_SIGNATURE, "instances": instances(served, serialized)}
    assert any(math.isnan(i["fare"]) for i in body["instances"])
    assert "NaN" in json.dumps(body)
    status, answer = post(served["server"], body)
    assert status == 200, answer
    predictions = np.array(answer["predictions"], dtype=np.float32)
    assert predictions.shape == (ROWS, 1)
    np.testing.assert_allclose(predictions, expected, rtol=1e-6, atol=1e-6)
    # Columnar: one list per input.
    columns = {k: [i[k] for i in body["instances"]] for k in body["instances"][0]}
    status, answer = post(served["server"], {"signature_name": JSON_SIGNATURE, "inputs": columns})
    assert status == 200, answer
    np.testing.assert_allclose(np.array(answer["outputs"]), expected, rtol=1e-6, atol=1e-6)


def test_zero_stands_for_a_missing_id_and_nan_for_a_missing_float(
    served, taxi_trainer_inputs, taxi_spec
):
    row = dict(taxi_trainer_inputs["raw_rows"][0], trip_seconds="600")
    missing = dict(row, trip_start_hour="", fare="")
    expected = default_scores(served["server"], examples([missing], taxi_spec))
    (instance,) = instances(served, examples([missing], taxi_spec))
    assert instance["trip_start_hour"] == 0 and math.isnan(instance["fare"])
    status, answer = post(
        served["server"], {"signature_name": JSON_SIGNATURE, "instances": [instance]}
    )
    assert status == 200
    np.testing.assert_allclose(answer["predictions"], expected, rtol=1e-6, atol=1e-6)


def test_a_row_missing_an_int_with_no_marker_has_no_json_instance(
    served, taxi_trainer_inputs, taxi_spec
):
    row = dict(taxi_trainer_inputs["raw_rows"][0], trip_seconds="")
    (serialized,) = examples([row], taxi_spec)
    assert instance_from_example(tf.train.Example.FromString(serialized), contract(served)) is None


def test_the_contract_names_each_feature_in_the_schemas_dtype(served, taxi_spec):
    inputs = {i.name: i for i in contract(served)}
    assert set(inputs) == set(taxi_spec.features)  # not the label's columns, not ignored ones
    assert inputs["fare"].dtype == "float" and math.isnan(inputs["fare"].missing)
    assert inputs["company"].dtype == "string" and inputs["company"].missing == ""
    assert inputs["trip_start_hour"].dtype == "int" and inputs["trip_start_hour"].missing == 0
    assert inputs["trip_seconds"].dtype == "int" and inputs["trip_seconds"].missing is None
    signature = served["server"].signature_inputs(JSON_SIGNATURE)
    dtypes = {"float": tf.float32, "int": tf.int64, "string": tf.string}
    assert {k: (v.dtype, v.shape.as_list()) for k, v in signature.items()} == {
        k: (dtypes[i.dtype], [None]) for k, i in inputs.items()
    }


def saved_model_cli_signatures(version: Path) -> dict[str, dict]:
    """`saved_model_cli show --all`, parsed: signature -> inputs, outputs, method."""
    cli = Path(sys.executable).parent / "saved_model_cli"
    proc = subprocess.run(
        [str(cli), "show", "--dir", str(version), "--all"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    signatures: dict[str, dict] = {}
    current: dict | None = None
    side = ""
    pending = None
    for line in proc.stdout.splitlines():
        if m := re.match(r"signature_def\['(.+)'\]:", line):
            current = signatures.setdefault(m.group(1), {"inputs": {}, "outputs": {}})
        elif current is None:
            continue
        elif "following input(s)" in line:
            side = "inputs"
        elif "following output(s)" in line:
            side = "outputs"
        elif m := re.match(r"\s+(inputs|outputs)\['(.+)'\] tensor_info:", line):
            pending = current[side].setdefault(m.group(2), {})
        elif m := re.match(r"\s+(dtype|shape): (.+)", line):
            pending[m.group(1)] = m.group(2).strip()
        elif m := re.match(r"\s+Method name is: (.+)", line):
            current["method"] = m.group(1)
        elif line.startswith("The MetaGraph") or line.startswith("Concrete Functions"):
            current = None
    return signatures


def test_saved_model_cli_shows_both_serving_signatures(served, taxi_spec):
    signatures = saved_model_cli_signatures(served_version(served["base"]))
    assert {SERVING_SIGNATURE, JSON_SIGNATURE, TRANSFORM_SIGNATURE} <= set(signatures)
    default, by_name = signatures[SERVING_SIGNATURE], signatures[JSON_SIGNATURE]
    assert default["inputs"] == {"examples": {"dtype": "DT_STRING", "shape": "(-1)"}}
    probabilities = {PROBABILITIES_OUTPUT: {"dtype": "DT_FLOAT", "shape": "(-1, 1)"}}
    assert default["outputs"] == by_name["outputs"] == probabilities
    assert by_name["method"] == "tensorflow/serving/predict"
    assert by_name["inputs"]["fare"] == {"dtype": "DT_FLOAT", "shape": "(-1)"}
    assert by_name["inputs"]["company"] == {"dtype": "DT_STRING", "shape": "(-1)"}
    assert by_name["inputs"]["trip_start_hour"] == {"dtype": "DT_INT64", "shape": "(-1)"}
    assert set(by_name["inputs"]) == set(taxi_spec.features)


def test_both_serving_signatures_call_one_copy_of_the_model(served):
    """The model's layers (its MatMuls) are saved once for serving_default and
    serving_json together: one function, called by both (trainer/export.py)."""
    saved_model = saved_model_pb2.SavedModel.FromString(
        (served_version(served["base"]) / "saved_model.pb").read_bytes()
    )
    library = saved_model.meta_graphs[0].graph_def.library
    with_the_model = [
        f.signature.name for f in library.function if any(n.op == "MatMul" for n in f.node_def)
    ]
    assert len(with_the_model) == 1, with_the_model


def test_a_raw_feature_the_signatures_cannot_take_is_refused_naming_it():
    assert _parsed_spec("fare", tf.io.FixedLenFeature([], tf.float32)) == tf.TensorSpec(
        [None], tf.float32
    )
    ragged = tf.io.RaggedFeature(tf.int64)
    with pytest.raises(ValueError, match="trip_path: a RaggedFeature"):
        _parsed_spec("trip_path", ragged)


def a_good_instance(served, taxi_trainer_inputs, taxi_spec) -> dict:
    row = dict(taxi_trainer_inputs["raw_rows"][1], trip_seconds="300")
    (instance,) = instances(served, examples([row], taxi_spec))
    return instance


def test_a_string_may_come_as_b64(served, taxi_trainer_inputs, taxi_spec):
    instance = a_good_instance(served, taxi_trainer_inputs, taxi_spec)
    as_b64 = dict(
        instance, company={"b64": base64.b64encode(instance["company"].encode()).decode()}
    )
    answers = [
        post(served["server"], {"signature_name": JSON_SIGNATURE, "instances": [i]})
        for i in (instance, as_b64)
    ]
    assert answers[0] == answers[1] and answers[0][0] == 200


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda i: i.update(fare="12.5"),
            "key: fare of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"12.5\" "
            "Type: String is not of expected type: float",
        ),
        (
            lambda i: i.update(trip_start_hour=7.5),
            "key: trip_start_hour of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: 7.5 "
            "Type: Number is not of expected type: int64",
        ),
        (lambda i: i.update(company=3), "key: company of 'instances' list"),
        (lambda i: i.update(fare={"b64": "MTI="}), "key: fare of 'instances' list"),
        (lambda i: i.update(tips=1.0), "does not have named input: tips"),
        (lambda i: i.pop("company"), "keys must be equal to: company,"),
    ],
    ids=[
        "string_for_float",
        "fraction_for_int",
        "number_for_string",
        "b64_for_float",
        "unknown_feature",
        "missing_feature",
    ],
)
def test_a_bad_instance_is_refused_naming_the_feature(
    served, taxi_trainer_inputs, taxi_spec, change, message
):
    instance = a_good_instance(served, taxi_trainer_inputs, taxi_spec)
    change(instance)
    status, answer = post(
        served["server"], {"signature_name": JSON_SIGNATURE, "instances": [instance]}
    )
    assert status == 400
    assert message in answer["error"]


def test_columnar_inputs_missing_a_feature_are_refused_naming_it(
    served, taxi_trainer_inputs, taxi_spec
):
    instance = a_good_instance(served, taxi_trainer_inputs, taxi_spec)
    columns = {k: [v] for k, v in instance.items() if k != "fare"}
    status, answer = post(served["server"], {"signature_name": JSON_SIGNATURE, "inputs": columns})
    assert (status, answer) == (400, {"error": "Missing named input: fare in 'inputs' object."})


def test_tf_serving_finds_no_version_in_a_directory_holding_the_model_itself(served):
    with pytest.raises(FileNotFoundError, match="No versions of servable found"):
        served_version(served["base"] / "1")


def test_column_names_that_tensors_cannot_hold_become_input_names(taxi_spec):
    import dataclasses

    from contract.dataset.sections import FeatureSpec

    inputs = json_inputs(
        dataclasses.replace(
            taxi_spec,
            features={
                "Body Mass (g)": FeatureSpec(kind="numeric"),
                "_id": FeatureSpec(kind="id", num_values=9),
            },
        ),
        {"Body Mass (g)": "float", "_id": "int"},
    )
    assert [i.name for i in inputs] == ["Body_Mass__g_", "id"]
    # A spec built without parse_spec still meets the one collision check.
    clash = dataclasses.replace(
        taxi_spec,
        features={"a.b": FeatureSpec(kind="numeric"), "a_b": FeatureSpec(kind="numeric")},
    )
    with pytest.raises(DatasetSpecError, match=r"features.a_b: 'a_b' and 'a.b' both become"):
        json_inputs(clash, {"a.b": "float", "a_b": "float"})


@pytest.mark.e2e
def test_the_documented_request_is_answered_by_a_pushed_model(two_local_runs):
    from tests.conftest import REPO_ROOT

    page = (REPO_ROOT / "docs" / "serving.md").read_text()
    section = page[page.index("### The requests") :]
    body = json.loads(
        section[section.index("```json") + 7 : section.index("```", section.index("```json") + 7)]
    )
    server = ModelServer(two_local_runs.first_version.parent)
    status, answer = server.predict(json.dumps(body))
    assert status == 200, answer
    (prediction,) = answer["predictions"]
    assert len(prediction) == 1 and 0.0 <= prediction[0] <= 1.0
    columns = {k: [v] for k, v in body["instances"][0].items()}
    status, answer = server.predict(
        json.dumps({"signature_name": JSON_SIGNATURE, "inputs": columns})
    )
    assert status == 200 and answer["outputs"] == [prediction]
