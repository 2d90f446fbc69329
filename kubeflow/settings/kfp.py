"""`kfp:`: the Kubeflow Pipelines API that `submit` and `release` talk to.

Multi-user mode (the Kubeflow platform's own install: kubeflow/community-distribution
v1.11.0 to 26.03.1, applications/pipeline/upstream/base/installs/multi-user/
api-service/params.env, MULTIUSER=true) puts experiments, runs and recurring runs
in a profile namespace and refuses them without one; a standalone KFP is
single-user and ignores namespaces (backend/src/apiserver/resource/
resource_manager.go 2.16.1 L2088-2094, ReplaceNamespace). `--namespace` on the
command line wins over `namespace:` here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from contract.fields import choice, declare, field_names, typed
from kubeflow.settings.fields import NAMESPACE, SettingsError, check

# Where a release uploads its pipelines in multi-user mode: the profile's own
# (`?namespace=` on upload, pipeline_upload_server.go 2.15.0 to 2.17.0 L117-123) or
# shared by every profile (no namespace: allowed unless the server sets
# REQUIRE_NAMESPACE_FOR_PIPELINES, config.go 2.16.1 L55-57, default false).
PIPELINE_SCOPES = ("namespaced", "shared")


@dataclass(frozen=True)
class KfpApi:
    namespace: str | None = field(
        default=None,
        metadata=declare(
            typed(str).or_none(),
            "the profile namespace on a multi-user KFP (the Kubeflow platform); "
            "omit on a standalone, single-user KFP",
        ),
    )
    pipelines: str = field(
        default="namespaced",
        metadata=declare(
            choice(PIPELINE_SCOPES),
            "multi-user: release the pipelines into the namespace, or shared by every profile",
        ),
    )
    schedule_time_zone: str = field(
        default="UTC",
        metadata=declare(
            typed(str),
            "the zone the cron runs in: the ScheduledWorkflow controller's "
            "CRON_SCHEDULE_TIMEZONE, else its container's (UTC as the platform installs it)",
        ),
    )

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.schedule_time_zone)


def parse_kfp(values: Any) -> KfpApi:
    raw = check.typed(values or {}, dict, "kfp")
    check.no_unknown(raw, field_names(KfpApi), "kfp")
    api = check.read(KfpApi, raw, "kfp")
    if api.namespace is not None and not NAMESPACE.match(api.namespace):
        raise SettingsError(f"kfp.namespace: {api.namespace!r} is not a namespace name")
    try:
        ZoneInfo(api.schedule_time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise SettingsError(
            f"kfp.schedule_time_zone: {api.schedule_time_zone!r} is not an IANA time zone "
            "(e.g. UTC, Europe/Berlin)"
        ) from None
    return api
