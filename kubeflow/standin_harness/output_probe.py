"""Waits until a step has written into one of its s3:// output artifacts, or until a
search under the pipeline root is half done: for faults.py.

    python kubeflow/standin_harness/output_probe.py s3://B/K [s3://B/K2 ...]
    python kubeflow/standin_harness/output_probe.py --search s3://B/ROOT

Exits 0 once a key exists at or under any of the URIs. Run by run_compiled.py
with the project's interpreter (boto3) and the step's environment (its store's
endpoint and credentials), as launcher_download.py is: the fault that kills a
step once it has written its outputs (`--preempt`, `--lose-node`) watches a
pipeline root on the object store through it, as it watches a local one
through the file system.

With `--search`, exits 0 once, in one KerasTuner search directory under ROOT,
a trial's `trial.json` says COMPLETED and another's RUNNING, both written
since the probe started (`--preempt-mid-search`), and prints those trial
files as JSON: {URI: status, score, ETag, LastModified}, what the fault saw
when it struck. The chief's oracle writes a trial's file when the trial
starts (RUNNING) and again when it ends (keras-tuner 1.4.8,
src/engine/oracle.py: `create_trial` line 497, `update_trial` line 531 and
`end_trial` line 590 call `_save_trial`).
"""

from __future__ import annotations

import json
import sys
import time

POLL_SECONDS = 0.1
# KerasTuner's file for each trial: <search>/trial_<id>/trial.json (keras-tuner 1.4.8,
# src/engine/oracle.py, `_get_trial_dir` line 798, `_save_trial` line 805).
TRIAL_FILE = "trial.json"


def is_trial_file(path: str) -> bool:
    """A KerasTuner trial's own file: .../trial_<id>/trial.json."""
    parts = path.rsplit("/", 2)
    return len(parts) == 3 and parts[2] == TRIAL_FILE and parts[1].startswith("trial_")


def half_done(trials: dict[str, dict]) -> bool:
    """In one search directory, a trial COMPLETED and another RUNNING. `trials`: {path of a
    trial.json: its state, with `status` as the file says it}. Pure: faults.py uses it too."""
    statuses: dict[str, set] = {}
    for path, state in trials.items():
        statuses.setdefault(path.rsplit("/", 2)[0], set()).add(state.get("status"))
    return any({"COMPLETED", "RUNNING"} <= found for found in statuses.values())


def has_written(client, uri: str) -> bool:
    """A key under `uri` (a directory artifact) or at it (a file artifact)."""
    from botocore.exceptions import ClientError

    bucket, _, key = uri.removeprefix("s3://").partition("/")
    key = key.rstrip("/")
    if client.list_objects_v2(Bucket=bucket, Prefix=key + "/", MaxKeys=1).get("KeyCount"):
        return True
    try:
        client.head_object(Bucket=bucket, Key=key)
    except ClientError:
        return False
    return True


def trial_versions(client, uri: str) -> dict[str, tuple[str, str]]:
    """{URI of each trial.json under `uri`: (its ETag, its LastModified)}."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    found = {}
    pages = client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix.rstrip("/") + "/"
    )
    for page in pages:
        for item in page.get("Contents", []):
            if is_trial_file(item["Key"]):
                found[f"s3://{bucket}/{item['Key']}"] = (
                    item["ETag"],
                    item["LastModified"].isoformat(),
                )
    return found


def half_done_search(client, uri: str) -> dict[str, dict]:
    """Waits until a search under `uri` is half done; the trial files written since."""
    from botocore.exceptions import ClientError

    before = trial_versions(client, uri)
    while True:
        states = {}
        for path, version in trial_versions(client, uri).items():
            if before.get(path) == version:
                continue
            bucket, _, key = path.removeprefix("s3://").partition("/")
            try:
                answer = client.get_object(Bucket=bucket, Key=key)
            except ClientError:  # replaced or gone since the listing
                continue
            trial = json.loads(answer["Body"].read())
            states[path] = {
                "status": trial.get("status"),
                "score": trial.get("score"),
                # The version read, which a later write replaces.
                "etag": answer["ETag"],
                "last_modified": answer["LastModified"].isoformat(),
            }
        if half_done(states):
            return states
        time.sleep(POLL_SECONDS)


def main() -> int:
    import boto3

    client = boto3.client("s3")
    if sys.argv[1:2] == ["--search"]:
        print(json.dumps(half_done_search(client, sys.argv[2])), flush=True)
        return 0
    uris = sys.argv[1:]
    while not any(has_written(client, uri) for uri in uris):
        time.sleep(POLL_SECONDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
