"""The predictor's S3 credentials, checked as KServe reads them, before anything is applied.

KServe's pod mutator builds the storage initializer's credentials from the
predictor's service account (kserve pkg/credentials/service_account_credentials.go,
CreateSecretVolumeAndEnv, v0.15.0 L198-240; v0.17.0 the same):

* an IAM role annotation on the service account (`eks.amazonaws.com/role-arn`,
  IRSA) is enough on its own: no keys (L211-217);
* every secret the service account lists is read, and one that does not exist
  fails the pod's admission (mountSecretCredential L245-248);
* a secret is an S3 one when its data has `AWS_SECRET_ACCESS_KEY`
  (inferenceservice-config `credentials.s3.s3SecretAccessKeyName`, L252-264);
  its `AWS_ACCESS_KEY_ID` is then mounted as a secretKeyRef
  (s3/s3_secret.go BuildSecretEnvs), so a secret without it leaves the pod in
  CreateContainerConfigError;
* the endpoint is optional: from the secret's `serving.kserve.io/s3-endpoint`
  annotation, else inferenceservice-config's `s3Endpoint`, else AWS's own;
  from 0.16 also from the secret's data `S3_ENDPOINT` (kserve 5f1bfc328,
  s3/utils.go getEnvValue). Before 0.17 it is taken as HOST[:PORT] and
  prefixed with `https://` (or `http://` with `s3-usehttps: "0"`): a scheme
  in it makes `https://http://...` (v0.15.0 s3/utils.go BuildS3EnvVars); 0.17
  strips and honours one (kserve fd8f6aa29, getEndpointConfiguration).

So an endpoint is never required here, and a scheme is refused only for the
KServe releases that cannot read one (`serving.kserve_version`).

Port register: docs/ports.md
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from kubeflow.kserve.cluster import ServingCluster

IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
S3_ENDPOINT_ANNOTATION = "serving.kserve.io/s3-endpoint"
S3_HTTPS_ANNOTATION = "serving.kserve.io/s3-usehttps"
SECRET_KEY = "AWS_SECRET_ACCESS_KEY"
ACCESS_KEY = "AWS_ACCESS_KEY_ID"
ENDPOINT_DATA_KEY = "S3_ENDPOINT"
HTTPS_DATA_KEY = "S3_USE_HTTPS"
# The first KServe releases reading the endpoint from the secret's data, and a scheme in it.
ENDPOINT_IN_DATA_FROM = (0, 16)
SCHEME_FROM = (0, 17)


class CredentialError(ValueError):
    """KServe could not give the predictor's storage initializer what it needs to read the model."""


def kserve_release(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def secret_values(secret: dict[str, Any]) -> dict[str, str]:
    """A Secret's data as text (the API returns `data` base64-encoded)."""
    values = {}
    for key, encoded in (secret.get("data") or {}).items():
        try:
            values[key] = base64.b64decode(encoded).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            values[key] = ""
    values.update(secret.get("stringData") or {})
    return values


def _s3_problems(secret: dict[str, Any], namespace: str, kserve: tuple[int, int]) -> list[str]:
    """What stops KServe from reading s3:// with this S3 secret (one with the secret key)."""
    where = f"secret {namespace}/{secret['metadata']['name']}"
    data = secret_values(secret)
    annotations = secret.get("metadata", {}).get("annotations") or {}
    problems = []
    if ACCESS_KEY not in data:
        problems.append(
            f"{where} has {SECRET_KEY} but no {ACCESS_KEY}: KServe mounts both, and the "
            "predictor's pod would not start"
        )
    endpoint, source = (
        annotations.get(S3_ENDPOINT_ANNOTATION),
        f"annotation {S3_ENDPOINT_ANNOTATION}",
    )
    https, https_source = annotations.get(S3_HTTPS_ANNOTATION), f"annotation {S3_HTTPS_ANNOTATION}"
    if kserve >= ENDPOINT_IN_DATA_FROM:
        if endpoint is None and ENDPOINT_DATA_KEY in data:
            endpoint, source = data[ENDPOINT_DATA_KEY], f"data {ENDPOINT_DATA_KEY}"
        if https is None and HTTPS_DATA_KEY in data:
            https, https_source = data[HTTPS_DATA_KEY], f"data {HTTPS_DATA_KEY}"
    elif ENDPOINT_DATA_KEY in data and S3_ENDPOINT_ANNOTATION not in annotations:
        problems.append(
            f"{where}: data {ENDPOINT_DATA_KEY} is read from KServe 0.16 on "
            f"(serving.kserve_version is {kserve[0]}.{kserve[1]}): put the endpoint in the "
            f"annotation {S3_ENDPOINT_ANNOTATION}"
        )
    if endpoint is not None and "://" in endpoint and kserve < SCHEME_FROM:
        problems.append(
            f"{where}: {source} is {endpoint!r}; KServe before 0.17 (serving.kserve_version "
            f"is {kserve[0]}.{kserve[1]}) wants HOST:PORT without a scheme and says http with "
            f"{S3_HTTPS_ANNOTATION}: '0'"
        )
    if https not in (None, "0", "1"):
        problems.append(
            f"{where}: {https_source} is {https!r}; KServe takes '0' as http and anything "
            "else as https: write '0' or '1'"
        )
    return problems


def check_credentials(
    cluster: ServingCluster,
    namespace: str,
    account_name: str | None,
    storage_uri: str,
    kserve_version: str,
) -> str:
    """What KServe will read `storage_uri` with, said for the log; raises CredentialError
    naming the object when it could not."""
    if not account_name:
        return "the namespace's default service account (serving.service_account is unset)"
    account = cluster.get_core("serviceaccounts", namespace, account_name)
    if account is None:
        raise CredentialError(
            f"serving.service_account: service account {namespace}/{account_name} does not "
            "exist; create it with the secret KServe's storage initializer reads "
            "(docs/serving.md)"
        )
    problems = []
    s3_secrets: list[str] = []
    for ref in account.get("secrets") or []:
        name = ref.get("name", "")
        secret = cluster.get_core("secrets", namespace, name)
        if secret is None:
            problems.append(
                f"secret {namespace}/{name} is listed but does not exist (KServe's webhook "
                "fails the predictor's pod on it)"
            )
            continue
        if SECRET_KEY in secret_values(secret):
            s3_secrets.append(f"secret {namespace}/{name}")
            if storage_uri.startswith("s3://"):
                problems.extend(_s3_problems(secret, namespace, kserve_release(kserve_version)))
    irsa = IRSA_ANNOTATION in ((account.get("metadata") or {}).get("annotations") or {})
    if storage_uri.startswith("s3://") and not s3_secrets and not irsa and not problems:
        problems.append(
            f"none of its secrets has {SECRET_KEY} and it has no {IRSA_ANNOTATION} "
            "annotation, so KServe's storage initializer has no S3 credentials"
        )
    if problems:
        raise CredentialError(
            f"serving.service_account {namespace}/{account_name} cannot read {storage_uri}: "
            + "; ".join(problems)
            + " (docs/serving.md)"
        )
    found = s3_secrets + ([f"the IAM role of {IRSA_ANNOTATION}"] if irsa else [])
    used = " and ".join(found) if found else "no S3 credentials (none needed)"
    return f"service account {namespace}/{account_name}: {used}"
