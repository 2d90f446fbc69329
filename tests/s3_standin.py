"""An S3-compatible server on loopback for the object-store tests: moto's, in a thread.

It is not MinIO, and not AWS: it speaks the S3 REST API (path-style buckets,
SigV4 signatures, multipart uploads) as moto implements it. With IAM
authentication switched on, it refuses unknown access keys and bad
signatures, as a real store does.

One rule is the stores', not moto's: the path a signature covers
(`store_canonical_path`). moto signs the request path as it arrived; MinIO
and SeaweedFS (KFP's stores) sign it decoded, then encoded again. The two
differ for a key holding `=` (a partition `span=1/`) read by tensorflow-io,
whose AWS C++ SDK sends `=` as it is and signs it as `%3D`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REGION = "us-east-1"
BUCKET = "pipelines"
# Used only before authentication is switched on, to create the user below.
_BOOTSTRAP_KEY = ("bootstrap", "bootstrap")


@dataclass(frozen=True)
class S3Standin:
    endpoint: str
    access_key_id: str
    secret_access_key: str
    bucket: str = BUCKET
    region: str = REGION

    def client(self, *, access_key_id: str | None = None, secret_access_key: str | None = None):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=access_key_id or self.access_key_id,
            aws_secret_access_key=secret_access_key or self.secret_access_key,
        )

    def upload(self, local: Path, uri: str) -> None:
        bucket, key = split_uri(uri)
        self.client().upload_file(str(local), bucket, key)

    def keys(self, uri: str) -> list[str]:
        """Every key under `uri` (s3://bucket/prefix)."""
        bucket, prefix = split_uri(uri)
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        )
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def folder_markers(self, uri: str) -> list[str]:
        """Zero-byte keys ending in "/" under `uri`: what KFP's launcher fails to download."""
        bucket, prefix = split_uri(uri)
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        )
        items = (item for page in pages for item in page.get("Contents", []))
        return [i["Key"] for i in items if i["Key"].endswith("/") and i["Size"] == 0]

    def children(self, uri: str) -> list[str]:
        """Names directly under the prefix `uri` (the versions in a serving dir, say)."""
        bucket, prefix = split_uri(uri)
        prefix = _as_directory(prefix)
        listing = self.client().list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/")
        return sorted(
            p["Prefix"][len(prefix) :].rstrip("/") for p in listing.get("CommonPrefixes", [])
        )

    def download(self, uri: str, local: Path) -> Path:
        """Copies every object under the prefix `uri` into `local`, keeping relative paths."""
        bucket, prefix = split_uri(uri)
        prefix = _as_directory(prefix)
        client = self.client()
        for key in self.keys(uri):
            if key.endswith("/"):  # A folder marker (TensorFlow writes them on GCS).
                continue
            target = local / key[len(prefix) :]
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, key, str(target))
        return local

    def shell_environment(self, home: Path) -> dict[str, str]:
        """All a process gets to reach this store, as a user would export it: nothing else."""
        from pipeline.object_store import client_environment

        return {
            **client_environment(region=self.region, endpoint=self.endpoint),
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
            "HOME": str(home),
        }

    def secret_data(self) -> dict[str, str]:
        """The data of the Kubernetes secret that holds this store's keys."""
        return {"accesskey": self.access_key_id, "secretkey": self.secret_access_key}


def store_canonical_path(path: str) -> str:
    """The canonical URI a store computes a SigV4 signature over: the request's path
    decoded, then every byte but the unreserved ones and `/` percent-encoded.

    MinIO RELEASE.2025-10-15T17-29-55Z, cmd/signature-v4.go:106-108
    (`getCanonicalRequest`: `s3utils.EncodePath(urlPath)`) and :389 (`urlPath` is
    `req.URL.Path`, which Go decodes); SeaweedFS 4.44, weed/s3api/auth_signature_v4.go:
    321-350 (the escaped path, then the decoded one) and 1031-1033, 1143 (`encodePath`).
    So `span=1` and `span%3D1` verify alike, as aws/aws-sdk-cpp#1224 reports for Amazon
    S3 and MinIO. moto 5.2 signs the path as it arrived (botocore's `S3SigV4Auth`
    leaves an S3 path alone), and refuses the first.
    """
    from urllib.parse import quote, unquote

    return quote(unquote(path), safe="/")


@contextlib.contextmanager
def _stores_canonical_path() -> Iterator[None]:
    """moto's S3 signature check, with the path a store signs (`store_canonical_path`)."""
    from botocore.auth import S3SigV4Auth
    from moto.iam.access_control import S3IAMRequest

    class StoreSigV4Auth(S3SigV4Auth):
        def _normalize_url_path(self, path: str) -> str:
            return store_canonical_path(path)

    original = S3IAMRequest._create_auth
    S3IAMRequest._create_auth = lambda self, credentials: StoreSigV4Auth(  # type: ignore[method-assign]
        credentials, self._service, self._region
    )
    try:
        yield
    finally:
        S3IAMRequest._create_auth = original  # type: ignore[method-assign]


def seaweedfs_actions(policy: dict) -> list[str]:
    """The actions SeaweedFS 4.00's IAM API makes of a user policy (weed/iamapi/
    iamapi_management_handlers.go GetActions L314-349, MapToStatementAction L47-69):
    `s3:Put*` is Write, `s3:Get*` Read, `s3:List*` List, each `ACTION:bucket/path`."""
    names = {"*": "Admin", "Put*": "Write", "Get*": "Read", "List*": "List"}
    return [
        f"{names[action.split(':')[1]]}:{resource.split(':')[5]}"
        for statement in policy["Statement"]
        for resource in statement["Resource"]
        for action in statement["Action"]
    ]


def seaweedfs_allows(actions: list[str], action: str, bucket: str, key: str) -> bool:
    """SeaweedFS 4.00's check of one request (weed/s3api/auth_credentials.go canDo
    L523-567): `ACTION:bucket/key` must start with an action's path up to its `*`. `key`
    is the object's, or a list's prefix (authRequest L484-495), read with a leading "/"
    (s3_constants/header.go GetBucketAndObject L134-143, GetPrefix L145-153)."""
    if action in actions or "Admin" in actions:
        return True
    target = f"{action}:{bucket}/{key.lstrip('/')}"
    return any(
        target.startswith(a[:-1]) if a.endswith("*") else a == f"{action}:{bucket}" for a in actions
    )


def split_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _as_directory(prefix: str) -> str:
    """`a/b` -> `a/b/`; the bucket's root stays ``."""
    return prefix.rstrip("/") + "/" if prefix.strip("/") else ""


@contextlib.contextmanager
def s3_standin() -> Iterator[S3Standin]:
    """moto's server on a free loopback port, a bucket, and one IAM user allowed to use it."""
    import boto3
    import requests
    from moto.server import ThreadedMotoServer

    with _stores_canonical_path():
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        try:
            # moto keeps its state and its authentication switch per process, not
            # per server: start from nothing, whatever an earlier test module left.
            _reset(endpoint)
            bootstrap = {
                "endpoint_url": endpoint,
                "region_name": REGION,
                "aws_access_key_id": _BOOTSTRAP_KEY[0],
                "aws_secret_access_key": _BOOTSTRAP_KEY[1],
            }
            iam = boto3.client("iam", **bootstrap)
            iam.create_user(UserName="pipeline")
            iam.put_user_policy(
                UserName="pipeline",
                PolicyName="bucket",
                PolicyDocument=json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
                    }
                ),
            )
            key = iam.create_access_key(UserName="pipeline")["AccessKey"]
            boto3.client("s3", **bootstrap).create_bucket(Bucket=BUCKET)
            # From here on every request must carry a known key and a valid signature.
            requests.post(
                f"{endpoint}/moto-api/reset-auth", data="0", timeout=10
            ).raise_for_status()
            yield S3Standin(
                endpoint=endpoint,
                access_key_id=key["AccessKeyId"],
                secret_access_key=key["SecretAccessKey"],
            )
        finally:
            _reset(endpoint)
            server.stop()


def _reset(endpoint: str) -> None:
    import requests

    requests.post(f"{endpoint}/moto-api/reset-auth", data="inf", timeout=10).raise_for_status()
    requests.post(f"{endpoint}/moto-api/reset", timeout=10).raise_for_status()


@contextlib.contextmanager
def silent_endpoint() -> Iterator[str]:
    """http://127.0.0.1:PORT where connections are accepted and never answered: a hung store."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for connection in accepted:
            connection.close()
        listener.close()
