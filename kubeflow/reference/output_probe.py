"""Waits until a step has written into one of its s3:// output artifacts: for faults.py.

    python kubeflow/reference/output_probe.py s3://B/K [s3://B/K2 ...]

Exits 0 once a key exists at or under any of the URIs. Run by run_compiled.py
with the project's interpreter (boto3) and the step's environment (its store's
endpoint and credentials), as launcher_download.py is: the fault that kills a
step once it has written its outputs (`--preempt`, `--lose-node`) watches a
pipeline root on the object store through it, as it watches a local one
through the file system.
"""

from __future__ import annotations

import sys
import time

POLL_SECONDS = 0.1


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


def main() -> int:
    import boto3

    client = boto3.client("s3")
    uris = sys.argv[1:]
    while not any(has_written(client, uri) for uri in uris):
        time.sleep(POLL_SECONDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
