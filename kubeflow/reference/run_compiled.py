"""Executes a compiled pipeline package step by step, as the KFP v2 backend would, on this machine.

    uv run --project kubeflow/reference --locked python kubeflow/reference/run_compiled.py \
        --package build/pipeline.yaml --pipeline-root /tmp/root --python .venv/bin/python \
        --parameter data_root=/path/to/csv --parameter 'train_args={"num_steps": 20}' \
        --summary /tmp/summary.json [--isolated-env --secret NAME=secret.json] \
        [--cache-root /tmp/kfp-cache] [--log-dir /tmp/step-logs]

KFP's own local executor (`kfp.local`, from this directory's current kfp) does
the work a cluster's driver and launcher do: it orders the DAG, resolves the
runtime parameters, builds each step's executor input from the spec (parameter
values, input artifacts handed over from upstream outputs, output artifact
URIs under the pipeline root, the executor output file), substitutes the
container's `command` + `args` placeholders, and collects each step's outputs
from its executor output file.

Six things are ours:

* **The task handler.** Each container's command runs as a subprocess instead
  of `docker run`, with `python` meaning the project's interpreter (the image
  is that environment). Nothing else about the command changes.
* **Input artifact types.** On a cluster, the launcher records each output in
  ML Metadata with the type schema its producer declares, and the driver
  hands it to consumers with that type (`toRuntimeArtifact(artifact,
  instanceSchema, schemaTitle)` in KFP's backend). kfp.local hands artifacts
  between steps as `dsl.Artifact` objects and keeps only KFP's own types, so a
  `tfx.Examples` would arrive as `system.Artifact`, which TFX's container
  entrypoint cannot map to a class. Here the executor input gets the type the
  consumer's input definition declares: in a TFX-compiled spec, the same type
  as the producer's output.
* **Output folders.** As the backend's launcher does (`prepareOutputFolders`),
  each local output artifact's parent directory exists before the step
  starts; kfp.local leaves that to the component.
* **Output parameters named like artifacts.** TFX passes a value between
  steps (`channel.future()[0].value`) as an output parameter named after the
  producer's value artifact. The backend keeps a task's parameters and
  artifacts apart; kfp.local keeps one dictionary, where the artifact would
  replace the parameter. Here the parameter keeps the name (nothing in a
  TFX-compiled spec consumes such an artifact as an artifact).
* **Task directories.** The backend puts a task's outputs under
  `<run>/<task name>/`; kfp.local names that directory after the component
  with kfp's `comp-` prefix cut off, five characters of a TFX component's
  name. Here it is the task's name, as steps and the exit handler expect.
* **Artifact URIs under a remote pipeline root.** kfp.local keeps its
  bookkeeping (executor output files) under --pipeline-root; when the
  package's `defaultPipelineRoot` is s3:// or gs://, output artifacts get
  URIs under that root instead, at the same relative place, as the backend
  hands them out. Executors then write to the object store, as on a cluster.

With `--isolated-env`, a step's process gets only what a pod would: the
image's environment (IMAGE_ENVIRONMENT), the container spec's `env`, and the
platform spec's `secretAsEnv` resolved from the `--secret NAME=FILE` files
(a JSON object of the secret's data, as `kubectl get secret` decodes it). A
secret or key that is not there fails the step, as Kubernetes refuses to
start such a pod. Without it, steps inherit this process's environment.

With `--cache-root DIR`, steps whose spec enables caching are cached across
executions that share DIR, by kfp.local's own cache: keyed on the step's
component, image, command, parameter values and input artifacts (name and
URI), as the open-source backend keys it (backend/src/v2/cacheutils/cache.go:
parameter values, input artifact ids, image, command), with nothing about the
files a step reads. A hit hands the cached outputs downstream, as a cluster
does. The summary lists such a step as CACHED.

kfp.local also does two things a cluster does that matter here: it retries a
task with a `retryPolicy` with the same executor input (the same output URIs,
as Argo restarts only the step's pod), and it runs an exit handler after the
DAG it guards, however that ended, with a `PipelineTaskFinalStatus` (whose
error, unlike the backend's, names the failed task). The summary counts each
step's attempts.

* **Argo's retry rules.** kfp.local reads `backoffMaxDuration` as a cap on
  the wait between attempts; the backend hands it to Argo as the retry
  strategy's `backoff.maxDuration`, a window counted from the first
  attempt's start (workflow/controller/operator.go). Here, as Argo does: a
  retry waits `backoffDuration * backoffFactor**(n-1)` after attempt n ended,
  uncapped; no retry starts once the window has closed ("Max duration limit
  exceeded") or when its wait would end after it ("Backoff would exceed max
  duration limit"); and a retried attempt still running when the window
  closes is killed (the deadline Argo gives a retried pod). Time is the
  cluster's clock: each attempt's real time, plus `--attempt-duration`, with
  the backoffs passing on that clock without a real wait. The summary gives
  each step's `retry_window_seconds` and, where Argo would have stopped
  retrying, `retry_stopped`.

Faults a cluster brings, on demand, for tests of what a retry must survive:
`--preempt STEP` kills STEP's first attempt (SIGKILL) once it has written
into an output artifact, as a node going away does, leaving what it wrote;
`--repeat STEP` runs STEP's command a second time with the same executor
input after the first finished, as the backend does when a pod dies between
its command's end and the launcher's record of it; `--attempt-duration
STEP=DURATION` (30s, 40m, 6h) makes each attempt of STEP take that much
longer on the cluster's clock, as a long training run does, for tests of
what a retry window lets through.

Not reproduced here: resource requests, node selectors and tolerations
(scheduling), lifecycle hooks (`preCacheCheck`, which open-source KFP does not
run either), ML Metadata (kfp.local keeps none), and the launcher's own
uploads and downloads of artifacts (TFX's executors read and write artifact
URIs directly).

The summary file holds, per step: status, wall seconds, start-up seconds (from
starting the command to TFX's "Starting executor" log line), the parameter
values its executor input carried and the URIs of its output artifacts.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml
from google.protobuf import json_format
from kfp import local
from kfp.local import (
    cache,
    executor_input_utils,
    executor_output_utils,
    pipeline_orchestrator,
    status,
    subprocess_task_handler,
)
from kfp.local.orchestrator import task_executor
from kfp.pipeline_spec import pipeline_spec_pb2

# What the pipeline image's Dockerfile (ENV) gives every step, as far as it
# matters outside a container; PATH leads to the project's interpreter.
IMAGE_ENVIRONMENT = {"PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "1"}
REMOTE_ROOT_SCHEMES = ("s3://", "gs://")
# TFX's entrypoint logs this (absl format) right before calling the executor.
_EXECUTOR_START = re.compile(r"^I(\d{4}) (\d\d:\d\d:\d\d\.\d+) .*\] Starting executor$")
_INVOCATION_FLAG = "--json_serialized_invocation_args"


def executor_labels_by_class(spec: dict) -> dict[str, str]:
    """`--executor_class_path` value -> executor label, from the spec's deployment section."""
    labels = {}
    for name, executor in spec["deploymentSpec"]["executors"].items():
        args = executor.get("container", {}).get("args", [])
        if "--executor_class_path" in args:
            labels[args[args.index("--executor_class_path") + 1]] = name
    return labels


class MissingSecretError(RuntimeError):
    """A step's secretAsEnv names a secret or key that the execution was not given."""


def secret_environment(platform_config: dict, secrets: dict[str, dict[str, str]]) -> dict:
    """The environment a pod gets from its `secretAsEnv` entries."""
    env = {}
    for entry in platform_config.get("secretAsEnv", []):
        name = entry.get("secretNameParameter", {}).get("runtimeValue", {}).get("constant")
        name = name or entry["secretName"]
        if name not in secrets:
            if entry.get("optional"):
                continue
            raise MissingSecretError(f'secret "{name}" not found')
        for mapping in entry["keyToEnv"]:
            if mapping["secretKey"] not in secrets[name]:
                raise MissingSecretError(
                    f"couldn't find key {mapping['secretKey']} in Secret {name}"
                )
            env[mapping["envVar"]] = secrets[name][mapping["secretKey"]]
    return env


def isolated_environment(project_python: str, home: str) -> dict[str, str]:
    """A pod's base environment: the image's variables, a PATH and an empty HOME."""
    path = f"{os.path.dirname(project_python)}:/usr/local/bin:/usr/bin:/bin"
    return {**IMAGE_ENVIRONMENT, "PATH": path, "HOME": home}


def _executor_start(lines: list[str], started: datetime.datetime) -> datetime.datetime | None:
    for line in lines:
        match = _EXECUTOR_START.match(line.strip())
        if match:
            month_day, clock = match.groups()
            stamp = f"{started.year}{month_day} {clock}"
            return datetime.datetime.strptime(stamp, "%Y%m%d %H:%M:%S.%f")
    return None


@dataclass(frozen=True)
class StepEnvironment:
    """How each step's process environment is made (see the module docstring)."""

    isolated: bool = False
    home: str = ""
    platform: dict = field(default_factory=dict)  # executor label -> Kubernetes config
    secrets: dict = field(default_factory=dict)  # secret name -> its data

    def for_step(self, project_python: str, label: str | None, container_env: dict) -> dict:
        if not self.isolated:
            return {**subprocess_environment(), **container_env}
        return {
            **isolated_environment(project_python, self.home),
            **container_env,
            **secret_environment(self.platform.get(label or "", {}), self.secrets),
        }


@dataclass(frozen=True)
class Faults:
    """What a cluster does to steps now and then, done on purpose (see the module docstring)."""

    preempt: frozenset[str] = frozenset()  # step ids whose first attempt is killed
    repeated: frozenset[str] = frozenset()  # step ids whose command runs twice
    # step id -> seconds each attempt takes on the cluster's clock, beyond its real time
    attempt_seconds: dict = field(default_factory=dict)

    def preempt_first_attempt(self, step_id: str, earlier_attempts: int) -> bool:
        return step_id in self.preempt and earlier_attempts == 0

    def repeat(self, step_id: str) -> bool:
        return step_id in self.repeated


_DURATION = re.compile(r"^([0-9]+)(s|m|h|d)$")
_SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}


def duration_seconds(text: str) -> int:
    """A duration as the settings write one (30s, 40m, 6h, 1d), in seconds."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration (30s, 40m, 6h, 1d)")
    return int(match.group(1)) * _SECONDS_PER_UNIT[match.group(2)]


class ClusterClock:
    """The cluster's time: real time, plus what faults and backoffs add to it."""

    def __init__(self) -> None:
        self._offset = 0.0

    def now(self) -> float:
        return time.monotonic() + self._offset

    def advance(self, seconds: float) -> None:
        self._offset += max(seconds, 0.0)


@dataclass(frozen=True)
class ArgoRetryStrategy:
    """A task's `retryPolicy` as the backend hands it to Argo (`retryStrategy.backoff`)."""

    backoff_seconds: float
    factor: float
    window_seconds: float | None  # backoff.maxDuration; None: no window

    @classmethod
    def from_policy(cls, policy: dict) -> ArgoRetryStrategy:
        def seconds(value: str | None) -> float | None:
            return None if value is None else float(value.removesuffix("s"))

        return cls(
            backoff_seconds=seconds(policy.get("backoffDuration")) or 0.0,
            factor=float(policy.get("backoffFactor", 2.0)),
            window_seconds=seconds(policy.get("backoffMaxDuration")),
        )

    def wait_before(self, attempt: int) -> float:
        """The wait before attempt `attempt` (2 is the first retry), uncapped as in Argo."""
        return self.backoff_seconds * self.factor ** (attempt - 2)

    def refusal(self, attempt: int, first_started: float, last_ended: float, now: float):
        """Why Argo starts no attempt `attempt` (operator.go's messages), or None."""
        if self.window_seconds is None:
            return None
        window_end = first_started + self.window_seconds
        if now > window_end:
            return "Max duration limit exceeded"
        if last_ended + self.wait_before(attempt) > window_end:
            return "Backoff would exceed max duration limit"
        return None


def retry_strategies(spec: dict) -> dict[str, ArgoRetryStrategy]:
    """Task name -> its retry strategy, for every task with a `retryPolicy`, in any DAG."""
    dags = [spec["root"]] + [c for c in spec["components"].values() if "dag" in c]
    return {
        name: ArgoRetryStrategy.from_policy(task["retryPolicy"])
        for dag in dags
        for name, task in dag["dag"]["tasks"].items()
        if task.get("retryPolicy")
    }


def output_uris(executor_input: dict) -> list[str]:
    return [
        artifact["uri"]
        for artifacts in executor_input.get("outputs", {}).get("artifacts", {}).values()
        for artifact in artifacts.get("artifacts", [])
    ]


def _has_files(uris: list[str]) -> bool:
    for uri in uris:
        if os.path.isfile(uri):
            return True
        for _, _, files in os.walk(uri):
            if files:
                return True
    return False


DEADLINE_KILL = "[killed: the retry window closed (Argo: the retried pod's deadline)]"


def run_command(
    command: list[str],
    env: dict,
    preempt_when_writing: list[str] | None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Runs a step's command; with `preempt_when_writing`, kills it (SIGKILL, as the
    kubelet does to a pod on a node going away) once it has written a file there;
    with `timeout`, kills it that many seconds after it started (a pod's deadline)."""
    if timeout is not None and timeout <= 0:
        return subprocess.CompletedProcess(command, 1, DEADLINE_KILL)
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        started = time.monotonic()
        killed = ""
        while process.poll() is None:
            if preempt_when_writing is not None and _has_files(preempt_when_writing):
                killed = "[preempted: killed while writing its outputs]"
            elif timeout is not None and time.monotonic() - started > timeout:
                killed = DEADLINE_KILL
            if killed:
                process.kill()
                break
            time.sleep(0.05)
        returncode = process.wait()
        log.seek(0)
        output = log.read() + (f"\n{killed}" if killed else "")
    return subprocess.CompletedProcess(command, returncode or (1 if killed else 0), output)


def make_task_handler(
    project_python: str,
    steps: dict[str, dict],
    labels: dict[str, str],
    environment,
    faults: Faults = Faults(),
    log_dir: Path | None = None,
    strategies: dict[str, ArgoRetryStrategy] | None = None,
    clock: ClusterClock | None = None,
):
    strategies = strategies or {}
    clock = clock or ClusterClock()

    class ProjectEnvironmentTaskHandler:
        """kfp.local's task handler interface: runs the container command as a subprocess."""

        def __init__(self, image, full_command, pipeline_root, runner, env_vars=None):
            del image, pipeline_root, runner  # The image is the project's environment.
            self.full_command = list(full_command)
            self.env_vars = env_vars or {}

        def run(self) -> status.Status:
            command = self.full_command
            if command[0] in ("python", "python3"):
                command = [project_python, *command[1:]]
            label = labels.get(_flag_value(command, "--executor_class_path"))
            step_id = label.removesuffix("_executor") if label else command[-1]
            executor_input = json.loads(_flag_value(command, _INVOCATION_FLAG) or "{}")
            # What earlier attempts of this step left in the summary.
            earlier = steps.get(step_id, {})
            attempt = earlier.get("attempts", 0) + 1
            strategy = strategies.get(step_id)
            timeout = window_end = None
            if attempt > 1 and strategy is not None and strategy.window_seconds is not None:
                if earlier.get("retry_stopped"):
                    # Argo stopped retrying; kfp.local's own loop calls on regardless.
                    return status.Status.FAILURE
                refusal = strategy.refusal(
                    attempt, earlier["cluster_started"], earlier["cluster_ended"], clock.now()
                )
                if refusal:
                    print(f"{step_id}: not retried: {refusal}", flush=True)
                    earlier["retry_stopped"] = refusal
                    return status.Status.FAILURE
                # The backoff passes on the cluster's clock (kfp.local's wait is skipped).
                clock.advance(
                    earlier["cluster_ended"] + strategy.wait_before(attempt) - clock.now()
                )
                window_end = earlier["cluster_started"] + strategy.window_seconds
                timeout = window_end - clock.now() - faults.attempt_seconds.get(step_id, 0)
            cluster_started = earlier.get("cluster_started", clock.now())
            started_at = datetime.datetime.now()
            started = time.monotonic()
            try:
                env = environment.for_step(project_python, label, self.env_vars)
            except MissingSecretError as err:
                # Kubernetes does not start such a pod (CreateContainerConfigError).
                process = subprocess.CompletedProcess(
                    command, 1, f"CreateContainerConfigError: {err}"
                )
            else:
                preempt = faults.preempt_first_attempt(step_id, attempt - 1)
                process = run_command(
                    command, env, output_uris(executor_input) if preempt else None, timeout
                )
                if faults.repeat(step_id):
                    # The pod died after its command finished, before KFP recorded the
                    # outcome: the backend runs the command again on the same URIs.
                    print(f"{step_id}: running the command again (--repeat)", flush=True)
                    first = process
                    process = run_command(command, env, None)
                    process.stdout = first.stdout + process.stdout
            seconds = time.monotonic() - started
            killed_at_deadline = process.stdout.endswith(DEADLINE_KILL)
            if killed_at_deadline and window_end is not None:
                # Killed when the window closed: the cluster's clock stands there.
                clock.advance(window_end - clock.now())
            else:
                clock.advance(faults.attempt_seconds.get(step_id, 0))
            lines = process.stdout.splitlines()
            log_files = list(earlier.get("log_files", []))
            if log_dir is not None:
                log_dir.mkdir(parents=True, exist_ok=True)
                log_file = log_dir / f"{step_id}-{attempt}.log"
                log_file.write_text(process.stdout)
                log_files.append(str(log_file))
            print("\n".join(lines[-40:] if process.returncode else lines[-5:]), flush=True)
            output_file = executor_input.get("outputs", {}).get("outputFile", "")
            executor_started = _executor_start(lines, started_at)
            steps[step_id] = {
                "status": "SUCCESS" if process.returncode == 0 else "FAILURE",
                # kfp.local retries a task with a retryPolicy, as the backend does.
                "attempts": attempt,
                # On the cluster's clock, in seconds: the first attempt's start, this
                # attempt's end, and the window Argo retries the step within.
                "cluster_started": cluster_started,
                "cluster_ended": clock.now(),
                "retry_window_seconds": strategy.window_seconds if strategy else None,
                "killed_at_retry_deadline": killed_at_deadline,
                # The whole output of each attempt (--log-dir), as the KFP UI shows a pod's log.
                "log_files": log_files,
                "earlier_log_tails": [
                    *earlier.get("earlier_log_tails", []),
                    *([earlier["log_tail"]] if earlier.get("log_tail") else []),
                ],
                "seconds": round(seconds, 2),
                "startup_seconds": (
                    round((executor_started - started_at).total_seconds(), 2)
                    if executor_started
                    else None
                ),
                "parameters": executor_input.get("inputs", {}).get("parameterValues", {}),
                "outputs": {
                    name: [a["uri"] for a in artifacts.get("artifacts", [])]
                    for name, artifacts in executor_input.get("outputs", {})
                    .get("artifacts", {})
                    .items()
                },
                "log_tail": lines[-40:] if process.returncode else [],
                "executor_output": (
                    json.loads(Path(output_file).read_text())
                    if output_file and Path(output_file).is_file()
                    else None
                ),
            }
            return status.Status.SUCCESS if process.returncode == 0 else status.Status.FAILURE

    return ProjectEnvironmentTaskHandler


class _NoWait:
    """What kfp.local's task executor sees as `time`: a sleep that returns at once."""

    @staticmethod
    def sleep(seconds: float) -> None:
        del seconds


def _flag_value(command: list[str], flag: str) -> str | None:
    return command[command.index(flag) + 1] if flag in command else None


def subprocess_environment() -> dict[str, str]:
    # The step's own environment, minus this (reference) environment's virtualenv.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def executor_input_builder(local_root: str, artifact_root: str | None):
    """kfp.local's executor input, with input artifact types as the consumer declares them.

    `artifact_root`, a remote pipeline root: output artifact URIs move from
    under `local_root` to the same place under it.
    """

    def typed_executor_input(component_spec, arguments, task_root, block_input_artifact):
        executor_input = _construct_executor_input(
            component_spec=component_spec,
            arguments=arguments,
            task_root=task_root,
            block_input_artifact=block_input_artifact,
        )
        for name, artifact_list in executor_input.inputs.artifacts.items():
            declared = component_spec.input_definitions.artifacts[name].artifact_type
            for artifact in artifact_list.artifacts:
                artifact.type.CopyFrom(declared)
        for artifact_list in executor_input.outputs.artifacts.values():
            for artifact in artifact_list.artifacts:
                if artifact_root:
                    relative = os.path.relpath(artifact.uri, local_root)
                    artifact.uri = f"{artifact_root.rstrip('/')}/{relative}"
                else:
                    # The launcher's prepareOutputFolders (launcher_v2.go): each output's
                    # parent directory exists before the command starts.
                    os.makedirs(os.path.dirname(artifact.uri), exist_ok=True)
        return executor_input

    return typed_executor_input


_construct_executor_input = executor_input_utils.construct_executor_input
_KFP_COMPONENT_PREFIX = "comp-"


def task_directory_name(component_name: str) -> str:
    """The task's directory under the run's: its name, as the backend's driver names it.

    kfp.local cuts the first five characters off the component name,
    expecting kfp's `comp-` prefix; TFX names components by node id, so
    `RunStatus` would become `atus`.
    """
    return component_name.removeprefix(_KFP_COMPONENT_PREFIX)


_outputs_from_executor_output = executor_output_utils.get_outputs_from_executor_output


def outputs_with_parameters_kept(executor_output, executor_input, component_spec) -> dict:
    """kfp.local's task outputs, where an output parameter keeps its name over an artifact."""
    outputs = _outputs_from_executor_output(
        executor_output=executor_output,
        executor_input=executor_input,
        component_spec=component_spec,
    )
    for name, value in executor_output.parameter_values.items():
        if name in executor_output.artifacts:
            outputs[name] = executor_output_utils.pb2_value_to_python(value)
    return outputs


def record_cache_hits(steps: dict[str, dict]) -> None:
    """Makes kfp.local's cache list each hit in `steps` (component name = step id)."""
    component_of_key: dict[str, str] = {}
    compute_key, get = cache.LocalCache.compute_key, cache.LocalCache.get

    def keyed(self, component_name, *args, **kwargs):
        key = compute_key(self, component_name, *args, **kwargs)
        component_of_key[key] = component_name
        return key

    def looked_up(self, key):
        outputs = get(self, key)
        if outputs is not None:
            steps[component_of_key[key]] = {"status": "CACHED", "cache_key": key}
        return outputs

    cache.LocalCache.compute_key = keyed
    cache.LocalCache.get = looked_up


def run(
    package: Path,
    pipeline_root: Path,
    project_python: str,
    parameters: dict,
    environment: StepEnvironment | None = None,
    cache_root: Path | None = None,
    faults: Faults = Faults(),
    log_dir: Path | None = None,
) -> dict:
    spec_dict, platform = list(yaml.safe_load_all(package.read_text()))
    spec = json_format.ParseDict(spec_dict, pipeline_spec_pb2.PipelineSpec())
    steps: dict[str, dict] = {}
    environment = environment or StepEnvironment()
    if environment.isolated:
        kubernetes = platform.get("platforms", {}).get("kubernetes", {})
        environment = replace(
            environment, platform=kubernetes.get("deploymentSpec", {}).get("executors", {})
        )
    subprocess_task_handler.SubprocessTaskHandler = make_task_handler(
        project_python,
        steps,
        executor_labels_by_class(spec_dict),
        environment,
        faults,
        log_dir,
        retry_strategies(spec_dict),
        ClusterClock(),
    )
    # Argo's backoff passes on the cluster's clock in the task handler; kfp.local's
    # own wait (capped at backoffMaxDuration, which Argo does not do) is skipped.
    task_executor.time = _NoWait()
    executor_output_utils.get_outputs_from_executor_output = outputs_with_parameters_kept
    executor_input_utils.get_local_task_resource_name = task_directory_name
    remote_root = spec.default_pipeline_root
    executor_input_utils.construct_executor_input = executor_input_builder(
        str(pipeline_root), remote_root if remote_root.startswith(REMOTE_ROOT_SCHEMES) else None
    )
    if cache_root is not None:
        record_cache_hits(steps)
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=str(pipeline_root),
        raise_on_error=False,
        enable_caching=cache_root is not None,
        cache_root=str(cache_root) if cache_root is not None else None,
    )
    started = time.monotonic()
    error = None
    try:
        pipeline_orchestrator.run_local_pipeline(spec, parameters)
    except Exception as err:  # Reported in the summary; the caller decides.
        error = f"{type(err).__name__}: {err}"
    failed = [s for s, v in steps.items() if v["status"] not in ("SUCCESS", "CACHED")]
    return {
        "pipeline": spec.pipeline_info.name,
        "order": list(steps),
        "steps": steps,
        "seconds": round(time.monotonic() - started, 2),
        "succeeded": not failed and error is None and len(steps) == container_task_count(spec),
        "error": error,
    }


def container_task_count(spec: pipeline_spec_pb2.PipelineSpec) -> int:
    """Tasks that run a container, in the root DAG and the DAGs inside it (an exit handler's)."""
    dags = [spec.root.dag] + [c.dag for c in spec.components.values() if c.HasField("dag")]
    return sum(
        1
        for dag in dags
        for task in dag.tasks.values()
        if spec.components[task.component_ref.name].HasField("executor_label")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", type=Path, required=True)
    parser.add_argument("--pipeline-root", type=Path, required=True)
    parser.add_argument("--python", required=True, help="the project environment's interpreter")
    parser.add_argument(
        "--parameter", action="append", default=[], help="NAME=VALUE, a runtime parameter"
    )
    parser.add_argument("--summary", type=Path, required=True, help="where to write JSON")
    parser.add_argument(
        "--isolated-env",
        action="store_true",
        help="give steps only the environment their pod would get (see the module docstring)",
    )
    parser.add_argument(
        "--secret",
        action="append",
        default=[],
        help="NAME=FILE: a Kubernetes secret's data as a JSON object (with --isolated-env)",
    )
    parser.add_argument(
        "--cache-root",
        type=Path,
        help="cache steps that enable caching here, across executions (module docstring)",
    )
    parser.add_argument(
        "--preempt",
        action="append",
        default=[],
        metavar="STEP",
        help="kill STEP's first attempt once it writes its outputs (module docstring)",
    )
    parser.add_argument(
        "--log-dir",
        type=Path,
        help="write each step attempt's whole output to DIR/<step>-<attempt>.log",
    )
    parser.add_argument(
        "--repeat",
        action="append",
        default=[],
        metavar="STEP",
        help="run STEP's command twice on the same executor input (module docstring)",
    )
    parser.add_argument(
        "--attempt-duration",
        action="append",
        default=[],
        metavar="STEP=DURATION",
        help="each attempt of STEP takes DURATION (30s, 40m, 6h) more on the cluster's clock",
    )
    args = parser.parse_args(argv)
    parameters = dict(p.split("=", 1) for p in args.parameter)
    faults = Faults(
        preempt=frozenset(args.preempt),
        repeated=frozenset(args.repeat),
        attempt_seconds={
            step: duration_seconds(duration)
            for step, duration in (a.split("=", 1) for a in args.attempt_duration)
        },
    )
    secrets = {
        name: json.loads(Path(file).read_text())
        for name, file in (s.split("=", 1) for s in args.secret)
    }
    with tempfile.TemporaryDirectory(prefix="step-home-") as home:
        environment = StepEnvironment(isolated=args.isolated_env, home=home, secrets=secrets)
        summary = run(
            args.package,
            args.pipeline_root,
            args.python,
            parameters,
            environment,
            args.cache_root,
            faults,
            args.log_dir,
        )
    args.summary.write_text(json.dumps(summary, indent=2))
    print(
        f"{summary['pipeline']}: {'succeeded' if summary['succeeded'] else 'FAILED'} "
        f"({len(summary['steps'])} steps, {summary['seconds']:.0f} s)"
    )
    return 0 if summary["succeeded"] else 1


if __name__ == "__main__":
    sys.exit(main())
