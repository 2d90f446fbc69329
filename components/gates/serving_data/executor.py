"""The scoring data gate's work, without TFX: see components/gates/serving_data/component.py for
what it checks.

ServingDataGate's pod on Kubeflow runs `check_serving_data` through
kubeflow/light_step.py; locally, and for TFX's compiler, the component's body
(components/gates/serving_data/component.py) calls it too. Its statistics and schema are read
as components/gates/data_validation/executor.py reads them. TFDV validates, and importing TFDV
loads TensorFlow and Beam (tensorflow_data_validation/__init__.py, line 27,
imports `api/validation_api.py`, whose lines 24 and 26 import Beam and
TensorFlow; its line 18 imports `api/stats_api.py`, Beam at line 49): this
step runs without TFX's component package and TFMA, not without TensorFlow.
"""

from __future__ import annotations

import json
from typing import Any

from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2

from components.artifact_views import split_names
from components.gates.data_validation.executor import (
    check_data,
    examples_by_split,
    load_statistics,
    nan_counts,
    read_schema,
)

SERVING_ENVIRONMENT = "SERVING"
TRAINING_ENVIRONMENT = "TRAINING"
# Columns in the data that the schema does not have: allowed at scoring time.
_NEW_COLUMN = anomalies_pb2.AnomalyInfo.SCHEMA_NEW_COLUMN


def serving_schema(schema: schema_pb2.Schema, excluded: list[str]) -> schema_pb2.Schema:
    """`schema` with a SERVING environment that leaves out the `excluded` columns."""
    schema = schema_pb2.Schema.FromString(schema.SerializeToString())
    if not schema.default_environment:
        schema.default_environment.extend([TRAINING_ENVIRONMENT, SERVING_ENVIRONMENT])
    elif SERVING_ENVIRONMENT not in schema.default_environment:
        schema.default_environment.append(SERVING_ENVIRONMENT)
    for feature in schema.feature:
        if feature.name in excluded and SERVING_ENVIRONMENT not in feature.not_in_environment:
            feature.not_in_environment.append(SERVING_ENVIRONMENT)
    return schema


def serving_anomalies(
    statistics, schema: schema_pb2.Schema, excluded: list[str]
) -> anomalies_pb2.Anomalies:
    """TFDV's anomalies of `statistics` in the SERVING environment, new columns left out."""
    import tensorflow_data_validation as tfdv

    anomalies = tfdv.validate_statistics(
        statistics, serving_schema(schema, excluded), environment=SERVING_ENVIRONMENT
    )
    for name in list(anomalies.anomaly_info):
        info = anomalies.anomaly_info[name]
        kept = [r for r in info.reason if r.type != _NEW_COLUMN]
        if not kept:
            del anomalies.anomaly_info[name]
        elif len(kept) != len(info.reason):
            del info.reason[:]
            info.reason.extend(kept)
    return anomalies


def check_serving_data(statistics: Any, schema: Any, excluded_columns: str) -> dict[str, int]:
    """ServingDataGate's work: raises DataValidationError on any anomaly of `statistics` (an
    ExampleStatistics artifact) against `schema` (a Schema artifact) in the SERVING
    environment, or no rows at all; else `{"examples_checked": the rows of every split}`.
    `excluded_columns`: the JSON list of columns left out of SERVING."""
    excluded = json.loads(excluded_columns)
    schema_proto = read_schema(schema)
    statistics_by_split = {
        split: load_statistics(statistics, split) for split in split_names(statistics)
    }
    counts = examples_by_split(statistics_by_split)
    check_data(
        {
            split: serving_anomalies(proto, schema_proto, excluded)
            for split, proto in statistics_by_split.items()
        },
        counts,
        {split: nan_counts(proto) for split, proto in statistics_by_split.items()},
        scoring=True,
    )
    return {"examples_checked": sum(counts.values())}
