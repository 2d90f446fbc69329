"""Where each Beam step runs its Beam pipeline: the `beam:` section of kubeflow/pipeline.yaml."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contract.fields import field_names
from kubeflow.settings.fields import SettingsError, check

_BEAM_OPTION = re.compile(r"^[a-z][a-z0-9_]*$")
_HOST_PORT = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?:[0-9]{1,5}$")

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
# Beam's own options that carry a credential (apache-beam 2.74.0,
# options/pipeline_options.py: S3Options L2218-2240, AzureOptions L1304-1316;
# GoogleCloudOptions and the rest name identities, never keys). Every option is
# written in plain text into each Beam step's container arguments, which anyone
# who can read the pipeline in KFP sees; each maps to the setting to use instead.
_S3_SECRET = (
    "put the key pair in a Kubernetes Secret and name it in object_store.credentials "
    "(secret, access_key_id_key, secret_access_key_key), or leave it out for the pod's identity"
)
CREDENTIAL_OPTIONS = {
    "s3_access_key_id": _S3_SECRET,
    "s3_secret_access_key": _S3_SECRET,
    "s3_session_token": _S3_SECRET,
    "azure_connection_string": (
        "give the workers an identity instead (azure_managed_identity_client_id)"
    ),
}
# Any other option whose name says it holds a secret (a plugin's own, say).
_CREDENTIAL_NAME = re.compile(r"secret|password|passphrase|token|access_key|private_key|credential")


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
        # Every engine's SDK workers run the pipeline image, which holds TFX and
        # our code: the step's own pod, the worker-pool sidecar, Dataflow's or
        # Docker's workers. Saying so also stops TFX from shipping itself: given
        # Beam arguments without a dependency option, each Beam executor copies
        # TFX's install (about 50 MB) into an sdist under /tmp, 1.6 s per step,
        # never deleted (tfx 1.16.0, tfx/utils/dependency_utils.py,
        # make_beam_dependency_flags and build_ephemeral_package).
        options.setdefault("sdk_container_image", image)
        if self.engine == "direct":
            from pipeline.beam import beam_pipeline_args

            # In the step's own pod, one worker process per core Beam counts there.
            args = beam_pipeline_args("multi_processing", num_workers=0)
        elif self.engine == "dataflow":
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


def _beam_option_value(value: Any, where: str) -> BeamOptionValue:
    if isinstance(value, list):
        if not value:
            raise SettingsError(f"{where}: an empty list sets nothing; remove it")
        # A list repeats the flag: each item is one plain value.
        return tuple(
            check.typed(item, (str, int, float), f"{where}[{i}]") for i, item in enumerate(value)
        )
    if value is False or value is None:
        raise SettingsError(f"{where}: {value!r} sets nothing; remove the option instead")
    return check.typed(value, (str, int, float, bool), where)


def _beam_engine(values: Any, where: str) -> BeamEngine:
    values = check.typed(values or {}, dict, where)
    check.no_unknown(values, field_names(BeamEngine), where)
    engine = check.choice(values.get("engine", "direct"), BEAM_ENGINES, f"{where}.engine")
    raw = check.typed(values.get("options") or {}, dict, f"{where}.options")
    options: dict[str, BeamOptionValue] = {}
    for name, value in raw.items():
        option = f"{where}.options.{name}"
        if not isinstance(name, str) or not _BEAM_OPTION.match(name):
            raise SettingsError(f"{option}: not a Beam option name (snake_case, no leading --)")
        if name == "runner":
            raise SettingsError(f"{option}: set `engine` instead; it picks the runner")
        if name in CREDENTIAL_OPTIONS or _CREDENTIAL_NAME.search(name):
            instead = CREDENTIAL_OPTIONS.get(name, f"{_S3_SECRET} for S3")
            raise SettingsError(
                f"{option}: a credential; Beam options are written in plain text into every "
                f"Beam step's arguments: {instead}"
            )
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
        timeout = options.get("job_server_timeout")
        if timeout is not None and (type(timeout) is not int or timeout < 1):
            # Beam's `type=int`; the step waits that long for the job server before
            # Beam does (pipeline/beam.py, JOB_SERVER_TIMEOUT_FLAGS).
            raise SettingsError(
                f"{where}.options.job_server_timeout: {timeout!r} is not a whole number of "
                "seconds above 0 (how long a step waits for the job server)"
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


def parse_beam(
    values: Any, beam_step_ids: set[str] | None
) -> tuple[BeamEngine, dict[str, BeamEngine]]:
    values = check.typed(values or {}, dict, "beam")
    check.no_unknown(values, {"defaults", "components"}, "beam")
    default = _beam_engine(values.get("defaults"), "beam.defaults")
    components = check.typed(values.get("components") or {}, dict, "beam.components")
    if beam_step_ids is not None:
        others = sorted(set(components) - beam_step_ids)
        if others:
            raise SettingsError(
                f"beam.components: {others} run no Beam; the Beam steps are {sorted(beam_step_ids)}"
            )
    return default, {
        step: _beam_engine(spec, f"beam.components.{step}") for step, spec in components.items()
    }
