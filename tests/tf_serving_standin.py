"""TF Serving's REST predict API, played in Python on a SavedModel, for the serving tests.

What it reproduces, from tensorflow_serving/util/json_tensor.cc and the model
server's layout rules:

* the model base path: TF Serving serves the highest numbered version directory
  holding a `saved_model.pb` (its default `latest` version policy) and finds
  none in a directory that holds the SavedModel itself;
* `POST /v1/models/NAME:predict` bodies: `signature_name` (default
  `serving_default`), `instances` (row format: a list of objects keyed by input
  name, every input in every object, or plain values for a one-input
  signature) or `inputs` (columnar: one list per input name); JSON's NaN and
  Infinity; ints for int64 inputs (a JSON number with a fraction or exponent is
  refused), any number for float inputs, strings or `{"b64": ...}` for string
  inputs;
* the errors TF Serving answers (400, `{"error": ...}`), with its wording;
* the response: `predictions` (row format; a list of values for a one-output
  signature, of objects otherwise) or `outputs` (columnar).

Not reproduced: TF Serving itself (its C++ JSON parser's corner cases, the
model's warm-up, batching, version policies other than `latest`, model
reloading while serving, gRPC, the classify/regress APIs), and the lossless-
decimal checks for ints beyond 2**24 sent to float inputs.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

DEFAULT_SIGNATURE = "serving_default"


class RestError(ValueError):
    """A request TF Serving answers with 400 and this message."""


def served_version(base_path: str | Path) -> Path:
    """The version directory TF Serving loads from a model base path."""
    base = Path(base_path)
    versions = (
        sorted(
            (int(p.name), p)
            for p in base.iterdir()
            if p.is_dir() and p.name.isdigit() and (p / "saved_model.pb").exists()
        )
        if base.is_dir()
        else []
    )
    if not versions:
        raise FileNotFoundError(
            f"No versions of servable found under base path {base}. Did you forget to "
            "name your leaf directory as a number (eg. '/1/')?"
        )
    return versions[-1][1]


def _type_name(value: Any) -> str:
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"


def _json_text(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return json.dumps(value, separators=(",", ":"))


def _is_b64(value: Any) -> bool:
    return isinstance(value, dict) and list(value) == ["b64"] and isinstance(value["b64"], str)


def _scalar(value: Any, dtype: tf.DType) -> Any:
    """One leaf value, converted as AddValueToTensor does."""
    type_error = RestError(
        f"JSON Value: {_json_text(value)} Type: {_type_name(value)} is not of expected "
        f"type: {dtype.name}"
    )
    if isinstance(value, dict):
        if dtype != tf.string:
            raise type_error
        if not _is_b64(value):
            raise RestError(
                f"JSON Value: {_json_text(value)} not formatted correctly for base64 data"
            )
        try:
            return base64.b64decode(value["b64"], validate=True)
        except binascii.Error as err:
            raise RestError("Unable to base64 decode") from err
    if dtype == tf.string:
        if not isinstance(value, str):
            raise type_error
        return value.encode()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if dtype == tf.bool and isinstance(value, bool):
            return value
        raise type_error
    if dtype.is_integer:
        if not isinstance(value, int):
            raise type_error
        return value
    return float(value)


def _shape(value: Any) -> list[int]:
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return shape


def _tensor(value: Any, dtype: tf.DType) -> np.ndarray:
    """A (nested) JSON value as a dense array, checked as FillTensorProto does."""
    shape = _shape(value)
    flat: list[Any] = []

    def fill(v: Any, level: int) -> None:
        if not isinstance(v, list):
            if level != len(shape):
                raise RestError(
                    f"JSON Value: {_json_text(v)} found at incorrect level: {level + 1} in the "
                    f"JSON DOM. Expected at level: {len(shape)}"
                )
            flat.append(_scalar(v, dtype))
            return
        if level >= len(shape):
            raise RestError(
                f"Encountered list at unexpected level: {level} expected < {len(shape)}"
            )
        if len(v) != shape[level]:
            raise RestError(
                f"Encountered list at unexpected size: {len(v)} at level: {level} expected "
                f"size: {shape[level]}"
            )
        for item in v:
            fill(item, level + 1)

    fill(value, 0)
    np_dtype = object if dtype == tf.string else dtype.as_numpy_dtype
    return np.array(flat, dtype=np_dtype).reshape(shape)


def request_tensors(
    body: dict[str, Any], inputs: dict[str, tf.TensorSpec]
) -> tuple[dict[str, np.ndarray], str]:
    """The named input tensors of a predict body, and its format ('row' or 'columnar')."""
    if "instances" in body and "inputs" in body:
        raise RestError(
            "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist"
        )
    names = sorted(inputs)
    if "instances" in body:
        instances = body["instances"]
        if not isinstance(instances, list):
            raise RestError("Excepting 'instances' to be an list/array")
        if not instances:
            raise RestError("No values in 'instances' array")
        objects = isinstance(instances[0], dict) and not _is_b64(instances[0])
        if not objects and len(inputs) > 1:
            raise RestError(
                "instances is a plain list, but expecting list of objects as multiple input "
                "tensors required as per tensorinfo_map"
            )
        columns: dict[str, list[np.ndarray]] = {name: [] for name in names}
        for i, instance in enumerate(instances):
            if objects:
                if not isinstance(instance, dict) or _is_b64(instance):
                    raise RestError(f"Expecting object but got list at item {i} of input list")
                for name, value in instance.items():
                    if name not in inputs:
                        raise RestError(
                            f"Failed to process element: {i} key: {name} of 'instances' list. "
                            f"Error: INVALID_ARGUMENT: JSON object: does not have named input: "
                            f"{name}"
                        )
                    try:
                        columns[name].append(_tensor(value, inputs[name].dtype))
                    except RestError as err:
                        raise RestError(
                            f"Failed to process element: {i} key: {name} of 'instances' list. "
                            f"Error: INVALID_ARGUMENT: {err}"
                        ) from None
                if sorted(instance) != names:
                    raise RestError(
                        f"Failed to process element: {i} of 'instances' list. JSON object: "
                        f"{_json_text(instance)} keys must be equal to: {','.join(names)}"
                    )
            else:
                columns[names[0]].append(_tensor(instance, inputs[names[0]].dtype))
        return {name: np.stack(values) for name, values in columns.items()}, "row"
    if "inputs" in body:
        given = body["inputs"]
        if not isinstance(given, dict) or _is_b64(given):
            if len(inputs) > 1:
                raise RestError(
                    "inputs is a plain value/list, but expecting an object as multiple input "
                    "tensors required as per tensorinfo_map"
                )
            return {names[0]: _tensor(given, inputs[names[0]].dtype)}, "columnar"
        tensors = {}
        for name in names:
            if name not in given:
                raise RestError(f"Missing named input: {name} in 'inputs' object.")
            tensors[name] = _tensor(given[name], inputs[name].dtype)
        return tensors, "columnar"
    raise RestError("Missing 'inputs' or 'instances' key")


def _json_value(array: np.ndarray) -> Any:
    if array.dtype == object:
        return [_json_value(a) for a in array] if array.ndim else array.item().decode()
    return array.tolist()


def response_body(outputs: dict[str, np.ndarray], request_format: str) -> dict[str, Any]:
    """The JSON TF Serving answers with, for the signature's named outputs."""
    if request_format == "columnar":
        if len(outputs) == 1:
            return {"outputs": _json_value(next(iter(outputs.values())))}
        return {"outputs": {k: _json_value(v) for k, v in outputs.items()}}
    rows = len(next(iter(outputs.values())))
    if len(outputs) == 1:
        (values,) = outputs.values()
        return {"predictions": [_json_value(values[i]) for i in range(rows)]}
    return {
        "predictions": [{k: _json_value(v[i]) for k, v in outputs.items()} for i in range(rows)]
    }


class ModelServer:
    """One model, loaded from a base path as TF Serving loads it; answers predict bodies."""

    def __init__(self, base_path: str | Path) -> None:
        self.version_dir = served_version(base_path)
        self.version = int(self.version_dir.name)
        self._model = tf.saved_model.load(str(self.version_dir))

    def signature_inputs(self, signature_name: str) -> dict[str, tf.TensorSpec]:
        signature = self._model.signatures[signature_name]
        return dict(signature.structured_input_signature[1])

    def predict(self, body_text: str | bytes) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for a predict request."""
        try:
            body = json.loads(body_text)
        except json.JSONDecodeError as err:
            return 400, {"error": f"JSON Parse error: {err.msg} at offset: {err.pos}"}
        if not isinstance(body, dict):
            return 400, {"error": f"JSON Value: {_json_text(body)} Is not object"}
        name = body.get("signature_name", DEFAULT_SIGNATURE)
        if not isinstance(name, str):
            return 400, {
                "error": f"JSON Value: {_json_text(body)} not formatted correctly. "
                "'signature_name' key must be a string value."
            }
        if name not in self._model.signatures:
            return 400, {"error": f'Serving signature name: "{name}" not found in signature def'}
        inputs = self.signature_inputs(name)
        try:
            tensors, request_format = request_tensors(body, inputs)
        except RestError as err:
            return 400, {"error": str(err)}
        try:
            outputs = self._model.signatures[name](
                **{k: tf.constant(v, dtype=inputs[k].dtype) for k, v in tensors.items()}
            )
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as err:
            message = getattr(err, "message", str(err))
            return 400, {"error": message.splitlines()[0] if message else type(err).__name__}
        return 200, response_body({k: v.numpy() for k, v in outputs.items()}, request_format)
