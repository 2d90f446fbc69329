"""Typed Kubeflow settings, read from one checked-in YAML file (kubeflow/pipeline.yaml).

Every mistake is reported at compile time with the field that holds it
(`components.Trainer.resources.gpu: must be >= 0, got -1`), instead of as a
pod that never schedules. One module per section of the file:

* fields.py        SettingsError, and the field kit (contract/fields.py) bound to it
* placement.py     `defaults:`, `components:`: resources, GPUs, node selectors, tolerations
* object_store.py  `object_store:`: the S3 store behind s3:// paths, its credentials secret
* beam.py          `beam:`: where each Beam step runs its Beam pipeline
* retries.py       `retries:`: which steps retry, how often, within what window
* training.py      `training:`: the Trainer in its pod, or on a TFJob
* schedule.py      `schedule:`, `scoring_schedule:`: recurring runs
* kfp.py           `kfp:`: the KFP API's namespace, pipeline scope and cron time zone
* serving.py       `serving:`: the KServe InferenceService a pushed version goes to
* tuning.py        `tuning:`: the tuning package's worker pods and trial budget

The checks are the kit's plain functions rather than pydantic models (the
dataset spec reads with the same kit): most of them are Kubernetes' and
KFP's rules (quantities parsed as the Kubernetes client parses them, a
request within its limit, a retry window that holds the Trainer's deadline,
Beam options that this Beam defines), and each message says what to write
instead, which pydantic's errors would have to be rewritten into anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from kubeflow.settings.beam import BeamEngine, parse_beam
from kubeflow.settings.fields import (
    SettingsError,
    absolute_path,
    check,
    component_entries,
    required_str,
)
from kubeflow.settings.kfp import KfpApi, parse_kfp
from kubeflow.settings.object_store import (
    ObjectStore,
    parse_object_store,
    platform_paths,
    store_path,
)
from kubeflow.settings.placement import Placement, parse_placement
from kubeflow.settings.retries import Retries, RetryRoles, parse_retries
from kubeflow.settings.schedule import Schedule, parse_schedule
from kubeflow.settings.serving import Serving, parse_serving
from kubeflow.settings.training import Training, parse_training
from kubeflow.settings.tuning import Tuning, parse_tuning

DEFAULT_SETTINGS_FILE = Path(__file__).resolve().parents[1] / "pipeline.yaml"
# The Dockerfile's WORKDIR: where the pipeline image holds the project.
PROJECT_ROOT_IN_IMAGE = "/pipeline"


@dataclass(frozen=True)
class KubeflowSettings:
    image: str
    pipeline_root: str
    serving_model_dir: str
    schema_dir: str
    data_root: str
    # Where the image holds the project (the Dockerfile's WORKDIR); a run of
    # the compiled spec outside a container points it at a checkout instead.
    project_root_in_image: str
    train_steps: int
    config_variant: str
    default_placement: Placement
    placements: Mapping[str, Placement]
    schedule: Schedule | None
    default_beam: BeamEngine = field(default_factory=BeamEngine)
    beam: Mapping[str, BeamEngine] = field(default_factory=dict)
    object_store: ObjectStore | None = None
    retries: Retries = field(default_factory=Retries)
    training: Training = field(default_factory=Training)
    serving: Serving | None = None
    tuning: Tuning = field(default_factory=Tuning)
    # The batch scoring package's recurring runs (docs/batch-scoring.md).
    scoring_schedule: Schedule | None = None
    kfp: KfpApi = field(default_factory=KfpApi)

    def placement_for(self, step_id: str) -> Placement:
        """The step's own placement, or the defaults."""
        return self.placements.get(step_id, self.default_placement)

    def beam_for(self, step_id: str) -> BeamEngine:
        """The Beam step's own engine, or the default one."""
        return self.beam.get(step_id, self.default_beam)


def parse_settings(
    values: Mapping[str, Any],
    step_ids: set[str],
    beam_step_ids: set[str] | None = None,
    retry_roles: RetryRoles | None = None,
) -> KubeflowSettings:
    """Validates raw YAML values against the pipeline's real step ids.

    `beam_step_ids`, the steps that run Beam, bounds `beam.components`;
    None skips that check (the submit tool, which has no Beam, knows only task ids).
    `retry_roles` says which steps retry by default and which never may
    (settings/retries.py); None gives no step a default.
    """
    known = {
        "image",
        "pipeline_root",
        "serving_model_dir",
        "schema_dir",
        "project_root_in_image",
        "config_variant",
        "parameters",
        "defaults",
        "components",
        "beam",
        "object_store",
        "schedule",
        "scoring_schedule",
        "retries",
        "training",
        "serving",
        "tuning",
        "kfp",
    }
    check.no_unknown(values, known, "settings")
    image = required_str(values, "image")
    if any(c.isspace() for c in image):
        raise SettingsError(f"image: {image!r} contains white space")
    parameters = check.typed(values.get("parameters") or {}, dict, "parameters")
    check.no_unknown(parameters, {"data_root", "train_steps"}, "parameters")
    train_steps = check.typed(parameters.get("train_steps", 1000), int, "parameters.train_steps")
    if train_steps <= 0:
        raise SettingsError(f"parameters.train_steps: must be > 0, got {train_steps}")
    default = parse_placement(values.get("defaults"), "defaults")
    entries = component_entries(values.get("components"), "components", step_ids)
    placements = {
        step: parse_placement(spec, f"components.{step}", default) for step, spec in entries.items()
    }
    default_beam, beam = parse_beam(values.get("beam"), beam_step_ids)
    kfp = parse_kfp(values.get("kfp"))
    object_store = None
    if values.get("object_store") is not None:
        object_store = parse_object_store(values["object_store"], kfp.namespace)
    # The kubeflow-platform preset gives the two roots a place in the namespace's prefix.
    preset_paths = (
        platform_paths(object_store.namespace)
        if object_store is not None and object_store.namespace is not None
        else {}
    )
    raw_paths = {
        "pipeline_root": required_str({**preset_paths, **values}, "pipeline_root"),
        "serving_model_dir": required_str({**preset_paths, **values}, "serving_model_dir"),
        "parameters.data_root": required_str(
            {"parameters.data_root": parameters.get("data_root")}, "parameters.data_root"
        ),
    }
    paths = {key: store_path(value, key, object_store) for key, value in raw_paths.items()}
    retries = parse_retries(values.get("retries"), step_ids, retry_roles)
    return KubeflowSettings(
        image=image,
        pipeline_root=paths["pipeline_root"],
        serving_model_dir=paths["serving_model_dir"],
        schema_dir=_schema_dir(required_str(values, "schema_dir")),
        project_root_in_image=absolute_path(
            values.get("project_root_in_image", PROJECT_ROOT_IN_IMAGE), "project_root_in_image"
        ),
        data_root=paths["parameters.data_root"],
        train_steps=train_steps,
        config_variant=check.typed(values.get("config_variant", "default"), str, "config_variant"),
        default_placement=default,
        placements=placements,
        schedule=parse_schedule(values.get("schedule")),
        default_beam=default_beam,
        beam=beam,
        object_store=object_store,
        retries=retries,
        training=parse_training(values.get("training")),
        serving=parse_serving(values.get("serving"), paths["serving_model_dir"]),
        tuning=parse_tuning(values.get("tuning")),
        scoring_schedule=parse_schedule(values.get("scoring_schedule"), "scoring_schedule"),
        kfp=kfp,
    )


def _schema_dir(value: str) -> str:
    """A directory inside the project: read at compile time here, and in the image at run time."""
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts:
        raise SettingsError(
            f"schema_dir: {value!r} must be a path inside the project (e.g. "
            "schemas/chicago_taxi): the compile reads its dataset spec here, and the "
            "image holds the project at the same relative path"
        )
    return str(path)


def load_settings(
    path: Path,
    step_ids: set[str],
    beam_step_ids: set[str] | None = None,
    retry_roles: RetryRoles | None = None,
) -> KubeflowSettings:
    try:
        values = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise SettingsError(f"settings file {path} does not exist") from None
    except yaml.YAMLError as err:
        raise SettingsError(f"{path} is not valid YAML: {err}") from None
    return parse_settings(
        check.typed(values or {}, dict, str(path)), step_ids, beam_step_ids, retry_roles
    )
