"""The S3 store that s3:// paths live in: the `object_store:` section of kubeflow/pipeline.yaml."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from contract.fields import field_names
from kubeflow.settings.fields import (
    SECRET_NAME,
    SettingsError,
    absolute_path,
    check,
    namespace_and_service_account,
)
from pipeline import object_store as store

_ENDPOINT = re.compile(r"^https?://[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?(:[0-9]{1,5})?/?$")
_REGION = re.compile(r"^[a-z0-9][-a-z0-9]*$")
# A Secret's data keys.
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")

# `object_store: {preset: kubeflow-platform, namespace: NS}`: the store a Kubeflow
# platform install (kubeflow/community-distribution v1.11.0, 26.03, 26.03.1) gives a
# profile namespace. Read in applications/pipeline/upstream/base/installs/multi-user/
# pipelines-profile-controller/sync.py (v1.11.0 lines cited first, then 26.03 and the
# release-26.03.1 branch, which agree):
# * the bucket, `mlpipeline` (L23; L24);
# * the namespace's own Secret `mlpipeline-minio-artifact`, keys `accesskey` and
#   `secretkey` (L384-394; L416-426), for a SeaweedFS user named after the namespace;
# * that user's policy: s3:Put*, s3:Get*, s3:List* on these prefixes only (L356-377;
#   L388-409), which SeaweedFS 4.00 (the image the platform pins,
#   third-party/seaweedfs/base/seaweedfs/seaweedfs-deployment.yaml) turns into
#   `Write:`, `Read:`, `List:` actions on `mlpipeline/<prefix>*`
#   (weed/iamapi/iamapi_management_handlers.go L47-69, L314-349) and matches by key
#   prefix (weed/s3api/auth_credentials.go canDo, L523-567); deletes are `Write`
#   (s3api_server.go L315, L322);
# * the launcher's root, `minio://mlpipeline/private-artifacts/<ns>/v2/artifacts`, in
#   the namespace's `kfp-launcher` ConfigMap (L181; L207).
# The S3 API: Service `seaweedfs` in `kubeflow`, port `http-s3` 8333 (third-party/
# seaweedfs/base/seaweedfs/seaweedfs-service.yaml L8-19 at v1.11.0, L6-17 at 26.03).
PLATFORM_PRESET = "kubeflow-platform"
PLATFORM_BUCKET = "mlpipeline"
PLATFORM_ENDPOINT = "http://seaweedfs.kubeflow:8333"
# SeaweedFS ignores the region; the clients need one.
PLATFORM_REGION = "us-east-1"
PLATFORM_SECRET = ("mlpipeline-minio-artifact", "accesskey", "secretkey")
_PRESET_FIELDS = {"preset", "namespace", "endpoint", "region", "ca_file"}
# ObjectStore's fields that only the preset sets.
_PRESET_ONLY = {"namespace", "writable_prefixes"}


def platform_prefixes(namespace: str) -> tuple[str, ...]:
    """The key prefixes the namespace's secret may write, as s3:// URIs (sync.py's policy)."""
    return tuple(
        f"s3://{PLATFORM_BUCKET}/{prefix}"
        for prefix in (
            f"private-artifacts/{namespace}/",
            f"private/{namespace}/",
            "shared/",
            "artifacts/",
        )
    )


def launcher_root(namespace: str) -> str:
    """The `kfp-launcher` ConfigMap's defaultPipelineRoot the platform writes for `namespace`."""
    return f"minio://{PLATFORM_BUCKET}/private-artifacts/{namespace}/v2/artifacts"


def platform_paths(namespace: str) -> dict[str, str]:
    """The preset's path settings: the launcher's own root, in the s3:// TensorFlow and Beam
    read, and the serving directory beside it (its scores go beside that)."""
    home = f"s3://{PLATFORM_BUCKET}/private-artifacts/{namespace}"
    return {"pipeline_root": f"{home}/v2/artifacts", "serving_model_dir": f"{home}/serving"}


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
    # With the kubeflow-platform preset: the profile namespace whose secret is used,
    # and the s3:// prefixes that secret may write (empty: no limit known here).
    namespace: str | None = None
    writable_prefixes: tuple[str, ...] = ()

    def outside_prefixes(self, uri: str) -> bool:
        """True where the credentials may not write `uri` (only with known prefixes)."""
        if not self.writable_prefixes:
            return False
        if ".." in uri.split("/"):
            return True
        directory = uri.rstrip("/") + "/"
        return not any(directory.startswith(prefix) for prefix in self.writable_prefixes)

    def check_writable(self, where: str, uri: str, why: str = "") -> None:
        """Refuses `uri` (the setting `where`) outside what the namespace's secret may write."""
        if not self.outside_prefixes(uri):
            return
        raise SettingsError(
            f"{where}: {uri}{why} is outside the prefixes namespace {self.namespace}'s "
            f"{self.credentials.secret if self.credentials else 'store'} secret may read "
            f"and write ({', '.join(self.writable_prefixes)}): SeaweedFS would refuse the "
            f"steps with AccessDenied. Put it under {self.writable_prefixes[0]}"
        )

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


def _platform_store(values: dict[str, Any], where: str, kfp_namespace: str | None) -> ObjectStore:
    """The kubeflow-platform preset: the profile namespace's SeaweedFS user and prefixes."""
    if "credentials" in values:
        raise SettingsError(
            f"{where}.credentials: the {PLATFORM_PRESET} preset uses the namespace's own "
            f"{PLATFORM_SECRET[0]} secret, which Kubeflow's profile controller writes; "
            "remove credentials, or drop the preset and describe the store in full"
        )
    check.no_unknown(values, _PRESET_FIELDS, where)
    if not values.get("namespace") and kfp_namespace:
        # The profile the runs run in (kfp.namespace) is the one whose store they use.
        values = {**values, "namespace": kfp_namespace}
    if not values.get("namespace"):
        raise SettingsError(
            f"{where}.namespace: required with preset {PLATFORM_PRESET} (or kfp.namespace): "
            "the profile namespace the runs run in (e.g. kubeflow-user-example-com)"
        )
    if kfp_namespace and values["namespace"] != kfp_namespace:
        raise SettingsError(
            f"{where}.namespace: {values['namespace']!r} is not kfp.namespace "
            f"{kfp_namespace!r}: a run in one profile cannot use another's store secret"
        )
    # Checked as the sections that start pods check theirs.
    namespace = namespace_and_service_account(values, where)["namespace"]
    assert namespace is not None
    store = parse_object_store(
        {
            "endpoint": values.get("endpoint", PLATFORM_ENDPOINT),
            "region": values.get("region", PLATFORM_REGION),
            **({"ca_file": values["ca_file"]} if "ca_file" in values else {}),
            "credentials": {
                "secret": PLATFORM_SECRET[0],
                "access_key_id_key": PLATFORM_SECRET[1],
                "secret_access_key_key": PLATFORM_SECRET[2],
            },
        }
    )
    return replace(store, namespace=namespace, writable_prefixes=platform_prefixes(namespace))


def parse_object_store(values: Any, kfp_namespace: str | None = None) -> ObjectStore:
    """`object_store:`; with the platform preset, its namespace defaults to kfp.namespace."""
    where = "object_store"
    values = check.typed(values, dict, where)
    if "preset" in values:
        preset = values["preset"]
        if preset != PLATFORM_PRESET:
            raise SettingsError(f"{where}.preset: must be {PLATFORM_PRESET!r}, got {preset!r}")
        return _platform_store(values, where, kfp_namespace)
    if "verify_tls" in values:
        raise SettingsError(
            f"{where}.verify_tls: turning TLS verification off is not supported: Beam's S3 "
            "client (boto3) has no setting for it. Mount the store's CA certificate into the "
            f"image or pod and set {where}.ca_file, or use the store's http:// endpoint"
        )
    check.no_unknown(values, set(field_names(ObjectStore)) - _PRESET_ONLY, where)
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
    if object_store is not None and store.uri_scheme(value) == "s3":
        # A path of the settings or a command's flag (submit's --data-root, --pipeline-root):
        # one the namespace's secret may not use is refused where it is read.
        object_store.check_writable(where, value)
    return value
