"""Dataset directories: a curated schema plus the dataset spec, read and checked together.

A schema directory holds `schema.pbtxt` (what the data must look like; the
ExampleValidator checks it) and `dataset.yaml` (label, task, feature kinds,
slices, thresholds: `contract/dataset/spec.py`). `python -m schemas.draft` writes
both from a CSV directory. The embedded taxi task's are in `chicago_taxi/`,
shipped with the package so an installed image has them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contract.dataset.error import DatasetSpecError
from contract.dataset.parse import load_spec
from contract.dataset.spec import SCHEMA_FILE_NAME, SPEC_FILE_NAME, DatasetSpec
from trainer.hyperparameters import (
    HYPERPARAMETERS_FILE_NAME,
    FrozenHyperparameters,
    load_frozen,
)

SCHEMAS_ROOT = Path(__file__).resolve().parent
DEFAULT_SCHEMA_DIR = SCHEMAS_ROOT / "chicago_taxi"


def column_types(schema) -> dict[str, str]:
    """Raw column -> "int" | "float" | "string", from a tensorflow_metadata Schema."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    names = {schema_pb2.INT: "int", schema_pb2.FLOAT: "float", schema_pb2.BYTES: "string"}
    return {f.name: names.get(f.type, "unknown") for f in schema.feature}


def read_schema(path: str | Path):
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    try:
        return text_format.Parse(Path(path).read_text(), schema_pb2.Schema())
    except text_format.ParseError as err:
        raise DatasetSpecError(f"{path}: not a valid schema: {err}") from None


@dataclass(frozen=True)
class SchemaDir:
    """A checked schema directory: the spec fits the schema's columns and types."""

    path: Path
    spec: DatasetSpec

    @property
    def schema_file(self) -> Path:
        return self.path / SCHEMA_FILE_NAME

    @property
    def spec_file(self) -> Path:
        return self.path / SPEC_FILE_NAME

    @property
    def hyperparameters_file(self) -> Path:
        return self.path / HYPERPARAMETERS_FILE_NAME

    @property
    def hyperparameters(self) -> FrozenHyperparameters | None:
        """The tuner's frozen winner (trainer/hyperparameters.py), or None: the defaults."""
        return load_frozen(self.hyperparameters_file)


def load_schema_dir(path: str | Path = DEFAULT_SCHEMA_DIR) -> SchemaDir:
    """Reads SCHEMA_DIR's two files; raises DatasetSpecError naming the file and field."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise DatasetSpecError(f"schema dir {root} is not a directory")
    schema_file = root / SCHEMA_FILE_NAME
    if not schema_file.is_file():
        raise DatasetSpecError(
            f"{schema_file}: no schema here; draft one with "
            "`python -m schemas.draft --data-root DIR --label COLUMN --output-dir SCHEMA_DIR`"
        )
    spec_file = root / SPEC_FILE_NAME
    spec = load_spec(spec_file)
    schema = read_schema(schema_file)
    try:
        spec.check_against_columns(column_types(schema))
        check_closed_domains(spec, schema)
        check_ignored_not_required(spec, schema)
    except DatasetSpecError as err:
        raise DatasetSpecError(f"{spec_file}: {err} (checked against {schema_file})") from None
    return SchemaDir(path=root, spec=spec)


def open_domain_mass(schema, feature) -> float | None:
    """The share of a string feature's values its domain must hold (TFDV's
    min_domain_mass, 1.0 unless set), or None where it has no domain."""
    domain = None
    if feature.HasField("domain"):
        domain = next((d for d in schema.string_domain if d.name == feature.domain), None)
    elif feature.HasField("string_domain"):
        domain = feature.string_domain
    if domain is None:
        return None
    constraints = feature.distribution_constraints
    return constraints.min_domain_mass if constraints.HasField("min_domain_mass") else 1.0


def check_ignored_not_required(spec: DatasetSpec, schema) -> None:
    """DatasetSpecError for an ignored column the schema requires: ExampleGen never reads
    an ignored column (nor converts it), so the examples lack it, and validation would
    call it dropped and Transform fail to parse it. The draft marks such entries
    DEPRECATED; a hand-written schema does the same, or leaves the column out."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    for feature in schema.feature:
        required = feature.presence.min_fraction > 0 or feature.presence.min_count > 0
        active = feature.lifecycle_stage != schema_pb2.DEPRECATED
        if feature.name in spec.ignore and required and active:
            raise DatasetSpecError(
                f"ignore: {feature.name!r} is never read (an ignored column is not in the "
                "examples), but the schema requires it (its presence): add "
                "`lifecycle_stage: DEPRECATED` to its entry in schema.pbtxt, as the draft "
                "writes it, or delete the entry"
            )


def check_closed_domains(spec: DatasetSpec, schema) -> None:
    """A feature the spec calls closed must have a closed domain in the schema."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    by_name = {f.name: f for f in schema.feature}
    for name, feature_spec in spec.features.items():
        if not feature_spec.closed:
            continue
        feature = by_name[name]
        if feature.type == schema_pb2.BYTES:
            mass = open_domain_mass(schema, feature)
            if mass is None:
                raise DatasetSpecError(
                    f"features.{name}.closed: true, but the schema gives {name!r} no string "
                    "domain: list every value in a string_domain, or set closed: false"
                )
            if mass < 1.0:
                raise DatasetSpecError(
                    f"features.{name}.closed: true, but the schema lets {1 - mass:.0%} of "
                    f"{name!r}'s values fall outside its domain (distribution_constraints "
                    "min_domain_mass): remove that, or set closed: false"
                )
        elif feature.type == schema_pb2.INT and not (
            feature.HasField("int_domain")
            and feature.int_domain.HasField("min")
            and feature.int_domain.HasField("max")
        ):
            raise DatasetSpecError(
                f"features.{name}.closed: true, but the schema gives {name!r} no int_domain "
                "with both min and max: bound its codes, or set closed: false"
            )
