"""The JSON serving signature's input contract: one named tensor per feature.

`serving_default` takes serialized tf.Examples, which a REST client of TF
Serving or KServe would have to build and base64. `serving_json` takes what
such a client has: one input per feature of the dataset spec, named for its
column, shape [batch], in the schema's dtype, so that a request is

    {"signature_name": "serving_json",
     "instances": [{"trip_miles": 1.2, "company": "Flash Cab", ...}]}

TF Serving's REST API requires every input in every instance, so a missing
value has a marker instead of an absent key:

* float: NaN (TF Serving's JSON reader takes `NaN`);
* string: "" (as an empty CSV cell, which ExampleGen records as no value);
* int: none; a JSON integer is always a value. For `id`, `categorical` and
  `hashed` features a missing value becomes 0 in the Transform graph, so
  sending 0 is the same as sending nothing. `numeric` and `bucketized` int
  features give a missing value a meaning of its own (the mean, a bucket of
  its own), which no integer can stand for: such a row goes through
  `serving_default`, whose tf.Examples can leave a feature out.

The signature turns the markers back into what `tf.io.parse_example` gives the
Transform graph for an absent value (an empty row of a SparseTensor), so both
signatures score a row the same. Columns the spec ignores are not inputs: they
are given to the graph as absent, which is what they are to the model.
(`trainer/custom.py`'s `extra_features` reading an ignored column would see
them absent; list such a column as a feature.)

The contract is written beside the model (`assets.extra/serving_json.json`)
for clients and for Kubeflow's deploy step, which builds its smoke request
from the run's eval examples with `instance_from_example`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from contract.dataset.error import DatasetSpecError
from contract.dataset.names import model_names
from contract.dataset.spec import DatasetSpec

JSON_SIGNATURE = "serving_json"
CONTRACT_ASSET = "assets.extra/serving_json.json"

JsonDtype = Literal["float", "int", "string"]
# Kinds whose Transform turns a missing int into 0: 0 stands for missing.
_ZERO_IS_MISSING_KINDS = ("id", "categorical", "hashed")


@dataclass(frozen=True)
class JsonInput:
    """One input of the JSON signature.

    name: the signature's input name: the column's model name
      (contract.dataset.names.model_name), as its Transform output and
      vocabulary file have it.
    column: the raw column (the tf.Example feature) it stands for.
    dtype: float (float32), int (int64) or string.
    missing: what a client sends for a missing value, or None when it cannot.
    """

    name: str
    column: str
    dtype: JsonDtype
    missing: float | int | str | None

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        if isinstance(self.missing, float) and math.isnan(self.missing):
            values["missing"] = "NaN"
        return values


def json_inputs(spec: DatasetSpec, column_dtypes: Mapping[str, str]) -> tuple[JsonInput, ...]:
    """The contract for `spec`'s features; `column_dtypes`: column -> float, int or string."""
    inputs = []
    names = model_names(spec.features)
    for column, feature in spec.features.items():
        dtype: Any = column_dtypes.get(column)
        if dtype not in ("float", "int", "string"):
            raise DatasetSpecError(
                f"features.{column}: the raw data has no float, int or string column of that name"
            )
        name = names[column]
        missing: float | int | str | None
        if dtype == "float":
            missing = math.nan
        elif dtype == "string":
            missing = ""
        else:
            missing = 0 if feature.kind in _ZERO_IS_MISSING_KINDS else None
        inputs.append(JsonInput(name=name, column=column, dtype=dtype, missing=missing))
    return tuple(inputs)


def contract_from_dicts(values: Sequence[Mapping[str, Any]]) -> tuple[JsonInput, ...]:
    """The contract as `CONTRACT_ASSET` holds it."""
    return tuple(
        JsonInput(
            name=v["name"],
            column=v["column"],
            dtype=v["dtype"],
            missing=math.nan if v["missing"] == "NaN" else v["missing"],
        )
        for v in values
    )


def instance_from_values(
    values: Mapping[str, Sequence[Any]], inputs: Sequence[JsonInput]
) -> dict[str, Any] | None:
    """A row-format instance from a row's values (column -> list of values, empty when
    missing, as a tf.Example holds them); None when the row has a missing value that
    its input has no marker for."""
    instance: dict[str, Any] = {}
    for json_input in inputs:
        present = list(values.get(json_input.column, ()))
        if len(present) > 1:
            raise ValueError(
                f"{json_input.column}: {len(present)} values in one row; "
                "the JSON signature takes one per row"
            )
        if present:
            value = present[0]
            if json_input.dtype == "string":
                value = value.decode() if isinstance(value, bytes) else str(value)
            elif json_input.dtype == "int":
                value = int(value)
            else:
                value = float(value)
            instance[json_input.name] = value
        elif json_input.missing is None:
            return None
        else:
            instance[json_input.name] = json_input.missing
    return instance


def instance_from_example(example: Any, inputs: Sequence[JsonInput]) -> dict[str, Any] | None:
    """`instance_from_values` for a `tf.train.Example`."""
    features = example.features.feature
    values: dict[str, list[Any]] = {}
    for json_input in inputs:
        if json_input.column not in features:
            values[json_input.column] = []
            continue
        feature = features[json_input.column]
        kind = feature.WhichOneof("kind")
        values[json_input.column] = list(getattr(feature, kind).value) if kind else []
    return instance_from_values(values, inputs)
