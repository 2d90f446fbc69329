"""Schema curation: TFDV's inferred schema, tightened and loosened where the data says so.

The header written above the schema says what was decided and why.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from contract.fields import one_line
from schemas.draft.profiles import ColumnProfile, finite


def widen_schema(schema, widened: dict[str, str]) -> None:
    """Retypes `widened`'s columns (name -> float | string) in TFDV's inferred schema,
    dropping the domain the narrower type had."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    proto_types = {"float": schema_pb2.FLOAT, "string": schema_pb2.BYTES}
    for feature in schema.feature:
        if feature.name in widened:
            feature.type = proto_types[widened[feature.name]]
            feature.ClearField("domain_info")


def curate_schema(
    inferred,
    profiles: dict[str, ColumnProfile],
    label: str,
    task: str,
    ignored: set[str],
    marked_numbers: set[str],
    closed: AbstractSet[str] = frozenset(),
):
    """TFDV's inferred schema, tightened and loosened where the data says so (a copy).

    `closed`: categorical columns whose every value is listed (a new one stops a
    run); the other string domains tolerate a small share of new values.
    """
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    schema.CopyFrom(inferred)
    schema.ClearField("default_environment")
    schema.default_environment.extend(["TRAINING", "SERVING"])
    for feature in schema.feature:
        profile = profiles[feature.name]
        if feature.type == schema_pb2.FLOAT and feature.name not in ignored:
            # A "NaN" cell is a float to CSV type inference; unchecked, it trains a model
            # that answers one constant. The validation gate names the feature and count.
            feature.float_domain.disallow_nan = True
        if feature.name == label:
            # Required in training data, absent from serving requests.
            feature.value_count.min = 1
            feature.value_count.max = 1
            feature.presence.min_fraction = 1.0
            feature.presence.min_count = 1
            feature.not_in_environment.append("SERVING")
            if task != "regression":
                # Every class seen: a new label value stops the run instead of
                # training as class 0.
                _close_domain(schema, feature, profile)
            continue
        # ExampleGen writes an empty cell as a feature with no values, and TFDV's
        # `min: 1` would call every empty cell an anomaly: the next span may have one
        # where this data had none, and Transform fills them (the mean, an empty
        # category). Only the label is required.
        feature.value_count.ClearField("min")
        feature.value_count.max = 1
        # Ignored columns, and numbers read as strings: no closed string domain.
        if (feature.name in ignored or feature.name in marked_numbers) and feature.HasField(
            "domain"
        ):
            feature.ClearField("domain")
        if feature.name in ignored:
            feature.presence.Clear()
            feature.presence.min_count = 0
            # Validation and Transform skip it: a column empty in the draft (typed as
            # strings) that fills with numbers later must not stop a run.
            feature.lifecycle_stage = schema_pb2.DEPRECATED
        elif (
            feature.type in (schema_pb2.INT, schema_pb2.FLOAT)
            and profile.counts
            and min(finite(profile.counts)) >= 0
        ):
            # Counts, amounts and sizes: a negative value is a broken export.
            if feature.type == schema_pb2.INT:
                feature.int_domain.min = 0
            else:
                feature.float_domain.min = 0.0
        if feature.name in closed:
            _close_domain(schema, feature, profile)
        elif feature.name != label and feature.HasField("domain"):
            # Companies come and go: a few unseen values go to Transform's OOV buckets.
            mass = round(1.0 - profile.unseen_share(), 2)
            feature.distribution_constraints.min_domain_mass = mass
    used = {f.domain for f in schema.feature if f.HasField("domain")}
    kept = [d for d in schema.string_domain if d.name in used]
    schema.ClearField("string_domain")
    schema.string_domain.extend(kept)
    return schema


def _close_domain(schema, feature, profile: ColumnProfile) -> None:
    """Every value seen, and no other: strings listed in a domain, int codes bounded."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    if feature.type == schema_pb2.BYTES:
        name = feature.domain or feature.name
        for domain in list(schema.string_domain):
            if domain.name == name:
                schema.string_domain.remove(domain)
        domain = schema.string_domain.add(name=name)
        domain.value.extend(sorted(str(v) for v in profile.counts))
        feature.domain = name
        feature.ClearField("distribution_constraints")
    elif feature.type == schema_pb2.INT:
        feature.int_domain.min = min(profile.counts)
        feature.int_domain.max = max(profile.counts)


SCHEMA_HEADER = """\
# Schema drafted by `python -m schemas.draft` from {data_root} ({rows} rows) on {date}.
# TFDV inferred types, domains and presence from the data; the draft then:
#   * requires the label `{label}` in training data and leaves it out of
#     serving requests (SERVING environment){label_domain};
#   * gives every other column `value_count {{ max: 1 }}`: ExampleGen writes
#     an empty cell as a feature with no values, the next span may have one
#     where this data had none, and Transform fills them (the mean, an empty
#     category);
#   * bounds numeric columns that are never negative below by 0, and refuses
#     NaN in float columns (`disallow_nan`): CSV type inference reads a "NaN"
#     cell as a float, and unchecked it trains a model that answers a constant;
#   * leaves string domains open to a few new values, as the next span brings
#     them (a new company, a new street): `distribution_constraints {{
#     min_domain_mass }}` lets that share of values fall outside the domain.
#     The share is three times the Good-Turing estimate of how much of a new
#     sample this one has not seen (the share of values seen once), between 2%
#     and 20%; Transform maps such values to out-of-vocabulary buckets. A larger
#     share of new values is a domain change and stops the run:
{open_domains}
#   * closes the domains of the columns dataset.yaml marks `closed: true`
#     (every value listed: a new one is news and stops the run): {closed};
#   * marks the columns dataset.yaml ignores `lifecycle_stage: DEPRECATED`:
#     validation and Transform skip them, so an ignored column that was empty
#     here and fills with numbers later stops nothing.
# Review it: tighten ranges and domains where the world is closed (and mark
# those columns closed in dataset.yaml). The ExampleValidator stops a run on
# any anomaly against this file.

"""


def _open_domain_lines(schema, profiles: dict[str, ColumnProfile]) -> str:
    lines = [
        f"#       {one_line(f.name)}: at least "
        f"{f.distribution_constraints.min_domain_mass:g} in the domain "
        f"({profiles[f.name].singletons} of "
        f"{profiles[f.name].present} values seen once)"
        for f in schema.feature
        if f.distribution_constraints.HasField("min_domain_mass")
    ]
    return "\n".join(lines) or "#       (none: no string column has a domain)"


def schema_text(
    schema,
    profiles: dict[str, ColumnProfile],
    *,
    data_root: Path,
    label: str,
    task: str,
    closed: Sequence[str],
) -> str:
    """The schema file: the header saying what the draft decided, then the schema."""
    from google.protobuf import text_format

    # Names from the data go into comments: one line each (a newline would end the comment).
    header = SCHEMA_HEADER.format(
        data_root=one_line(data_root),
        rows=profiles[label].rows,
        date=datetime.date.today().isoformat(),
        label=one_line(label),
        label_domain="" if task == "regression" else ", with every class in its domain",
        open_domains=_open_domain_lines(schema, profiles),
        closed=one_line(", ".join(closed)) or "none (draft with --closed COLUMN to close one)",
    )
    return header + text_format.MessageToString(schema)
