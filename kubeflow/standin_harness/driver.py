"""The executor input open-source KFP's driver builds, played on kfp.local: for run_compiled.py.

Read at kubeflow/pipelines 2.14.0 to 2.17.0 and master; each rule cites its
file and line, and docs/executed-spec.md's conformance table lists it with
its test.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import json_format
from kfp.local import executor_input_utils

# This directory's (run_compiled.py runs as a script, the directory on sys.path):
# the launcher's LocalPathForURI, ported once for the download and the driver.
from launcher_download import local_path_for_uri  # isort: skip

# kfp.local's own builder, which the Driver starts from (kfp_local_hooks.py
# replaces the module's name with the Driver).
_construct_executor_input = executor_input_utils.construct_executor_input

# The driver's fixed paths inside a pod (kubeflow/pipelines 2.17.0).
# component/launcher_v2.go:526, OutputMetadataFilepath: the executor output
# file where the pipeline root's scheme has no local path.
LEGACY_OUTPUT_FILE = "tmp/kfp_outputs/output_metadata.json"
# driver/driver.go:796: each output parameter's file.
OUTPUT_PARAMETER_DIR = "tmp/kfp/outputs"
EXECUTOR_LOGS = "executor-logs"


def metadata_as_ml_metadata_returns_it(metadata: dict, output_name: str, session_info: str) -> dict:
    """An output's metadata after the launcher recorded it and the driver read it back.

    The launcher stores each metadata field as a custom property
    (metadata/converter.go:110 at 2.17.0, `toMLMDArtifact`: `_kfp_workspace`
    dropped, a bool stored as 0 or 1 by `StructValueToMLMDValue`), adding
    `display_name` (the output's name) and `store_session_info` where the
    executor set neither (metadata/client.go:1234-1250, `RecordArtifact`); the
    driver turns properties and custom properties back into metadata
    (converter.go:181, `toRuntimeArtifact`).
    """
    returned = {}
    for key, value in metadata.items():
        if key == "_kfp_workspace":
            continue
        returned[key] = float(value) if isinstance(value, bool) else value
    returned.setdefault("display_name", output_name)
    returned.setdefault("store_session_info", session_info)
    return returned


@dataclass
class Driver:
    """Builds each step's executor input as open-source KFP's driver does, not as kfp.local.

    kfp.local builds the executor input from the spec with conveniences the
    backend does not have. Here each attempt of a step gets what the 2.x
    driver hands it (docs/executed-spec.md lists each rule with its test):

    * input artifacts as ML Metadata returns them: named by their numeric id,
      typed `instanceSchema: ""` (metadata/client.go:1144 and :245 at 2.17.0,
      `GetOutputArtifactsByExecutionId`, `ToRuntimeArtifact`), their metadata
      as `metadata_as_ml_metadata_returns_it` says;
    * an `executor-logs` output typed `system.Artifact` that no component
      declares, where log publishing is on, as the API server's stock
      manifest has it (driver/driver.go:755-768, `provisionOutputs`);
    * the executor output file inside the pod: under the task root's local
      path from 2.15 (driver.go:800-807), else /tmp/kfp_outputs
      (launcher_v2.go:526), as for a local pipeline root, which has no local
      path; output parameters under /tmp/kfp/outputs (driver.go:796);
    * a fresh pod per attempt: `<pods>/<task>/` stands for its disk, emptied
      before each attempt, and the launcher's download of every input
      artifact to it (launcher_download.py) before the command runs.

    A local --pipeline-root stands in for the object store: artifacts keep
    local URIs and nothing is downloaded (the backend has no local roots).
    """

    local_root: str
    artifact_root: str | None  # a remote pipeline root: output URIs move under it
    pods: Path
    release: tuple[int, int, int]
    publish_logs: bool = True
    _ids: dict = field(default_factory=dict)  # artifact URI -> its ML Metadata id

    def artifact_id(self, uri: str) -> str:
        return self._ids.setdefault(uri, str(len(self._ids) + 1))

    def session_info(self) -> str:
        if not self.artifact_root:
            return "null"  # json.Marshal of a nil SessionInfo: no bucket configured
        scheme = self.artifact_root.split("://", 1)[0]
        return json.dumps({"Provider": scheme, "Params": {}}, separators=(",", ":"))

    def output_file(self, pod: Path, task_root_uri: str) -> str:
        local = local_path_for_uri(task_root_uri)
        if self.release >= (2, 15, 0) and local is not None:
            return str(pod / local / "output_metadata.json")
        return str(pod / LEGACY_OUTPUT_FILE)

    def __call__(self, component_spec, arguments, task_root, block_input_artifact):
        executor_input = _construct_executor_input(
            component_spec=component_spec,
            arguments=arguments,
            task_root=task_root,
            block_input_artifact=block_input_artifact,
        )
        task = os.path.basename(task_root)
        pod = self.pods / task
        shutil.rmtree(pod, ignore_errors=True)
        pod.mkdir(parents=True)
        for artifact_list in executor_input.inputs.artifacts.values():
            for artifact in artifact_list.artifacts:
                metadata = json_format.MessageToDict(artifact.metadata)
                returned = metadata_as_ml_metadata_returns_it(
                    metadata, artifact.name, self.session_info()
                )
                artifact.name = self.artifact_id(artifact.uri)
                artifact.type.Clear()
                artifact.type.instance_schema = ""
                artifact.metadata.Clear()
                artifact.metadata.update(returned)
        task_root_uri = task_root
        if self.artifact_root:
            task_root_uri = self.remote(task_root)
        for artifact_list in executor_input.outputs.artifacts.values():
            for artifact in artifact_list.artifacts:
                if self.artifact_root:
                    artifact.uri = self.remote(artifact.uri)
                else:
                    # The launcher's prepareOutputFolders (launcher_v2.go:1280): each
                    # output's parent directory exists before the command starts.
                    os.makedirs(os.path.dirname(artifact.uri), exist_ok=True)
        if self.publish_logs:
            logs = executor_input.outputs.artifacts[EXECUTOR_LOGS].artifacts.add()
            logs.name = EXECUTOR_LOGS
            logs.uri = f"{task_root_uri.rstrip('/')}/{EXECUTOR_LOGS}"
            logs.type.schema_title = "system.Artifact"
        for name, parameter in executor_input.outputs.parameters.items():
            parameter.output_file = str(pod / OUTPUT_PARAMETER_DIR / name)
        executor_input.outputs.output_file = self.output_file(pod, task_root_uri)
        os.makedirs(os.path.dirname(executor_input.outputs.output_file), exist_ok=True)
        return executor_input

    def remote(self, local_uri: str) -> str:
        relative = os.path.relpath(local_uri, self.local_root)
        return f"{self.artifact_root.rstrip('/')}/{relative}"
