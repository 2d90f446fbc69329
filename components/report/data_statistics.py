"""The data's section of a run report: StatisticsGen's statistics and ExampleValidator's
anomalies, per split, read from their artifacts without TensorFlow.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from components import store_files
from components.artifact_names import ANOMALIES_FILE, SPLIT_DIR_PREFIX, STATISTICS_FILE


@dataclass(frozen=True)
class HistogramBucket:
    low: float
    high: float
    count: float


@dataclass(frozen=True)
class FeatureStatistics:
    name: str
    kind: str  # "numeric" or "categorical"
    examples: int
    present: int  # examples with at least one value
    min: float | None = None
    mean: float | None = None
    max: float | None = None
    std_dev: float | None = None
    unique: int | None = None
    top_values: tuple[tuple[str, float], ...] = ()
    histogram: tuple[HistogramBucket, ...] = ()

    @property
    def missing(self) -> int:
        return self.examples - self.present

    @property
    def missing_fraction(self) -> float:
        return self.missing / self.examples if self.examples else 0.0


@dataclass(frozen=True)
class SplitStatistics:
    split: str
    examples: int
    features: tuple[FeatureStatistics, ...]


_SPLIT_ORDER = {"train": 0, "eval": 1}


def split_dirs(artifact_uri: str) -> list[tuple[str, str]]:
    """[(split name, directory)] of a split artifact: train, eval, then the rest by name."""
    if not store_files.exists(artifact_uri):
        return []
    names = [name.rstrip("/") for name in store_files.listdir(artifact_uri)]
    return sorted(
        (
            (name[len(SPLIT_DIR_PREFIX) :], os.path.join(artifact_uri, name))
            for name in names
            if name.startswith(SPLIT_DIR_PREFIX)
        ),
        key=lambda item: (_SPLIT_ORDER.get(item[0], len(_SPLIT_ORDER)), item[0]),
    )


def split_files(artifact_uri: str, filename: str) -> list[tuple[str, str]]:
    """[(split name, path)] of `filename` in each split of an artifact that has one."""
    return [
        (split, os.path.join(directory, filename))
        for split, directory in split_dirs(artifact_uri)
        if store_files.exists(os.path.join(directory, filename))
    ]


def _feature_statistics(feature, num_examples: int) -> FeatureStatistics:
    from tensorflow_metadata.proto.v0 import statistics_pb2

    name = ".".join(feature.path.step) or feature.name
    kind = feature.WhichOneof("stats")
    stats = getattr(feature, kind)
    common = stats.common_stats
    # ExampleGen writes an empty cell as an empty value list, which TFDV
    # counts as "non-missing". An example has a value when it has one or more;
    # for single-valued features that count is the total number of values.
    present = (
        int(common.tot_num_values) if common.max_num_values <= 1 else int(common.num_non_missing)
    )
    if kind == "num_stats":
        standard = [h for h in stats.histograms if h.type == statistics_pb2.Histogram.STANDARD]
        buckets = tuple(
            HistogramBucket(b.low_value, b.high_value, b.sample_count)
            for b in (standard[0].buckets if standard else ())
        )
        return FeatureStatistics(
            name=name,
            kind="numeric",
            examples=num_examples,
            present=present,
            min=stats.min,
            mean=stats.mean,
            max=stats.max,
            std_dev=stats.std_dev,
            histogram=buckets,
        )
    if kind == "string_stats":
        return FeatureStatistics(
            name=name,
            kind="categorical",
            examples=num_examples,
            present=present,
            unique=int(stats.unique),
            top_values=tuple((v.value, v.frequency) for v in stats.top_values),
        )
    return FeatureStatistics(
        name=name, kind=kind or "unknown", examples=num_examples, present=present
    )


def read_statistics(statistics_uri: str) -> tuple[SplitStatistics, ...]:
    """Per-split feature statistics of a StatisticsGen `statistics` artifact."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    splits = []
    for split, path in split_files(statistics_uri, STATISTICS_FILE):
        # What TFDV's load_stats_binary does (tensorflow_data_validation 1.16.1,
        # utils/stats_util.py, lines 234-236), read without TensorFlow.
        with store_files.open(path, "rb") as f:
            dataset = statistics_pb2.DatasetFeatureStatisticsList.FromString(f.read()).datasets[0]
        features = tuple(
            sorted(
                (_feature_statistics(f, int(dataset.num_examples)) for f in dataset.features),
                key=lambda f: f.name,
            )
        )
        splits.append(SplitStatistics(split, int(dataset.num_examples), features))
    return tuple(splits)


@dataclass(frozen=True)
class Anomaly:
    split: str
    feature: str
    severity: str
    short_description: str
    description: str


def read_anomalies(anomalies_uri: str) -> tuple[Anomaly, ...]:
    """Every anomaly ExampleValidator recorded, per split."""
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    found = []
    for split, path in split_files(anomalies_uri, ANOMALIES_FILE):
        with store_files.open(path, "rb") as f:
            anomalies = anomalies_pb2.Anomalies.FromString(f.read())
        infos = sorted(anomalies.anomaly_info.items())
        if anomalies.HasField("dataset_anomaly_info"):
            infos.append(("(dataset)", anomalies.dataset_anomaly_info))
        found += [
            Anomaly(
                split=split,
                feature=feature,
                severity=anomalies_pb2.AnomalyInfo.Severity.Name(info.severity),
                short_description=info.short_description,
                description=info.description,
            )
            for feature, info in infos
        ]
    return tuple(found)
