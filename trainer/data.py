"""tf.data input over the Trainer's examples, built to keep an accelerator fed.

Records are read from several files in parallel, batched *before* parsing (one
vectorized `parse_example` per batch instead of one per record), optionally
cached after decoding, and prefetched so the host prepares batch N+1 while the
device computes batch N. Under a distribution strategy every input pipeline
reads its own shard: by file when there are enough files, else by record.

Over raw examples (Transform did not materialize its output:
pipeline/transform_output.py) the Transform graph is applied here, to each
parsed batch, on the host's cores in parallel with training.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE


def list_files(file_patterns: Sequence[str]) -> list[str]:
    files = sorted({f for pattern in file_patterns for f in tf.io.gfile.glob(pattern)})
    if not files:
        raise FileNotFoundError(f"no input files match {list(file_patterns)}")
    return files


def _records_are_gzipped(path: str) -> bool:
    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def make_dataset(
    file_patterns: Sequence[str],
    feature_spec: Mapping[str, tf.io.FixedLenFeature | tf.io.VarLenFeature],
    label_key: str,
    batch_size: int,
    *,
    training: bool,
    cache: bool = False,
    shuffle_buffer_size: int = 10_000,
    seed: int | None = None,
    deterministic: bool = False,
    input_context: tf.distribute.InputContext | None = None,
    transform: Callable[[dict[str, tf.Tensor]], Mapping[str, tf.Tensor]] | None = None,
) -> tf.data.Dataset:
    """Batches of (features, label) from TFRecord files of serialized tf.Examples.

    Records are parsed with `feature_spec`; `transform`, when given, maps each
    parsed batch to the model's features (the Transform graph over raw
    examples), and `label_key` is taken from its output.

    Training data is read in whatever order keeps the pipeline busiest unless
    `deterministic` is set; evaluation data always keeps file order.
    Both repeat forever: TFX counts steps, not epochs, and Keras re-reads the
    validation data for a fixed number of steps at every epoch end. Training
    data is shuffled; evaluation data keeps file order.
    """
    files = list_files(file_patterns)
    compression = "GZIP" if _records_are_gzipped(files[0]) else ""
    dataset = tf.data.Dataset.from_tensor_slices(files)
    shard_records = False
    if input_context and input_context.num_input_pipelines > 1:
        if len(files) >= input_context.num_input_pipelines:
            dataset = dataset.shard(
                input_context.num_input_pipelines, input_context.input_pipeline_id
            )
        else:
            shard_records = True
    if training:
        dataset = dataset.shuffle(len(files), seed=seed)
    dataset = dataset.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=compression),
        cycle_length=min(len(files), 8),
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic or not training,
    )
    if shard_records and input_context is not None:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if cache:
        dataset = dataset.cache()
    if training:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.repeat()
    # A fixed batch shape lets XLA compile once and keeps replicas in lock-step.
    dataset = dataset.batch(batch_size, drop_remainder=True, num_parallel_calls=AUTOTUNE)

    spec = dict(feature_spec)

    def parse(serialized: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        parsed = tf.io.parse_example(serialized, spec)
        features = dict(transform(parsed)) if transform else parsed
        label = features.pop(label_key)
        return features, label

    dataset = dataset.map(
        parse, num_parallel_calls=AUTOTUNE, deterministic=deterministic or not training
    )
    options = tf.data.Options()
    # Sharding is done above; stop tf.distribute from sharding a second time.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return dataset.with_options(options).prefetch(AUTOTUNE)


def distributed_dataset(
    strategy: tf.distribute.Strategy,
    global_batch_size: int,
    **dataset_kwargs,
) -> tf.distribute.DistributedDataset:
    """`make_dataset` per input pipeline of `strategy`, each with its share of the batch."""

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        return make_dataset(
            batch_size=input_context.get_per_replica_batch_size(global_batch_size),
            input_context=input_context,
            **dataset_kwargs,
        )

    return strategy.distribute_datasets_from_function(dataset_fn)
