"""The frozen hyperparameters: `SCHEMA_DIR/hyperparameters.yaml`, the tuner's winner.

`tune_runner.py` writes it; the fork commits it; every run reads it. Its
`model:` holds `ModelConfig` fields, which replace the configuration's own
before the Trainer's `custom_config` is written, so a changed value re-runs
the Trainer and what follows it, and nothing before. `provenance:` says
where the values came from (the search space's digest, the data, the
versions, the score, the trial count, whether the search was cut short); it
never reaches the Trainer, so re-tuning to the same values re-runs nothing.
No file: the configuration's own values, as before.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.config import ModelConfig

HYPERPARAMETERS_FILE_NAME = "hyperparameters.yaml"

# provenance key -> the types its value may have (YAML's own).
PROVENANCE_FIELDS: dict[str, tuple[type, ...]] = {
    "search_space_digest": (str,),
    "hyperparameters": (dict,),
    "objective": (str,),
    "direction": (str,),
    "best_score": (float, int),
    "best_trial": (str,),
    "trials": (int,),
    "max_trials": (int,),
    "steps_per_trial": (int,),
    "partial": (bool,),
    "data": (dict,),
    "versions": (dict,),
    "tuned_at": (str,),
}
DATA_FIELDS: dict[str, tuple[type, ...]] = {
    "pipeline": (str,),
    "fingerprint": (str,),
    "spans": (list,),
    "examples_uri": (str,),
    "read_at": (str,),
}


class HyperparametersError(ValueError):
    """hyperparameters.yaml is unreadable, or holds an unknown or mistyped key."""


@dataclass(frozen=True)
class FrozenHyperparameters:
    """`model`: ModelConfig fields the tuner chose; `provenance`: where they came from."""

    model: dict[str, Any]
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        check_model_values(self.model)
        check_provenance(self.provenance)

    def apply(self, base: ModelConfig) -> ModelConfig:
        """`base` with the frozen fields replaced (lists become ModelConfig's tuples)."""
        return dataclasses.replace(base, **self.model)

    @property
    def partial(self) -> bool:
        return bool(self.provenance.get("partial", False))

    def data_age(self, now: datetime.datetime | None = None) -> datetime.timedelta | None:
        """How long ago the tuned data was read, where the provenance says when."""
        read_at = self.provenance.get("data", {}).get("read_at")
        if not read_at:
            return None
        now = now or datetime.datetime.now(datetime.timezone.utc)
        return now - datetime.datetime.fromisoformat(read_at)

    def summary(self, now: datetime.datetime | None = None) -> dict[str, str]:
        """What the run report shows: the values, and how old and how complete their search was."""
        rows = {key: str(value) for key, value in self.model.items()}
        age = self.data_age(now)
        if age is not None:
            rows["data age"] = f"{age.days} days" if age.days else f"{age.seconds // 3600} hours"
        data = self.provenance.get("data", {})
        if "spans" in data:
            rows["data spans"] = ", ".join(map(str, data["spans"]))
        if "tuned_at" in self.provenance:
            rows["tuned at"] = self.provenance["tuned_at"]
        if "trials" in self.provenance:
            rows["trials"] = str(self.provenance["trials"]) + (
                " (partial: cut off by the deadline)" if self.partial else " (complete)"
            )
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {"model": dict(self.model), "provenance": dict(self.provenance)}


_TYPE_NAMES = {
    float: "a number",
    int: "an integer",
    str: "a string",
    bool: "true or false",
    dict: "a mapping",
    list: "a list",
}


def _type_names(types: tuple[type, ...]) -> str:
    return " or ".join(_TYPE_NAMES[t] for t in types if not (t is int and float in types))


def _is(value: object, types: tuple[type, ...]) -> bool:
    # YAML's true/false are ints to Python; a bool is never a number here.
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def check_model_values(values: object) -> None:
    """Each key a field of the model's settings (the fork's `Hyperparameters`, ModelConfig's
    fields and its own), each value of that field's type, and valid settings."""
    from trainer.fork.search_space_file import hyperparameters_class

    settings = hyperparameters_class()
    if not isinstance(values, dict):
        raise HyperparametersError(
            f"model: must be a mapping of ModelConfig fields, got {values!r}"
        )
    fields = {f.name: f for f in dataclasses.fields(settings)}
    for key, value in values.items():
        if key not in fields:
            raise HyperparametersError(
                f"model.{key}: not a field of the model's settings (trainer/search_space.py "
                f"Hyperparameters); known: {', '.join(sorted(fields))}"
            )
        default = fields[key].default
        if isinstance(default, tuple):
            if not isinstance(value, list | tuple) or not all(_is(v, (int,)) for v in value):
                raise HyperparametersError(
                    f"model.{key}: must be a list of integers, got {value!r}"
                )
        elif isinstance(default, float):
            if not _is(value, (float, int)):
                raise HyperparametersError(f"model.{key}: must be a number, got {value!r}")
        elif not _is(value, (type(default),)):
            raise HyperparametersError(
                f"model.{key}: must be {type(default).__name__}, got {value!r}"
            )
    try:
        dataclasses.replace(settings(), **values)
    except ValueError as err:
        raise HyperparametersError(str(err)) from None


def check_provenance(values: object) -> None:
    if not isinstance(values, dict):
        raise HyperparametersError(f"provenance: must be a mapping, got {values!r}")
    for where, fields, given in (
        ("provenance", PROVENANCE_FIELDS, values),
        ("provenance.data", DATA_FIELDS, values.get("data", {})),
    ):
        if not isinstance(given, dict):
            raise HyperparametersError(f"{where}: must be a mapping, got {given!r}")
        for key, value in given.items():
            if key not in fields:
                raise HyperparametersError(
                    f"{where}.{key}: unknown key; known: {', '.join(sorted(fields))}"
                )
            if not _is(value, fields[key]):
                raise HyperparametersError(
                    f"{where}.{key}: must be {_type_names(fields[key])}, got {value!r}"
                )


def load_frozen(path: str | Path) -> FrozenHyperparameters | None:
    """The frozen hyperparameters at `path`, or None where there is no such file."""
    import yaml  # Here, not at the top: as contract/dataset/parse.py.

    path = Path(path)
    if not path.is_file():
        return None
    try:
        values = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        # One line: the parser's message spans several.
        raise HyperparametersError(
            f"{path}: not valid YAML: {' '.join(str(err).split())}"
        ) from None
    try:
        return frozen_from_values(values)
    except HyperparametersError as err:
        raise HyperparametersError(f"{path}: {err}") from None


def frozen_from_values(values: object) -> FrozenHyperparameters:
    """The frozen file's contents (`to_dict`'s shape), checked."""
    if not isinstance(values, dict):
        raise HyperparametersError(f"must be a mapping with model: and provenance:, got {values!r}")
    unknown = sorted(set(values) - {"model", "provenance"})
    if unknown:
        raise HyperparametersError(f"{unknown[0]}: unknown key; known: model, provenance")
    return FrozenHyperparameters(
        model=values.get("model") or {}, provenance=values.get("provenance") or {}
    )


def frozen_json(frozen: FrozenHyperparameters | None) -> str:
    """The whole frozen file as JSON (`null` without one), for a step that reports it.

    Only the run report's step takes this: the Trainer takes the values alone
    (`PipelineConfig.with_hyperparameters`), so provenance stays out of its cache key.
    """
    return json.dumps(None if frozen is None else frozen.to_dict(), sort_keys=True)


def frozen_from_json(text: str) -> FrozenHyperparameters | None:
    """`frozen_json`'s inverse, checked as the file is."""
    values = json.loads(text)
    return None if values is None else frozen_from_values(values)


def report_rows(
    frozen: FrozenHyperparameters | None, now: datetime.datetime | None = None
) -> dict[str, str]:
    """The run report's frozen-hyperparameters rows, local and Kubeflow alike; {} without a file."""
    return {} if frozen is None else frozen.summary(now)


HEADER = (
    "# The tuner's winner, frozen by tune_runner.py: commit this file. Every run's\n"
    "# Trainer reads `model:` (ModelConfig fields); `provenance:` is for people.\n"
    "# Edit a value by hand and the next run re-trains; delete the file for the defaults.\n"
)


def frozen_text(frozen: FrozenHyperparameters) -> str:
    """The frozen file's text, its header first."""
    import yaml

    return HEADER + yaml.safe_dump(frozen.to_dict(), sort_keys=False, default_flow_style=False)


def write_frozen(path: str | Path, frozen: FrozenHyperparameters) -> Path:
    """Writes `frozen` to `path` whole or not at all (a temporary file, then a rename)."""
    path = Path(path)
    text = frozen_text(frozen)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
    return path
