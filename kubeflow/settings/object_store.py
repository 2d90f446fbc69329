"""The S3 store that s3:// paths live in: the `object_store:` section of kubeflow/pipeline.yaml."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kubeflow.settings.fields import SECRET_NAME, SettingsError, absolute_path, check
from pipeline import object_store as store
from trainer.fields import field_names

_ENDPOINT = re.compile(r"^https?://[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?(:[0-9]{1,5})?/?$")
_REGION = re.compile(r"^[a-z0-9][-a-z0-9]*$")
# A Secret's data keys.
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


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


def _credentials(values: Any, where: str) -> SecretCredentials:
    values = check.typed(values, dict, where)
    known = field_names(SecretCredentials)
    check.no_unknown(values, known, where)
    for key in sorted(known):
        if not values.get(key):
            raise SettingsError(
                f"{where}.{key}: required (credentials come from a Kubernetes Secret: its name "
                "and the data keys holding the access key id and the secret access key)"
            )
        check.typed(values[key], str, f"{where}.{key}")
    if not SECRET_NAME.match(values["secret"]):
        raise SettingsError(f"{where}.secret: {values['secret']!r} is not a Kubernetes Secret name")
    for key in ("access_key_id_key", "secret_access_key_key"):
        if not _SECRET_KEY.match(values[key]):
            raise SettingsError(f"{where}.{key}: {values[key]!r} is not a Secret data key")
    return SecretCredentials(
        secret=values["secret"],
        access_key_id_key=values["access_key_id_key"],
        secret_access_key_key=values["secret_access_key_key"],
    )


def parse_object_store(values: Any) -> ObjectStore:
    where = "object_store"
    values = check.typed(values, dict, where)
    if "verify_tls" in values:
        raise SettingsError(
            f"{where}.verify_tls: turning TLS verification off is not supported: Beam's S3 "
            "client (boto3) has no setting for it. Mount the store's CA certificate into the "
            f"image or pod and set {where}.ca_file, or use the store's http:// endpoint"
        )
    check.no_unknown(values, field_names(ObjectStore), where)
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
        check.typed(endpoint, str, f"{where}.endpoint")
        if endpoint.startswith("minio://"):
            raise SettingsError(
                f"{where}.endpoint: {endpoint!r}: give the store's S3 API address, "
                "http://HOST:PORT or https://HOST:PORT (e.g. http://seaweedfs.kubeflow:8333, the "
                "SeaweedFS of a stock KFP 2.16+, or http://minio-service.kubeflow:9000 for MinIO)"
            )
        if not _ENDPOINT.match(endpoint):
            raise SettingsError(
                f"{where}.endpoint: {endpoint!r} is not http(s)://HOST[:PORT] (e.g. "
                "http://seaweedfs.kubeflow:8333 or http://minio-service.kubeflow:9000; say "
                "http:// for a plain-HTTP store such as KFP's SeaweedFS or MinIO, or "
                "both TensorFlow and Beam try TLS)"
            )
        endpoint = endpoint.rstrip("/")
    ca_file = values.get("ca_file")
    if ca_file is not None:
        ca_file = absolute_path(ca_file, f"{where}.ca_file")
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
