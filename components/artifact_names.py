"""Names that artifacts carry, and the files inside them: shared by the steps that
write them and the reports that read them.

Kept apart from the modules that define components: importing one of those
imports TFX's component package (`tfx/components/__init__.py`), and with it
TFMA, so a report or a light step that only needs a property's name would
load what it never runs (docs/kubeflow.md, "What a step loads").

Port register: docs/ports.md
"""

# Custom properties of ExampleGen's examples artifact. TFX's own names
# (tfx 1.16, tfx/components/example_gen/utils.py, lines 38, 40 and 49),
# spelled out: that module is inside TFX's component package.
SPAN_PROPERTY = "span"
VERSION_PROPERTY = "version"
FINGERPRINT_PROPERTY = "input_fingerprint"
# Ours: every span read, oldest first (only with a span pattern).
SPANS_PROPERTY = "spans"
# Ours: the one line saying which span folders were left out (no data file, no marker).
LEFT_OUT_PROPERTY = "left_out"

# What TFX's Pusher records on its PushedModel (its own names are private: tfx 1.16,
# tfx/components/pusher/executor.py, lines 37-39).
PUSHED_PROPERTY = "pushed"
PUSHED_DESTINATION_PROPERTY = "pushed_destination"
PUSHED_VERSION_PROPERTY = "pushed_version"
# What the Evaluator's ModelBlessing says, and the Pusher reads (tfx/components/util/
# model_utils.py, line 28).
BLESSED_PROPERTY = "blessed"
# LatestServedModel's `baseline` artifact: whether a served model was found, and where.
HAS_MODEL_PROPERTY = "has_model"
SERVED_PATH_PROPERTY = "served_path"
# Ours: the served version that already holds the pushed model.
ALREADY_SERVED_PROPERTY = "already_served"

# Custom properties of the BatchScorer's `scores` artifact.
STATUS_PROPERTY = "status"
ROWS_PROPERTY = "rows"
ERRORS_PROPERTY = "errors"
MODEL_VERSION_PROPERTY = "model_version"
MODEL_DIGEST_PROPERTY = "model_digest"
PARTITION_PROPERTY = "partition"
SPAN_SCORED_PROPERTY = "scored_span"

# The split whose statistics describe the data a model learned from.
TRAINING_SPLIT = "train"

# Files inside TFX's artifacts, as TFX 1.16 names them (under `site-packages/tfx/`).
# A split's directory under its artifact (types/standard_artifact_utils.py, line 96).
SPLIT_DIR_PREFIX = "Split-"
# StatisticsGen's binary DatasetFeatureStatisticsList per split
# (components/statistics_gen/stats_artifact_utils.py, line 23, BINARY_PB_BASENAME).
STATISTICS_FILE = "FeatureStats.pb"
# ExampleValidator's binary Anomalies proto per split
# (components/example_validator/executor.py, line 36, DEFAULT_FILE_NAME).
ANOMALIES_FILE = "SchemaDiff.pb"
