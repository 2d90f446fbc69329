"""The data gate of a scoring run: the new rows against the schema's SERVING environment.

At scoring time the label, and the columns a derived label is computed
from, do not exist yet, and the data may carry columns the model never saw
(the id columns the scores are keyed by, and others). TFX's ExampleValidator
validates every feature of the schema in every environment: its executor
calls `tfdv.validate_statistics(statistics, schema, custom_validation_config)`
with no environment (tfx v1.16.0, components/example_validator/executor.py,
`_Validate`), so a missing label is an anomaly there, and so is each new
column. This gate validates in TFDV's SERVING environment, the standard way
to leave the label out, and allows new columns; every other anomaly fails
the run as `DataValidationGate` does, with the same message.

Schemas that do not declare environments get them here: the label's source
columns that are not features (`DatasetSpec.serving_excluded_columns`) are
marked `not_in_environment: "SERVING"`.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

import json

from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2
from tfx.components.statistics_gen import stats_artifact_utils
from tfx.dsl.component.experimental.annotations import InputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import io_utils

from components.data_gate import GateOutputs, check_data, nan_counts

SERVING_ENVIRONMENT = "SERVING"
TRAINING_ENVIRONMENT = "TRAINING"
# Columns in the data that the schema does not have: allowed at scoring time.
_NEW_COLUMN = anomalies_pb2.AnomalyInfo.SCHEMA_NEW_COLUMN


def serving_schema(schema: schema_pb2.Schema, excluded: "list[str]") -> schema_pb2.Schema:
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
    statistics, schema: schema_pb2.Schema, excluded: "list[str]"
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


@component
def ServingDataGate(
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: InputArtifact[standard_artifacts.Schema],
    excluded_columns: Parameter[str],
) -> GateOutputs:
    """Fails the run on any anomaly in the SERVING environment, or no rows at all (the
    splits ExampleGen writes are one set of rows here: a small input may leave one empty)."""
    excluded = json.loads(excluded_columns)
    schema_proto = io_utils.SchemaReader().read(
        io_utils.get_only_uri_in_dir(artifact_utils.get_single_uri([schema]))
    )
    statistics_by_split = {
        split: stats_artifact_utils.load_statistics(statistics, split).proto()
        for split in artifact_utils.decode_split_names(statistics.split_names)
    }
    check_data(
        {
            split: serving_anomalies(proto, schema_proto, excluded)
            for split, proto in statistics_by_split.items()
        },
        {
            split: sum(d.num_examples for d in p.datasets)
            for split, p in statistics_by_split.items()
        },
        {split: nan_counts(proto) for split, proto in statistics_by_split.items()},
        scoring=True,
    )
    return {
        "examples_checked": sum(
            d.num_examples for p in statistics_by_split.values() for d in p.datasets
        )
    }
