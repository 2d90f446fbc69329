"""Executes a compiled pipeline package step by step, as the KFP v2 backend would, on this machine.

    uv run --project kubeflow/kfp_sdk --locked python kubeflow/standin_harness/run_compiled.py \
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

Seven things are ours. Each replaces a kfp.local internal, and those are
checked against the kfp release the reference environment pins before
anything runs, and undone after (kfp_local_hooks.py); the faults it brings
on demand live in faults.py, Argo's retry rules in argo_retry.py.


* **The task handler.** Each container's command runs as a subprocess instead
  of `docker run`, with `python` meaning the project's interpreter (the image
  is that environment). Nothing else about the command changes.
* **The driver's executor input** (`Driver`). kfp.local hands a step its
  inputs typed as the consumer declares them, and nothing it did not
  declare. The backend's driver does neither: it reads input artifacts back
  from ML Metadata untyped (`instanceSchema: ""`) and named by their id, adds
  an `executor-logs` output, and puts the executor output file inside the
  pod, which its launcher fills by downloading every input artifact first.
  Here each attempt gets that executor input, for the release played
  (--backend-release); `Driver`'s docstring cites each rule.
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

* **Argo's retry rules** (argo_retry.py, a pure module). kfp.local retries
  any failure and reads `backoffMaxDuration` as a cap on the wait between
  attempts. Argo merges the cluster's `templateDefaults` (stock 2.17+:
  `retryPolicy: OnError`; --template-retry-policy to play another setup)
  into the task's strategy, retries only the phases its policy names (a
  non-zero exit is Failed, a pod that never started or was deleted Error), and reads
  `backoff.maxDuration` as a window counted from the first attempt's start:
  a retry waits `backoffDuration * backoffFactor**(n-1)` after attempt n
  ended, uncapped, with a whole-number factor; no retry starts once the
  window has closed ("Max duration limit exceeded") or when its wait would
  end after it ("Backoff would exceed max duration limit"); and a retried
  attempt still running when the window closes is killed (the deadline Argo
  gives a retried pod). Time is the
  cluster's clock: each attempt's real time, plus `--attempt-duration`, with
  the backoffs passing on that clock without a real wait. The summary gives
  each step's `retry_window_seconds` and, where Argo would have stopped
  retrying, `retry_stopped`.

Faults a cluster brings, on demand (faults.py): `--preempt STEP` (a node's
graceful shutdown: Failed), `--lose-node STEP` (a node gone without a word, its
pod deleted: Error), `--preempt-mid-search STEP` (the graceful shutdown, once a
search under the pipeline root has a trial completed and the next running; the
summary's `search_at_kill` holds the trial files it saw), `--repeat STEP`,
`--attempt-duration STEP=DURATION`. Several faults named for one step strike
its attempts in turn, one each: the kill mid-search first, then the kill at
its outputs (`Faults.interruption`).

Not reproduced here: resource requests, node selectors and tolerations
(scheduling), lifecycle hooks (`preCacheCheck`, which open-source KFP does not
run either), ML Metadata itself (kfp.local keeps none; ids are counted here),
the launcher's upload of the log to `executor-logs`, and the cluster's
`templateDefaults` retries of a task that has no `retryPolicy` of its own
(kfp.local retries no such task).

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
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import kfp
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

# This directory's own modules (run as a script, the directory is on sys.path).
import argo_retry  # isort: skip
from faults import (  # isort: skip
    DEADLINE_KILL,
    ClusterClock,
    Faults,
    duration_seconds,
    interruption_watch,
    run_command,
)
from kfp_local_hooks import Hook, KfpLocalHooks  # isort: skip
from driver import Driver  # isort: skip
import launcher_download  # isort: skip

# What the pipeline image's Dockerfile (ENV) gives every step, as far as it
# matters outside a container; PATH leads to the project's interpreter.
IMAGE_ENVIRONMENT = {"PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "1"}
REMOTE_ROOT_SCHEMES = ("s3://", "gs://")
# The newest backend release whose source these rules were read from.
NEWEST_RELEASE_READ = (2, 17, 0)
STOCK = "stock"
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


def retry_strategies(
    spec: dict, defaults: argo_retry.TemplateDefaults | None
) -> dict[str, argo_retry.RetryStrategy]:
    """Task name -> its retry strategy after Argo's merge, for every container task."""
    dags = [spec["root"]] + [c for c in spec["components"].values() if "dag" in c]
    strategies = {}
    for dag in dags:
        for name, task in dag["dag"]["tasks"].items():
            if "executorLabel" not in spec["components"][task["componentRef"]["name"]]:
                continue
            strategy = argo_retry.RetryStrategy.for_task(task.get("retryPolicy"), defaults)
            if strategy is not None:
                strategies[name] = strategy
    return strategies


def download_inputs(
    project_python: str, executor_input: dict, pod: Path, env: dict
) -> subprocess.CompletedProcess:
    """The launcher's download of the step's s3:// inputs into its pod (launcher_download.py).

    A process of its own, with the step's environment (its store and
    credentials) and the project's interpreter (boto3), as the launcher is
    one in the step's pod. stdout: the bytes downloaded.
    """
    has_s3_input = any(
        artifact.get("uri", "").startswith("s3://")
        for artifact_list in executor_input.get("inputs", {}).get("artifacts", {}).values()
        for artifact in artifact_list.get("artifacts", [])
    )
    if not has_s3_input:
        return subprocess.CompletedProcess([], 0, "0")
    return subprocess.run(
        [project_python, launcher_download.__file__, str(pod)],
        input=json.dumps(executor_input),
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def make_task_handler(
    project_python: str,
    steps: dict[str, dict],
    labels: dict[str, str],
    environment,
    faults: Faults | None = None,
    log_dir: Path | None = None,
    strategies: dict[str, argo_retry.RetryStrategy] | None = None,
    clock: ClusterClock | None = None,
    pods: Path | None = None,
    pipeline_root: str = "",
):
    """kfp.local's task handler class, running steps as the backend would (module docstring).

    `pods`: where each step's pod disk is played (a directory per task);
    `pipeline_root`: the package's, where `--preempt-mid-search` watches for a search.
    """
    strategies = strategies or {}
    faults = faults or Faults()
    pods = pods or Path(tempfile.gettempdir())
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
            if attempt > 1:
                if earlier.get("retry_stopped"):
                    # Argo stopped retrying; kfp.local's own loop calls on regardless.
                    return status.Status.FAILURE
                refusal = (
                    strategy.refusal(
                        attempt,
                        earlier["cluster_started"],
                        earlier["cluster_ended"],
                        clock.now(),
                        earlier["phase"],
                    )
                    if strategy is not None
                    else "no retryStrategy"
                )
                if refusal:
                    print(f"{step_id}: not retried: {refusal}", flush=True)
                    earlier["retry_stopped"] = refusal
                    return status.Status.FAILURE
                # The backoff passes on the cluster's clock (kfp.local's wait is skipped).
                clock.advance(
                    earlier["cluster_ended"] + strategy.wait_before(attempt) - clock.now()
                )
                if strategy.window_seconds is not None:
                    window_end = earlier["cluster_started"] + strategy.window_seconds
                    timeout = window_end - clock.now() - faults.attempt_seconds.get(step_id, 0)
            cluster_started = earlier.get("cluster_started", clock.now())
            started_at = datetime.datetime.now()
            started = time.monotonic()
            # How Argo reads a failed attempt (argo_retry's docstring): the main
            # container's non-zero exit, a node's graceful shutdown and a deadline
            # are Failed.
            phase = argo_retry.FAILED
            process = None
            # The trial files `--preempt-mid-search` saw when it killed this attempt.
            search_at_kill = earlier.get("search_at_kill")
            downloaded = 0
            try:
                env = environment.for_step(project_python, label, self.env_vars)
            except MissingSecretError as err:
                # Kubernetes does not start such a pod (CreateContainerConfigError); its
                # container is still waiting, which Argo reads as Error.
                phase = argo_retry.ERROR
                process = subprocess.CompletedProcess(
                    command, 1, f"CreateContainerConfigError: {err}"
                )
            else:
                download = download_inputs(project_python, executor_input, pods / step_id, env)
                if download.returncode != 0:
                    # The launcher fails the step before its command runs.
                    process = subprocess.CompletedProcess(command, 1, download.stderr)
                else:
                    downloaded = int(download.stdout or 0)
            if process is None:
                interruption = faults.interruption(step_id, attempt - 1)
                outputs = interruption_watch(
                    interruption, executor_input, pipeline_root, project_python, env
                )
                process = run_command(command, env, interruption, outputs, timeout)
                if interruption is not None and process.stdout.endswith(interruption.note):
                    # Its node went away: Failed after a graceful shutdown, Error when
                    # the pod is found deleted (faults.py).
                    phase = interruption.phase
                    search_at_kill = getattr(outputs, "seen", search_at_kill)
                if faults.repeat(step_id):
                    # The pod died after its command finished, before KFP recorded the
                    # outcome: the backend runs the command again on the same URIs.
                    print(f"{step_id}: running the command again (--repeat)", flush=True)
                    first = process
                    process = run_command(command, env, None, outputs)
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
                # Argo's phase of the attempt: Succeeded, Failed or Error.
                "phase": "Succeeded" if process.returncode == 0 else phase,
                # What the launcher downloaded before the command (an s3:// root).
                "downloaded_bytes": downloaded,
                "retry_policy": strategy.retry_policy if strategy else None,
                # On the cluster's clock, in seconds: the first attempt's start, this
                # attempt's end, and the window Argo retries the step within.
                "cluster_started": cluster_started,
                "cluster_ended": clock.now(),
                "retry_window_seconds": strategy.window_seconds if strategy else None,
                "killed_at_retry_deadline": killed_at_deadline,
                "search_at_kill": search_at_kill,
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
                # What the driver handed the step: its input and output artifacts and
                # the executor output file (the parameters are above).
                "handed": {
                    "inputs": executor_input.get("inputs", {}).get("artifacts", {}),
                    "outputs": executor_input.get("outputs", {}).get("artifacts", {}),
                    "output_file": output_file,
                },
                "outputs": {
                    name: [a["uri"] for a in artifacts.get("artifacts", [])]
                    for name, artifacts in executor_input.get("outputs", {})
                    .get("artifacts", {})
                    .items()
                },
                "log_tail": lines[-40:] if process.returncode else [],
                # Read only after the command succeeded, as the backend's launcher does
                # (kubeflow/pipelines backend/src/v2/component/launcher_v2.go, `execute`:
                # a failed command returns before getExecutorOutputFile, 2.15.0 lines
                # 553-557, 2.17.0 lines 715-719): an attempt killed while TFX wrote the
                # file leaves it half-written.
                "executor_output": (
                    json.loads(Path(output_file).read_text())
                    if process.returncode == 0 and output_file and Path(output_file).is_file()
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


def cache_hit_hooks(steps: dict[str, dict]) -> list[Hook]:
    """Hooks making kfp.local's cache list each hit in `steps` (component name = step id)."""
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

    key_parameters = (
        "self", "component_name", "image", "full_command", "arguments", "env_vars",
        "custom_cache_key",
    )  # fmt: skip
    return [
        Hook(cache, "LocalCache.compute_key", keyed, key_parameters),
        Hook(cache, "LocalCache.get", looked_up, ("self", "key")),
    ]


def run(
    package: Path,
    pipeline_root: Path,
    project_python: str,
    parameters: dict,
    environment: StepEnvironment | None = None,
    cache_root: Path | None = None,
    faults: Faults | None = None,
    log_dir: Path | None = None,
    release: tuple[int, int, int] = NEWEST_RELEASE_READ,
    template_defaults: argo_retry.TemplateDefaults | str | None = STOCK,
) -> dict:
    """Executes `package`; returns the summary (module docstring).

    `release`: the backend whose driver and stock Argo settings are played;
    `template_defaults`: the cluster's `templateDefaults.retryStrategy`, STOCK
    for what a stock install of `release` sets.
    """
    if template_defaults == STOCK:
        template_defaults = argo_retry.stock_template_defaults(release)
    assert not isinstance(template_defaults, str)
    spec_dict, platform = list(yaml.safe_load_all(package.read_text()))
    spec = json_format.ParseDict(spec_dict, pipeline_spec_pb2.PipelineSpec())
    steps: dict[str, dict] = {}
    environment = environment or StepEnvironment()
    if environment.isolated:
        kubernetes = platform.get("platforms", {}).get("kubernetes", {})
        environment = replace(
            environment, platform=kubernetes.get("deploymentSpec", {}).get("executors", {})
        )
    pods = Path(tempfile.mkdtemp(prefix="kfp-pods-"))
    handler = make_task_handler(
        project_python,
        steps,
        executor_labels_by_class(spec_dict),
        environment,
        faults,
        log_dir,
        retry_strategies(spec_dict, template_defaults),
        ClusterClock(),
        pods,
        spec.default_pipeline_root,
    )
    remote_root = spec.default_pipeline_root
    driver = Driver(
        local_root=str(pipeline_root),
        artifact_root=remote_root if remote_root.startswith(REMOTE_ROOT_SCHEMES) else None,
        pods=pods,
        release=release,
    )
    hooks = [
        Hook(
            subprocess_task_handler,
            "SubprocessTaskHandler",
            handler,
            ("image", "full_command", "pipeline_root", "runner", "env_vars"),
        ),
        # Argo's backoff passes on the cluster's clock in the task handler; kfp.local's
        # own wait (capped at backoffMaxDuration, which Argo does not do) is skipped.
        Hook(task_executor, "time", _NoWait()),
        Hook(
            executor_output_utils,
            "get_outputs_from_executor_output",
            outputs_with_parameters_kept,
            ("executor_output", "executor_input", "component_spec"),
        ),
        Hook(
            executor_input_utils,
            "get_local_task_resource_name",
            task_directory_name,
            ("component_name",),
        ),
        Hook(
            executor_input_utils,
            "construct_executor_input",
            driver,
            ("component_spec", "arguments", "task_root", "block_input_artifact"),
        ),
        *(cache_hit_hooks(steps) if cache_root is not None else []),
    ]
    started = time.monotonic()
    error = None
    try:
        with KfpLocalHooks(hooks, installed_release=kfp.__version__):
            local.init(
                runner=local.SubprocessRunner(use_venv=False),
                pipeline_root=str(pipeline_root),
                raise_on_error=False,
                enable_caching=cache_root is not None,
                cache_root=str(cache_root) if cache_root is not None else None,
            )
            try:
                pipeline_orchestrator.run_local_pipeline(spec, parameters)
            except Exception as err:  # Reported in the summary; the caller decides.
                error = f"{type(err).__name__}: {err}"
    finally:
        shutil.rmtree(pods, ignore_errors=True)
    failed = [s for s, v in steps.items() if v["status"] not in ("SUCCESS", "CACHED")]
    return {
        "pipeline": spec.pipeline_info.name,
        "backend": {
            "release": ".".join(map(str, release)),
            "template_retry_defaults": (
                None if template_defaults is None else asdict(template_defaults)
            ),
        },
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
        help="kill STEP's first attempt once it writes its outputs, as a node's graceful "
        "shutdown does (Argo: Failed; module docstring)",
    )
    parser.add_argument(
        "--lose-node",
        action="append",
        default=[],
        metavar="STEP",
        help="kill STEP's first attempt once it writes its outputs, its pod then deleted "
        "(Argo: Error), as a node lost without a word (module docstring)",
    )
    parser.add_argument(
        "--preempt-mid-search",
        action="append",
        default=[],
        metavar="STEP",
        help="kill STEP's first attempt once a search under the pipeline root has a trial "
        "completed and another running, as --preempt does (module docstring)",
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
    parser.add_argument(
        "--backend-release",
        default=".".join(map(str, NEWEST_RELEASE_READ)),
        help="the KFP backend release played (its driver, its stock Argo settings)",
    )
    parser.add_argument(
        "--template-retry-policy",
        choices=(STOCK, "none", *argo_retry.POLICIES),
        default=STOCK,
        help="the cluster's templateDefaults retryPolicy: the release's stock one, none "
        "(no templateDefaults retryStrategy), or a policy with the stock limit",
    )
    args = parser.parse_args(argv)
    parameters = dict(p.split("=", 1) for p in args.parameter)
    release = argo_retry.parse_release(args.backend_release)
    template_defaults: argo_retry.TemplateDefaults | str | None = STOCK
    if args.template_retry_policy == "none":
        template_defaults = None
    elif args.template_retry_policy != STOCK:
        stock = argo_retry.stock_template_defaults(release)
        template_defaults = argo_retry.TemplateDefaults(
            limit=stock.limit if stock else None, retry_policy=args.template_retry_policy
        )
    faults = Faults(
        preempt=frozenset(args.preempt),
        lose_node=frozenset(args.lose_node),
        repeated=frozenset(args.repeat),
        preempt_mid_search=frozenset(args.preempt_mid_search),
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
            release,
            template_defaults,
        )
    args.summary.write_text(json.dumps(summary, indent=2))
    print(
        f"{summary['pipeline']}: {'succeeded' if summary['succeeded'] else 'FAILED'} "
        f"({len(summary['steps'])} steps, {summary['seconds']:.0f} s)"
    )
    return 0 if summary["succeeded"] else 1


if __name__ == "__main__":
    sys.exit(main())
