"""Typed Kubeflow settings, read from one checked-in YAML file (kubeflow/pipeline.yaml).

Every mistake is reported at compile time with the field that holds it
(`components.Trainer.resources.gpu: must be >= 0, got -1`), instead of as a
pod that never schedules.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from components.tfjob_trainer.spec import CLEAN_POD_POLICIES
from kubeflow import retries as retry
from kubeflow.placement import (
    DEFAULT_ACCELERATOR,
    Placement,
    Resources,
    Toleration,
    quantity_value,
)
from kubeflow.retries import Retries, RetryPolicy, RetryRoles
from kubeflow.training_engine import ENGINES, TFJobSettings, Training
from pipeline import object_store as store

DEFAULT_SETTINGS_FILE = Path(__file__).resolve().parent / "pipeline.yaml"

# The Dockerfile's WORKDIR: where the pipeline image holds the project.
PROJECT_ROOT_IN_IMAGE = "/pipeline"
TOLERATION_OPERATORS = ("Equal", "Exists")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_LABEL_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_BEAM_OPTION = re.compile(r"^[a-z][a-z0-9_]*$")
_HOST_PORT = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?:[0-9]{1,5}$")
_ENDPOINT = re.compile(r"^https?://[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?(:[0-9]{1,5})?/?$")
_REGION = re.compile(r"^[a-z0-9][-a-z0-9]*$")
# A Kubernetes Secret's name (DNS subdomain) and its data keys.
_SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# A namespace (DNS-1123 label); a service account's name is a DNS subdomain,
# as a Secret's is (_SECRET_NAME).
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# Where a Beam step (ExampleGen, StatisticsGen, Transform, Evaluator) runs its
# Beam pipeline: in its own pod, or on a distributed engine. Flink and Spark
# are reached through a job server and Beam's portable runner.
BEAM_ENGINES = ("direct", "dataflow", "flink", "spark")
# Options each engine cannot run without.
BEAM_REQUIRED_OPTIONS = {
    "direct": (),
    "dataflow": ("project", "region", "temp_location"),
    "flink": ("job_endpoint",),
    "spark": ("job_endpoint",),
}
BeamOptionValue = str | int | float | bool | tuple[str | int | float, ...]
# Where a Flink or Spark worker reaches the Beam worker-pool sidecar in its own pod
# (the pipeline image started with --worker_pool listens on 50000).
WORKER_POOL_PORT = 50000
WORKER_POOL_ADDRESS = f"localhost:{WORKER_POOL_PORT}"


class SettingsError(ValueError):
    """A Kubeflow setting is missing or malformed; the message names the field."""


@dataclass(frozen=True)
class BeamEngine:
    """Where one Beam step runs its Beam pipeline, and the Beam options it gets.

    `options` are Beam pipeline options by name (`max_num_workers: 20` becomes
    `--max_num_workers=20`); a list repeats the flag, `true` is a bare flag.
    """

    engine: str = "direct"
    options: Mapping[str, BeamOptionValue] = field(default_factory=dict)

    def pipeline_args(self, image: str) -> list[str]:
        """Beam pipeline arguments; `image` is the pipeline image, which has the SDK."""
        options = dict(self.options)
        if self.engine == "direct":
            from pipeline.beam import beam_pipeline_args

            # In the step's own pod, one worker process per core Beam counts there.
            args = beam_pipeline_args("multi_processing", num_workers=0)
        elif self.engine == "dataflow":
            # Workers run the pipeline image: it holds TFT, TFMA and our code.
            options.setdefault("sdk_container_image", image)
            args = ["--runner=DataflowRunner"]
        else:
            # The job server hands work to SDK workers in a worker pool beside
            # each task manager or executor (EXTERNAL, the pool's host:port:
            # a sidecar of the same pod by default), or starts them from the
            # pipeline image itself (DOCKER, which needs Docker on the nodes).
            options.setdefault("environment_type", "EXTERNAL")
            if options["environment_type"] == "EXTERNAL":
                options.setdefault("environment_config", WORKER_POOL_ADDRESS)
            elif options["environment_type"] == "DOCKER":
                options.setdefault("environment_config", image)
            args = ["--runner=PortableRunner"]
        for name, value in sorted(options.items()):
            if value is True:
                args.append(f"--{name}")
            elif isinstance(value, tuple):
                args += [f"--{name}={item}" for item in value]
            else:
                args.append(f"--{name}={value}")
        return args


@dataclass(frozen=True)
class SecretCredentials:
    """An access key pair in a Kubernetes Secret: its name and the two data keys."""

    secret: str
    access_key_id_key: str
    secret_access_key_key: str

    def key_to_env(self) -> dict[str, str]:
        """Secret data key -> the environment variable both S3 clients read."""
        access_key_id, secret_access_key = store.CREDENTIAL_VARIABLES
        return {
            self.access_key_id_key: access_key_id,
            self.secret_access_key_key: secret_access_key,
        }


@dataclass(frozen=True)
class ObjectStore:
    """The S3 store (AWS S3, or MinIO and other S3-compatible stores) that s3:// paths live in.

    `credentials` None: nothing is injected; the pod's own identity (IRSA,
    EKS Pod Identity) or node credentials apply.
    """

    region: str
    endpoint: str | None = None
    ca_file: str | None = None
    credentials: SecretCredentials | None = None

    def environment(self) -> dict[str, str]:
        """The plain environment every step gets (no secret values)."""
        return store.client_environment(
            region=self.region, endpoint=self.endpoint, ca_file=self.ca_file
        )

    def container_env(self, *, secret_refs: bool = True) -> list[dict[str, Any]]:
        """A container's `env` (core/v1 EnvVar): plain values, then the secret's keys.

        `secret_refs` False: the plain values only (a KFP step gets the secret
        through its platform spec's `secretAsEnv` instead).
        """
        env: list[dict[str, Any]] = [
            {"name": name, "value": value} for name, value in self.environment().items()
        ]
        if secret_refs and self.credentials is not None:
            env += [
                {
                    "name": variable,
                    "valueFrom": {"secretKeyRef": {"name": self.credentials.secret, "key": key}},
                }
                for key, variable in self.credentials.key_to_env().items()
            ]
        return env

    def beam_options(self) -> dict[str, str]:
        """Beam's own S3 options, for workers outside the step's pod (no credentials)."""
        return store.beam_s3_options(
            region=self.region, endpoint=self.endpoint, ca_file=self.ca_file
        )


@dataclass(frozen=True)
class Schedule:
    cron: str
    experiment: str
    max_concurrency: int = 1
    catchup: bool = False


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

    def placement_for(self, component_id: str) -> Placement:
        """The component's own placement, or the defaults."""
        return self.placements.get(component_id, self.default_placement)

    def beam_for(self, component_id: str) -> BeamEngine:
        """The Beam step's own engine, or the default one."""
        return self.beam.get(component_id, self.default_beam)


def _expect(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SettingsError(f"{where}: must be a {names}, got {value!r}")
    return value


def _no_unknown(values: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(values) - known)
    if unknown:
        raise SettingsError(f"{where}: unknown field(s) {unknown}; known: {sorted(known)}")


def _quantity(values: Mapping[str, Any], key: str, where: str) -> str | None:
    if values.get(key) is None:
        return None
    text = str(values[key])
    if not _QUANTITY.match(text):
        raise SettingsError(
            f"{where}.{key}: {text!r} is not a Kubernetes quantity (e.g. 500m, 4, 16Gi)"
        )
    return text


def _request_within_limit(resources: Resources, where: str) -> None:
    """Kubernetes refuses a pod whose request exceeds its limit; say so at compile time."""
    for resource in ("cpu", "memory"):
        request = getattr(resources, f"{resource}_request")
        limit = getattr(resources, f"{resource}_limit")
        if (
            request is not None
            and limit is not None
            and quantity_value(request) > quantity_value(limit)
        ):
            raise SettingsError(
                f"{where}.{resource}_request: {request} is more than "
                f"{resource}_limit {limit}; Kubernetes refuses such a pod "
                "(a request must not exceed its limit)"
            )


def _resources(values: Any, where: str) -> Resources:
    values = _expect(values or {}, dict, where)
    known = {"cpu_request", "cpu_limit", "memory_request", "memory_limit", "gpu", "accelerator"}
    _no_unknown(values, known, where)
    gpu = _expect(values.get("gpu", 0), int, f"{where}.gpu")
    if gpu < 0:
        raise SettingsError(f"{where}.gpu: must be >= 0, got {gpu}")
    accelerator = _expect(
        values.get("accelerator", DEFAULT_ACCELERATOR), str, f"{where}.accelerator"
    )
    if not _LABEL_NAME.match(accelerator):
        raise SettingsError(f"{where}.accelerator: {accelerator!r} is not a resource name")
    resources = Resources(
        cpu_request=_quantity(values, "cpu_request", where),
        cpu_limit=_quantity(values, "cpu_limit", where),
        memory_request=_quantity(values, "memory_request", where),
        memory_limit=_quantity(values, "memory_limit", where),
        gpu=gpu,
        accelerator=accelerator,
    )
    _request_within_limit(resources, where)
    return resources


def _node_selector(values: Any, where: str) -> dict[str, str]:
    values = _expect(values or {}, dict, where)
    for key, value in values.items():
        if not isinstance(key, str) or not _LABEL_NAME.match(key):
            raise SettingsError(f"{where}: {key!r} is not a Kubernetes label name")
        if not isinstance(value, str) or not _LABEL_VALUE.match(value):
            raise SettingsError(
                f"{where}.{key}: {value!r} is not a Kubernetes label value (quote it)"
            )
    return dict(values)


def _toleration(values: Any, where: str) -> Toleration:
    values = _expect(values, dict, where)
    _no_unknown(values, {"key", "operator", "value", "effect", "toleration_seconds"}, where)
    operator = values.get("operator", "Equal")
    if operator not in TOLERATION_OPERATORS:
        raise SettingsError(
            f"{where}.operator: must be one of {TOLERATION_OPERATORS}, got {operator!r}"
        )
    effect = values.get("effect")
    if effect is not None and effect not in TOLERATION_EFFECTS:
        raise SettingsError(f"{where}.effect: must be one of {TOLERATION_EFFECTS}, got {effect!r}")
    key = values.get("key")
    if key is not None and (not isinstance(key, str) or not _LABEL_NAME.match(key)):
        raise SettingsError(f"{where}.key: {key!r} is not a Kubernetes taint key")
    value = values.get("value")
    if operator == "Exists" and value is not None:
        raise SettingsError(f"{where}.value: must be empty when operator is Exists")
    if operator == "Equal" and key is None:
        raise SettingsError(f"{where}.key: required when operator is Equal")
    seconds = values.get("toleration_seconds")
    if seconds is not None:
        _expect(seconds, int, f"{where}.toleration_seconds")
        if effect != "NoExecute":
            raise SettingsError(f"{where}.toleration_seconds: only valid with effect NoExecute")
    return Toleration(
        key=key, operator=operator, value=value, effect=effect, toleration_seconds=seconds
    )


def _placement(values: Any, where: str, fallback: Placement | None = None) -> Placement:
    values = _expect(values or {}, dict, where)
    _no_unknown(values, {"resources", "node_selector", "tolerations"}, where)
    fallback = fallback or Placement()
    tolerations = _expect(values.get("tolerations", []) or [], list, f"{where}.tolerations")
    return Placement(
        resources=(
            _resources(values["resources"], f"{where}.resources")
            if "resources" in values
            else fallback.resources
        ),
        node_selector=(
            _node_selector(values["node_selector"], f"{where}.node_selector")
            if "node_selector" in values
            else fallback.node_selector
        ),
        tolerations=(
            tuple(_toleration(t, f"{where}.tolerations[{i}]") for i, t in enumerate(tolerations))
            if "tolerations" in values
            else fallback.tolerations
        ),
    )


def _beam_option_value(value: Any, where: str) -> BeamOptionValue:
    if isinstance(value, list):
        if not value:
            raise SettingsError(f"{where}: an empty list sets nothing; remove it")
        return tuple(_beam_option_value(item, f"{where}[{i}]") for i, item in enumerate(value))
    if value is False or value is None:
        raise SettingsError(f"{where}: {value!r} sets nothing; remove the option instead")
    return _expect(value, (str, int, float, bool), where)


def _beam_engine(values: Any, where: str) -> BeamEngine:
    values = _expect(values or {}, dict, where)
    _no_unknown(values, {"engine", "options"}, where)
    engine = values.get("engine", "direct")
    if engine not in BEAM_ENGINES:
        raise SettingsError(f"{where}.engine: must be one of {BEAM_ENGINES}, got {engine!r}")
    raw = _expect(values.get("options") or {}, dict, f"{where}.options")
    options: dict[str, BeamOptionValue] = {}
    for name, value in raw.items():
        option = f"{where}.options.{name}"
        if not isinstance(name, str) or not _BEAM_OPTION.match(name):
            raise SettingsError(f"{option}: not a Beam option name (snake_case, no leading --)")
        if name == "runner":
            raise SettingsError(f"{option}: set `engine` instead; it picks the runner")
        options[name] = _beam_option_value(value, option)
    for name in BEAM_REQUIRED_OPTIONS[engine]:
        if name not in options:
            raise SettingsError(f"{where}.options.{name}: required for engine {engine}")
    if engine == "dataflow" and not str(options["temp_location"]).startswith("gs://"):
        raise SettingsError(
            f"{where}.options.temp_location: Dataflow needs a gs:// path, "
            f"got {options['temp_location']!r}"
        )
    if engine in ("flink", "spark"):
        endpoint = str(options["job_endpoint"])
        if not _HOST_PORT.match(endpoint):
            raise SettingsError(
                f"{where}.options.job_endpoint: {endpoint!r} is not host:port "
                "(the Beam job server, e.g. flink-jobserver.flink:8099)"
            )
        environment = options.get("environment_type", "EXTERNAL")
        if environment not in ("DOCKER", "EXTERNAL", "PROCESS"):
            raise SettingsError(
                f"{where}.options.environment_type: must be DOCKER, EXTERNAL or PROCESS, "
                f"got {environment!r}"
            )
        if environment == "PROCESS" and "environment_config" not in options:
            raise SettingsError(
                f"{where}.options.environment_config: required with environment_type PROCESS "
                '(a JSON object, e.g. {"command": "/opt/apache/beam/boot"})'
            )
        if environment == "EXTERNAL" and not _HOST_PORT.match(
            str(options.get("environment_config", WORKER_POOL_ADDRESS))
        ):
            raise SettingsError(
                f"{where}.options.environment_config: {options['environment_config']!r} is not "
                f"host:port (the worker pool; {WORKER_POOL_ADDRESS} for a sidecar in each pod)"
            )
    return BeamEngine(engine=engine, options=options)


def _beam(
    values: Any, beam_component_ids: set[str] | None
) -> tuple[BeamEngine, dict[str, BeamEngine]]:
    values = _expect(values or {}, dict, "beam")
    _no_unknown(values, {"defaults", "components"}, "beam")
    default = _beam_engine(values.get("defaults"), "beam.defaults")
    components = _expect(values.get("components") or {}, dict, "beam.components")
    if beam_component_ids is not None:
        others = sorted(set(components) - beam_component_ids)
        if others:
            raise SettingsError(
                f"beam.components: {others} run no Beam; the Beam steps are "
                f"{sorted(beam_component_ids)}"
            )
    return default, {
        cid: _beam_engine(spec, f"beam.components.{cid}") for cid, spec in components.items()
    }


def _credentials(values: Any, where: str) -> SecretCredentials:
    values = _expect(values, dict, where)
    known = {"secret", "access_key_id_key", "secret_access_key_key"}
    _no_unknown(values, known, where)
    for key in sorted(known):
        if not values.get(key):
            raise SettingsError(
                f"{where}.{key}: required (credentials come from a Kubernetes Secret: its name "
                "and the data keys holding the access key id and the secret access key)"
            )
        _expect(values[key], str, f"{where}.{key}")
    if not _SECRET_NAME.match(values["secret"]):
        raise SettingsError(f"{where}.secret: {values['secret']!r} is not a Kubernetes Secret name")
    for key in ("access_key_id_key", "secret_access_key_key"):
        if not _SECRET_KEY.match(values[key]):
            raise SettingsError(f"{where}.{key}: {values[key]!r} is not a Secret data key")
    return SecretCredentials(
        secret=values["secret"],
        access_key_id_key=values["access_key_id_key"],
        secret_access_key_key=values["secret_access_key_key"],
    )


def _object_store(values: Any) -> ObjectStore:
    where = "object_store"
    values = _expect(values, dict, where)
    if "verify_tls" in values:
        raise SettingsError(
            f"{where}.verify_tls: turning TLS verification off is not supported: Beam's S3 "
            "client (boto3) has no setting for it. Mount the store's CA certificate into the "
            f"image or pod and set {where}.ca_file, or use the store's http:// endpoint"
        )
    _no_unknown(values, {"endpoint", "region", "ca_file", "credentials"}, where)
    region = values.get("region")
    if not region:
        raise SettingsError(
            f"{where}.region: required (AWS: the bucket's region; MinIO: its configured "
            "region, us-east-1 unless set)"
        )
    if not isinstance(region, str) or not _REGION.match(region):
        raise SettingsError(f"{where}.region: {region!r} is not a region name (e.g. us-east-1)")
    endpoint = values.get("endpoint")
    if endpoint is not None:
        _expect(endpoint, str, f"{where}.endpoint")
        if endpoint.startswith("minio://"):
            raise SettingsError(
                f"{where}.endpoint: {endpoint!r}: give the store's S3 API address, "
                "http://HOST:PORT or https://HOST:PORT (e.g. http://minio-service.kubeflow:9000)"
            )
        if not _ENDPOINT.match(endpoint):
            raise SettingsError(
                f"{where}.endpoint: {endpoint!r} is not http(s)://HOST[:PORT] (e.g. "
                "http://minio-service.kubeflow:9000; say http:// for a plain-HTTP MinIO, or "
                "both TensorFlow and Beam try TLS)"
            )
        endpoint = endpoint.rstrip("/")
    ca_file = values.get("ca_file")
    if ca_file is not None:
        ca_file = _absolute_path(ca_file, f"{where}.ca_file")
    credentials = values.get("credentials")
    return ObjectStore(
        region=region,
        endpoint=endpoint,
        ca_file=ca_file,
        credentials=None
        if credentials is None
        else _credentials(credentials, f"{where}.credentials"),
    )


def store_path(value: str, where: str, object_store: ObjectStore | None) -> str:
    """A path for the steps: local, gs://, or s3:// where an object store is set.

    minio:// and other schemes are refused with the spelling that works.
    """
    try:
        store.check_uri(value, where)
    except store.ObjectStoreError as err:
        raise SettingsError(str(err)) from None
    if store.uri_scheme(value) == "s3" and object_store is None:
        raise SettingsError(
            f"object_store: required when {where} is s3:// ({value}): set at least "
            "object_store.region, and the endpoint and credentials secret for MinIO or another "
            "S3-compatible store"
        )
    return value


def _required_str(values: Mapping[str, Any], key: str) -> str:
    value = values.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise SettingsError(f"{key}: required")
    return _expect(value, str, key)


def parse_settings(
    values: Mapping[str, Any],
    component_ids: set[str],
    beam_component_ids: set[str] | None = None,
    retry_roles: RetryRoles | None = None,
) -> KubeflowSettings:
    """Validates raw YAML values against the pipeline's real component ids.

    `beam_component_ids`, the steps that run Beam, bounds `beam.components`;
    None skips that check (the submit tool, which has no Beam, knows only task ids).
    `retry_roles` says which steps retry by default and which never may
    (kubeflow/retries.py); None gives no step a default.
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
        "retries",
        "training",
    }
    _no_unknown(values, known, "settings")
    image = _required_str(values, "image")
    if any(c.isspace() for c in image):
        raise SettingsError(f"image: {image!r} contains white space")
    parameters = _expect(values.get("parameters") or {}, dict, "parameters")
    _no_unknown(parameters, {"data_root", "train_steps"}, "parameters")
    train_steps = _expect(parameters.get("train_steps", 1000), int, "parameters.train_steps")
    if train_steps <= 0:
        raise SettingsError(f"parameters.train_steps: must be > 0, got {train_steps}")
    default = _placement(values.get("defaults"), "defaults")
    entries = _component_entries(values.get("components"), "components", component_ids)
    placements = {
        cid: _placement(spec, f"components.{cid}", default) for cid, spec in entries.items()
    }
    default_beam, beam = _beam(values.get("beam"), beam_component_ids)
    schedule = None
    if values.get("schedule"):
        raw = _expect(values["schedule"], dict, "schedule")
        _no_unknown(raw, {"cron", "experiment", "max_concurrency", "catchup"}, "schedule")
        cron = _required_str(raw, "cron") if "cron" in raw else _required_str({}, "schedule.cron")
        if len(cron.split()) != 6:
            raise SettingsError(
                f"schedule.cron: {cron!r} must have 6 fields (KFP cron starts with seconds: "
                "'0 0 3 * * *' is 03:00 daily)"
            )
        schedule = Schedule(
            cron=cron,
            experiment=_expect(raw.get("experiment", "default"), str, "schedule.experiment"),
            max_concurrency=_expect(raw.get("max_concurrency", 1), int, "schedule.max_concurrency"),
            catchup=_expect(raw.get("catchup", False), bool, "schedule.catchup"),
        )
    object_store = None
    if values.get("object_store") is not None:
        object_store = _object_store(values["object_store"])
    raw_paths = {
        "pipeline_root": _required_str(values, "pipeline_root"),
        "serving_model_dir": _required_str(values, "serving_model_dir"),
        "parameters.data_root": _required_str(
            {"parameters.data_root": parameters.get("data_root")}, "parameters.data_root"
        ),
    }
    paths = {key: store_path(value, key, object_store) for key, value in raw_paths.items()}
    retries = _retries(values.get("retries"), component_ids, retry_roles)
    return KubeflowSettings(
        image=image,
        pipeline_root=paths["pipeline_root"],
        serving_model_dir=paths["serving_model_dir"],
        schema_dir=_schema_dir(_required_str(values, "schema_dir")),
        project_root_in_image=_absolute_path(
            values.get("project_root_in_image", PROJECT_ROOT_IN_IMAGE), "project_root_in_image"
        ),
        data_root=paths["parameters.data_root"],
        train_steps=train_steps,
        config_variant=_expect(values.get("config_variant", "default"), str, "config_variant"),
        default_placement=default,
        placements=placements,
        schedule=schedule,
        default_beam=default_beam,
        beam=beam,
        object_store=object_store,
        retries=retries,
        training=_training(values.get("training")),
    )


def _training(values: Any) -> Training:
    """The `training:` section; `training.tfjob` is checked whichever engine is chosen."""
    where = "training"
    values = _expect(values or {}, dict, where)
    _no_unknown(values, {"engine", "tfjob"}, where)
    engine = values.get("engine", "pod")
    if engine not in ENGINES:
        raise SettingsError(f"{where}.engine: must be one of {ENGINES}, got {engine!r}")
    where = "training.tfjob"
    raw = _expect(values.get("tfjob") or {}, dict, where)
    known = {
        "workers",
        "resources",
        "node_selector",
        "tolerations",
        "namespace",
        "service_account",
        "deadline",
        "backoff_limit",
        "clean_pod_policy",
        "ttl_after_finished",
    }
    _no_unknown(raw, known, where)
    workers = raw.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise SettingsError(
            f"{where}.workers: must be an integer >= 1 (Workers beside the Chief), got "
            f"{workers!r}; one replica is no multi-node job: use training.engine pod"
        )
    backoff_limit = raw.get("backoff_limit", 0)
    if not isinstance(backoff_limit, int) or isinstance(backoff_limit, bool) or backoff_limit < 0:
        raise SettingsError(
            f"{where}.backoff_limit: must be an integer >= 0, got {backoff_limit!r}"
        )
    policy = raw.get("clean_pod_policy", "Running")
    if policy not in CLEAN_POD_POLICIES:
        raise SettingsError(
            f"{where}.clean_pod_policy: must be None, Running or All (quote None), got {policy!r}"
        )
    durations = {}
    for name, default in (("deadline", "24h"), ("ttl_after_finished", "24h")):
        value = raw.get(name, default)
        if (
            not isinstance(value, str)
            or not retry.DURATION.match(value)
            or not retry.duration_seconds(value)
        ):
            raise SettingsError(
                f"{where}.{name}: {value!r} is not a duration above zero (30m, 6h, 1d)"
            )
        durations[name] = value
    names = {}
    for name, pattern, what in (
        ("namespace", _NAMESPACE, "a namespace"),
        ("service_account", _SECRET_NAME, "a service account name"),
    ):
        value = raw.get(name)
        if value is not None and (not isinstance(value, str) or not pattern.match(value)):
            raise SettingsError(f"{where}.{name}: {value!r} is not {what}")
        names[name] = value
    placement = _placement(
        {k: raw[k] for k in ("resources", "node_selector", "tolerations") if k in raw}, where
    )
    return Training(
        engine=engine,
        tfjob=TFJobSettings(
            workers=workers,
            placement=placement,
            namespace=names["namespace"],
            service_account=names["service_account"],
            deadline=durations["deadline"],
            backoff_limit=backoff_limit,
            clean_pod_policy=policy,
            ttl_after_finished=durations["ttl_after_finished"],
        ),
    )


def _component_entries(value: Any, where: str, component_ids: set[str]) -> dict[str, Any]:
    """`value`, a mapping from the pipeline's component ids to their own settings."""
    entries = _expect(value or {}, dict, where)
    unknown = sorted(set(entries) - component_ids)
    if unknown:
        raise SettingsError(
            f"{where}: unknown component id(s) {unknown}; the pipeline has {sorted(component_ids)}"
        )
    return entries


def _retry_policy(values: Any, where: str, fallback: RetryPolicy) -> RetryPolicy:
    values = _expect(values or {}, dict, where)
    values = _renamed_retry_fields(values, where)
    _no_unknown(values, set(retry.FIELDS), where)
    count = values.get("max_retries", fallback.max_retries)
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= 10:
        raise SettingsError(f"{where}.max_retries: must be an integer 0..10, got {count!r}")
    factor = values.get("backoff_factor", fallback.backoff_factor)
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor < 1:
        raise SettingsError(f"{where}.backoff_factor: must be a number >= 1, got {factor!r}")
    durations = {}
    for name in ("backoff", "retry_window"):
        value = values.get(name, getattr(fallback, name))
        if value is None:
            durations[name] = None
            continue
        if not isinstance(value, str) or not retry.DURATION.match(value):
            raise SettingsError(
                f"{where}.{name}: {value!r} is not a duration (whole seconds, minutes, hours "
                "or days: 30s, 5m, 1h)"
            )
        durations[name] = value
    window = durations["retry_window"]
    if window is not None and retry.duration_seconds(window) < retry.duration_seconds(
        durations["backoff"]
    ):
        raise SettingsError(
            f"{where}.retry_window: {window} is shorter than backoff {durations['backoff']}: "
            "no retry could start inside it"
        )
    return RetryPolicy(count, durations["backoff"], float(factor), window)


def _renamed_retry_fields(values: dict[str, Any], where: str) -> dict[str, Any]:
    """`values` with deprecated field names read as their new ones, each with a warning."""
    values = dict(values)
    for old, new in retry.DEPRECATED_FIELDS.items():
        if old not in values:
            continue
        if new in values:
            raise SettingsError(
                f"{where}.{old}: deprecated, and {new} is set as well; keep {new} alone"
            )
        warnings.warn(
            f"{where}.{old} is deprecated: rename it {new}. KFP never read it as a cap on the "
            "wait between attempts: it compiles to backoffMaxDuration, the longest time from "
            "the first attempt's start during which the step may still be retried, and is "
            f"kept as that ({values[old]!r})",
            FutureWarning,
            stacklevel=2,
        )
        values[new] = values.pop(old)
    return values


def _retries(values: Any, component_ids: set[str], roles: RetryRoles | None) -> Retries:
    """The `retries:` section; absent, the steps retried by default get DEFAULT_RETRY.

    `defaults` is the policy of every step without its own entry except the
    gates; `components.<id>` replaces it field by field for one step.
    """
    roles = roles or RetryRoles()
    if values is None:
        return Retries(components={cid: retry.DEFAULT_RETRY for cid in roles.retried_by_default})
    values = _expect(values, dict, "retries")
    _no_unknown(values, {"defaults", "components"}, "retries")
    default = _retry_policy(values.get("defaults"), "retries.defaults", RetryPolicy())
    entries = _component_entries(values.get("components"), "retries.components", component_ids)
    policies = {
        cid: _retry_policy(spec, f"retries.components.{cid}", default)
        for cid, spec in entries.items()
    }
    for cid, why in roles.never_retried.items():
        if policies.get(cid, RetryPolicy()).max_retries:
            raise SettingsError(
                f"retries.components.{cid}.max_retries: {cid} must not retry: {why}"
            )
        # The defaults never reach a gate.
        policies.setdefault(cid, RetryPolicy())
    return Retries(default=default, components=policies)


def _absolute_path(value: object, key: str) -> str:
    value = _expect(value, str, key)
    if not PurePosixPath(value).is_absolute():
        raise SettingsError(f"{key}: {value!r} must be an absolute path")
    return value.rstrip("/") or "/"


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
    component_ids: set[str],
    beam_component_ids: set[str] | None = None,
    retry_roles: RetryRoles | None = None,
) -> KubeflowSettings:
    try:
        values = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise SettingsError(f"settings file {path} does not exist") from None
    except yaml.YAMLError as err:
        raise SettingsError(f"{path} is not valid YAML: {err}") from None
    return parse_settings(
        _expect(values or {}, dict, str(path)), component_ids, beam_component_ids, retry_roles
    )
