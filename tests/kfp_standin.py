"""A stand-in for the Kubeflow Pipelines v2beta1 REST API on 127.0.0.1.

It answers the calls `kubeflow.submit` and `kubeflow.release` make through the
real kfp client, records every request, and answers 404 to anything else so
an unexpected call fails the test. Each rule is ported from the API server's
source (kubeflow/pipelines, tags 2.15.0, 2.16.0 and 2.17.0), cited beside it;
docs/tests.md's conformance table lists each with its test.

Multi-user mode (`multi_user=True`, as the Kubeflow platform installs KFP) adds
the namespace rules and their messages, and the gateway's identity check: a
request needs a bearer token the stand-in knows (`tokens`) or a
`kubeflow-userid` header, and the user must be a contributor of the namespace
(`profiles`).

A clock (`clock`, seconds since the epoch; real time unless a test sets it) and
the ScheduledWorkflow controller's next-run rule run on it: `advance(seconds)`
fires every tick that falls due, as the controller would, and enabling or
creating a schedule fires at once what is already due. `fire(recurring_run_id)`
starts one run by hand; `finish(run_id)` ends one. `list_delay` holds every list
answer that long, so that two clients' calls interleave.

What a cluster does that it does not: it starts no Workflow, and its controller
fires at the tick, with no latency.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import email.utils
import json
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse
from zoneinfo import ZoneInfo

import yaml

from kubeflow import cron

API = "/apis/v2beta1"
# backend/src/apiserver/server/list_request_util.go:36 (2.17.0): a request
# without page_size gets 20.
DEFAULT_PAGE_SIZE = 20
# The run states a run ends in (backend/api/v2beta1/run.proto, RuntimeState).
FINAL_STATES = {"SUCCEEDED", "SKIPPED", "FAILED", "CANCELED"}
# backend/src/apiserver/server/experiment_server.go 2.16.1 L356-358.
NO_EXPERIMENT_NAMESPACE = "An experiment cannot have an empty namespace in multi-user mode"
# backend/src/apiserver/resource/resource_manager.go 2.16.1 L2117-2119
# (GetValidExperimentNamespacePair).
NO_EXPERIMENT_ID = "Experiment id can not be empty in multi-user mode"
# backend/src/apiserver/server/job_server.go 2.16.1 L447-448 (canAccessJob).
NO_JOB_NAMESPACE = "a recurring run cannot have an empty namespace in multi-user mode"


class KfpStandIn:
    """`tag_name`: the release its healthz answers, as the API server reports its
    TAG_NAME ("unknown" where the image was built without one). The default is
    a supported release that draws no warning (kubeflow/backend.py). Rules that
    differ by release follow it."""

    def __init__(
        self,
        tag_name: str = "2.16.1",
        multi_user: bool = False,
        profiles: dict[str, set[str]] | None = None,
        tokens: dict[str, str] | None = None,
        clock: float | None = None,
        list_delay: float = 0.0,
        time_zone: str = "UTC",
        runs_end_at_once: bool = False,
        seconds_per_change: float = 0.0,
    ) -> None:
        self.tag_name = tag_name
        self.multi_user = multi_user
        # namespace -> the users who may use it (a profile's owner and contributors).
        self.profiles = profiles or {"kubeflow-user-example-com": {"user@example.com"}}
        # bearer token -> user (a Dex token the gateway turns into kubeflow-userid).
        self.tokens = tokens or {}
        self.clock = clock
        self.list_delay = list_delay
        self.time_zone = time_zone
        # A run the controller starts ends at once (SUCCEEDED): a day of ticks, not of runs.
        self.runs_end_at_once = runs_end_at_once
        # The stand-in's clock moves on by this before each changing call.
        self.seconds_per_change = seconds_per_change
        # recurring_run_id -> the last tick the controller fired (its LastTriggeredTime).
        self.last_triggered: dict[str, float] = {}
        self.requests: list[tuple[str, str, dict | None]] = []
        # The Authorization headers the client sent.
        self.authorizations: set[str | None] = set()
        self.experiments: dict[str, dict] = {}
        self.pipelines: dict[str, dict] = {}
        self.versions: dict[str, dict] = {}
        self.recurring_runs: dict[str, dict] = {}
        self.runs: dict[str, dict] = {}
        # Ids in creation order: every id is unique and sorts as created.
        self._ids = 0
        # A test stops a client after this many changing calls (POST, DELETE): every
        # later one answers 503 and changes nothing, as if the client had died there.
        self.fail_from: int | None = None
        self.changes = 0
        # The most enabled recurring runs one display name ever had at once.
        self.most_enabled: dict[str, int] = {}
        self._lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # Keep test output clean.
                pass

            def date_time_string(self, timestamp=None) -> str:
                # The Date header from the stand-in's clock, as Go's net/http writes
                # the server's own on every answer.
                return email.utils.formatdate(stand_in.now(), usegmt=True)

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _raw(self) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _identity(self) -> tuple[int, dict] | None:
                stand_in.authorizations.add(self.headers.get("Authorization"))
                refusal = stand_in._authenticate(self.headers)
                if refusal is not None:
                    self._reply(*refusal)
                return refusal

            def do_GET(self) -> None:
                url = urlparse(self.path)
                if url.path != f"{API}/healthz" and self._identity() is not None:
                    return
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                stand_in.requests.append(("GET", url.path, parse_qs(url.query)))
                if stand_in.list_delay:
                    time.sleep(stand_in.list_delay)  # Outside the lock: others go on.
                with stand_in._lock:
                    status, body = stand_in._get(url.path, query)
                self._reply(status, body)

            def do_POST(self) -> None:
                if self._identity() is not None:
                    return
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                raw = self._raw()
                content_type = self.headers.get("Content-Type", "")
                if content_type.startswith("multipart/form-data"):
                    body = {"query": query, "files": _multipart_files(content_type, raw)}
                else:
                    body = json.loads(raw) if raw else None
                stand_in.requests.append(("POST", url.path, body))
                with stand_in._lock:
                    status, reply = stand_in._change(stand_in._post, url.path, query, body)
                self._reply(status, reply)

            def do_DELETE(self) -> None:
                if self._identity() is not None:
                    return
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                stand_in.requests.append(("DELETE", url.path, query))
                with stand_in._lock:
                    status, reply = stand_in._change(stand_in._delete, url.path, query)
                self._reply(status, reply)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> KfpStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def posted(self, path: str) -> list[dict]:
        return [body for method, p, body in self.requests if method == "POST" and p == path]

    def calls(self, method: str) -> list[str]:
        return [p for m, p, _ in self.requests if m == method]

    # --- what the release differs in ---------------------------------------

    @property
    def release(self) -> tuple[int, int]:
        parts = self.tag_name.lstrip("v").split(".")
        try:
            return int(parts[0]), int(parts[1])
        except (IndexError, ValueError):
            return (0, 0)

    def _new_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{self._ids:04d}"

    def now(self) -> float:
        return time.time() if self.clock is None else self.clock

    def _now(self) -> str:
        # created_at, as RFC 3339 to the second (the store keeps *InSec); the id's
        # counter breaks ties within a second.
        return _rfc3339(self.now())

    # --- multi-user mode ---------------------------------------------------

    def _authenticate(self, headers) -> tuple[int, dict] | None:
        """The platform's gateway and the API server's authenticators: a Dex token
        (oauth2-proxy writes kubeflow-userid from it, common/oauth2-proxy/components/
        istio-external-auth in community-distribution 26.03.1), or the header itself
        (backend/src/apiserver/auth/authenticator_http_headers.go 2.16.1 L30-40)."""
        if not self.multi_user:
            return None
        user = headers.get("kubeflow-userid")
        authorization = headers.get("Authorization") or ""
        if authorization.startswith("Bearer "):
            user = self.tokens.get(authorization[len("Bearer ") :], user)
        if not user:
            return 401, {"error": "Request header error: there is no user identity header."}
        self._user = user
        return None

    def _namespace_refusal(self, namespace: str) -> tuple[int, dict] | None:
        """A user outside the namespace's profile is refused by the SubjectAccessReview
        the API server makes (resource_manager.go 2.16.1, IsAuthorized)."""
        if not self.multi_user:
            return None
        if getattr(self, "_user", None) not in self.profiles.get(namespace, set()):
            return 403, {
                "error": f"PermissionDenied: {self._user} may not use namespace {namespace}"
            }
        return None

    def _namespace(self, value: str | None) -> str:
        # ReplaceNamespace (resource_manager.go 2.16.1 L2088-2094): single-user drops it.
        return (value or "") if self.multi_user else ""

    def _change(self, handler, *args) -> tuple[int, dict]:
        if self.fail_from is not None and self.changes >= self.fail_from:
            return 503, {"error": "stand-in: the test stopped the client here"}
        self.changes += 1
        if self.seconds_per_change and self.clock is not None:
            # Time passes between a client's calls: a tick can fall between two of them.
            self._advance(self.seconds_per_change)
        answer = handler(*args)
        for job in self.recurring_runs.values():
            count = len(self.enabled(job["display_name"]))
            name = job["display_name"]
            self.most_enabled[name] = max(self.most_enabled.get(name, 0), count)
        return answer

    # --- the ScheduledWorkflow controller, on the clock ----------------------

    def advance(self, seconds: float) -> None:
        """Moves the clock on by `seconds`, firing each tick as it falls due."""
        with self._lock:
            self._advance(seconds)

    def _advance(self, seconds: float) -> None:
        end = self.now() + seconds
        while True:
            due = [(t, j) for j, t in self._next_ticks().items() if t <= end and not self._held(j)]
            if not due:
                break
            tick, _ = min(due)
            self.clock = max(self.now(), tick)
            self._reconcile()
        self.clock = end

    def _next_ticks(self) -> dict[str, float]:
        """Each enabled schedule's next scheduled epoch: getNextScheduledEpoch
        (backend/src/crd/controller/scheduledworkflow/util/scheduled_workflow.go
        2.16.1 L193-253) with cron_schedule.go L62-140: from the last triggered time,
        else the start time, else the creation time; never before the start time;
        strictly after it (robfig/cron spec.go L59-60); with no_catchup, the latest
        tick due now. The enabled flag is looked at after that (L199-202), which is
        why enabling an old schedule fires at once."""
        zone = ZoneInfo(self.time_zone)
        ticks = {}
        for job_id, job in self.recurring_runs.items():
            trigger = (job.get("trigger") or {}).get("cron_schedule")
            if job["status"] != "ENABLED" or not trigger:
                continue
            schedule = cron.parse(trigger["cron"])
            start = _epoch(trigger["start_time"]) if trigger.get("start_time") else None
            if job_id in self.last_triggered:
                last = self.last_triggered[job_id]
            else:
                last = start if start is not None else _epoch(job["created_at"])
            if start is not None and start > last:
                last = start
            moment = datetime.fromtimestamp(last, zone)
            result = schedule.next(moment)
            if result is None:
                continue
            if job.get("no_catchup"):
                now = datetime.fromtimestamp(self.now(), zone)
                while (following := schedule.next(result)) is not None and following <= now:
                    result = following
            ticks[job_id] = result.timestamp()
        return ticks

    def _reconcile(self) -> None:
        """The controller's pass at the clock's time: each enabled schedule whose next
        tick is due fires once, unless max_concurrency of its runs are active
        (scheduled_workflow.go 2.16.1 L204-207)."""
        for job_id, tick in sorted(self._next_ticks().items(), key=lambda item: item[1]):
            if tick > self.now():
                continue
            if self._held(job_id):
                continue
            run_id = self._fire(job_id, tick)
            if self.runs_end_at_once:
                self.runs[run_id]["state"] = "SUCCEEDED"

    def _held(self, job_id: str) -> bool:
        """max_concurrency of the schedule's runs are active."""
        job = self.recurring_runs[job_id]
        active = [
            r
            for r in self.runs.values()
            if r["recurring_run_id"] == job_id and r["state"] not in FINAL_STATES
        ]
        return len(active) >= int(job.get("max_concurrency") or 1)

    def runs_of(self, display_name: str) -> list[dict]:
        return [r for r in self.runs.values() if r["display_name"] == display_name]

    # --- the test's hand on the cluster ------------------------------------

    def fire(self, recurring_run_id: str, tick: float | None = None) -> str:
        """The ScheduledWorkflow controller starting a run of an enabled schedule.
        The Workflow it creates is owned by the ScheduledWorkflow
        (backend/src/common/util/workflow.go, `SetOwnerReferences`, 2.17.0 L724-733;
        the controller calls it in backend/src/crd/controller/scheduledworkflow)."""
        with self._lock:
            return self._fire(recurring_run_id, tick)

    def _fire(self, recurring_run_id: str, tick: float | None) -> str:
        job = self.recurring_runs[recurring_run_id]
        assert job["status"] == "ENABLED", f"{recurring_run_id} is {job['status']}"
        if tick is not None:
            self.last_triggered[recurring_run_id] = tick
        run_id = self._new_id("run")
        self.runs[run_id] = {
            "run_id": run_id,
            "display_name": job["display_name"],
            "experiment_id": job["experiment_id"],
            "recurring_run_id": recurring_run_id,
            "pipeline_version_reference": job.get("pipeline_version_reference"),
            "state": "RUNNING",
            "created_at": self._now(),
            "scheduled_at": _rfc3339(self.now() if tick is None else tick),
            # The Workflow in Kubernetes: False once the garbage collector took it.
            "workflow_exists": True,
        }
        return run_id

    def finish(self, run_id: str, state: str = "SUCCEEDED") -> None:
        with self._lock:
            run = self.runs[run_id]
            assert run["workflow_exists"], f"{run_id}'s Workflow was deleted: it cannot finish"
            run["state"] = state

    def add_foreign_recurring_run(self, experiment_id: str, display_name: str, **fields) -> str:
        """A recurring run someone else made (the UI, `submit --schedule`), enabled."""
        with self._lock:
            job_id = self._new_id("recurring")
            self.recurring_runs[job_id] = {
                "recurring_run_id": job_id,
                "display_name": display_name,
                "experiment_id": experiment_id,
                "status": "ENABLED",
                "mode": "ENABLE",
                "created_at": self._now(),
                **fields,
            }
            return job_id

    def enabled(self, display_name: str | None = None) -> list[dict]:
        return [
            job
            for job in self.recurring_runs.values()
            if job["status"] == "ENABLED" and display_name in (None, job["display_name"])
        ]

    # --- GET ---------------------------------------------------------------

    def _get(self, path: str, query: dict) -> tuple[int, dict]:
        parts = path[len(API) + 1 :].split("/") if path.startswith(API + "/") else []
        if path == f"{API}/healthz":
            # The API server's own handler: its commit, its release, its mode.
            return 200, {
                "commit_sha": "0" * 40,
                "tag_name": self.tag_name,
                "multi_user": self.multi_user,
            }
        if path == f"{API}/experiments":
            namespace = self._namespace(query.get("namespace"))
            if self.multi_user and not namespace:
                return 400, {"error": NO_EXPERIMENT_NAMESPACE}
            if refusal := self._namespace_refusal(namespace):
                return refusal
            found = [
                e
                for e in _filtered(self.experiments.values(), query)
                if e["namespace"] == namespace
            ]
            return _page("experiments", "experiment_id", found, query)
        if len(parts) == 2 and parts[0] == "experiments":
            experiment = self.experiments.get(parts[1])
            if experiment is None:
                return 404, {"error": f"experiment {parts[1]} not found"}
            return 200, experiment
        if path == f"{API}/pipelines":
            # Listed by exact namespace: the profile's, or "" for the shared ones
            # (pipeline_server.go 2.16.1 L401-424, a Namespace reference key).
            namespace = self._namespace(query.get("namespace"))
            if namespace and (refusal := self._namespace_refusal(namespace)):
                return refusal
            found = [
                p
                for p in _filtered(self.pipelines.values(), query)
                if p.get("namespace", "") == namespace
            ]
            return _page("pipelines", "pipeline_id", found, query)
        if len(parts) == 3 and parts[0] == "pipelines" and parts[2] == "versions":
            if parts[1] not in self.pipelines:
                return 404, {"error": f"pipeline {parts[1]} not found"}
            found = [v for v in self.versions.values() if v["pipeline_id"] == parts[1]]
            return _page("pipeline_versions", "pipeline_version_id", _filtered(found, query), query)
        if len(parts) == 4 and parts[0] == "pipelines" and parts[2] == "versions":
            version = self.versions.get(parts[3])
            if version is None or version["pipeline_id"] != parts[1]:
                return 404, {"error": f"pipeline version {parts[3]} not found"}
            return 200, version
        if path == f"{API}/recurringruns":
            # job_server.go 2.16.1 L181-200: by namespace, or by the experiment's.
            namespace = self._namespace(query.get("namespace"))
            if query.get("experiment_id"):
                experiment = self.experiments.get(query["experiment_id"])
                if experiment is None:
                    return 404, {"error": f"experiment {query['experiment_id']} not found"}
                namespace = experiment["namespace"]
            if self.multi_user and not namespace:
                return 400, {"error": NO_JOB_NAMESPACE}
            if refusal := self._namespace_refusal(namespace):
                return refusal
            found = [
                j
                for j in self.recurring_runs.values()
                if query.get("experiment_id") in (None, j["experiment_id"])
                and (not self.multi_user or j["namespace"] == namespace)
            ]
            return _page("recurringRuns", "recurring_run_id", _filtered(found, query), query)
        if len(parts) == 2 and parts[0] == "recurringruns":
            job = self.recurring_runs.get(parts[1])
            return (200, job) if job else (404, {"error": f"recurring run {parts[1]} not found"})
        if path == f"{API}/runs":
            found = [
                r
                for r in self.runs.values()
                if query.get("experiment_id") in (None, r["experiment_id"])
            ]
            return _page("runs", "run_id", _filtered(found, query), query)
        return 404, {"error": f"stand-in has no GET {path}"}

    # --- POST --------------------------------------------------------------

    def _post(self, path: str, query: dict, body: dict | None) -> tuple[int, dict]:
        if path == f"{API}/experiments":
            namespace = self._namespace(body.get("namespace"))
            if self.multi_user and not namespace:
                return 400, {"error": NO_EXPERIMENT_NAMESPACE}
            if refusal := self._namespace_refusal(namespace):
                return refusal
            name = body["display_name"]
            if any(
                e["display_name"] == name and e["namespace"] == namespace
                for e in self.experiments.values()
            ):
                # A unique index on (Name, Namespace) (model/experiment.go 2.16.1 L20, L25):
                # AlreadyExists (storage/experiment_store.go L261-263), 409 at the gateway.
                return 409, {"error": f"The name {name} already exists. Please specify a new name"}
            experiment = {
                "experiment_id": self._new_id("exp"),
                "display_name": name,
                "description": body.get("description") or "",
                "namespace": namespace,
                "created_at": self._now(),
                "storage_state": "AVAILABLE",
            }
            self.experiments[experiment["experiment_id"]] = experiment
            return 200, experiment
        if path == f"{API}/runs":
            return 200, {**body, "run_id": "run-1", "state": "PENDING"}
        if path == f"{API}/pipelines/upload":
            return self._upload_pipeline(body)
        if path == f"{API}/pipelines/upload_version":
            return self._upload_version(body)
        if path == f"{API}/recurringruns":
            return self._create_recurring_run(body)
        if path.startswith(f"{API}/recurringruns/") and ":" in path:
            job_id, _, verb = path[len(f"{API}/recurringruns/") :].partition(":")
            job = self.recurring_runs.get(job_id)
            if job is None or verb not in ("enable", "disable"):
                return 404, {"error": f"stand-in has no POST {path}"}
            # Enable and Disable only flip the mode: there is no update call
            # (backend/api/v2beta1/recurring_run.proto 2.17.0 L35-80: Create, Get,
            # List, Enable, Disable, Delete; kubeflow/pipelines#3789).
            job["status"] = "ENABLED" if verb == "enable" else "DISABLED"
            job["mode"] = "ENABLE" if verb == "enable" else "DISABLE"
            # ChangeJobMode sets UpdatedAtInSec (storage/job_store.go 2.16.1 L410-416).
            job["updated_at"] = self._now()
            self._reconcile()
            return 200, {}
        return 404, {"error": f"stand-in has no POST {path}"}

    def _package(self, files: dict) -> tuple[dict, dict | None] | None:
        # The multipart form's file is `uploadfile`
        # (backend/src/apiserver/server/pipeline_upload_server.go:45, 2.15.0 to 2.17.0).
        data = files.get("uploadfile")
        if data is None:
            return None
        # PyYAML's safe loader, on libyaml's parser where PyYAML has it (its wheels do).
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        documents = list(yaml.load_all(data, Loader=loader))
        return documents[0], (documents[1] if len(documents) > 1 else None)

    def _upload_pipeline(self, body: dict) -> tuple[int, dict]:
        query = body["query"]
        package = self._package(body["files"])
        if package is None:
            # pipeline_upload_server.go 2.17.0 L103-107: no file is a 400.
            return 400, {"error": "Failed to read pipeline from file"}
        name = query.get("name") or query.get("display_name")
        namespace = self._namespace(query.get("namespace"))
        if namespace and (refusal := self._namespace_refusal(namespace)):
            return refusal
        if any(
            p["name"] == name and p.get("namespace", "") == namespace
            for p in self.pipelines.values()
        ):
            # pipeline_upload_server.go 2.17.0 L183-186: AlreadyExists is 409.
            return 409, {"error": "Failed to create a pipeline and a pipeline version"}
        pipeline_id = self._new_id("pipeline")
        pipeline = {
            "pipeline_id": pipeline_id,
            "name": name,
            "display_name": query.get("display_name") or name,
            "description": query.get("description", ""),
            "namespace": namespace,
            "created_at": self._now(),
        }
        self.pipelines[pipeline_id] = pipeline
        # Uploading a pipeline creates its first version, named as the pipeline
        # (pipeline_upload_server.go 2.17.0 L181, CreatePipelineAndPipelineVersion).
        self._add_version(pipeline_id, name, query.get("description", ""), package)
        return 200, pipeline

    def _upload_version(self, body: dict) -> tuple[int, dict]:
        query = body["query"]
        package = self._package(body["files"])
        if package is None:
            return 400, {"error": "Failed to read pipeline version from file"}
        pipeline_id = query.get("pipelineid", "")
        if pipeline_id not in self.pipelines:
            return 404, {"error": f"pipeline {pipeline_id!r} not found"}
        name = query.get("name") or query.get("display_name")
        if any(
            v["pipeline_id"] == pipeline_id and v["name"] == name for v in self.versions.values()
        ):
            # pipeline_upload_server.go 2.17.0 L338-341: a version name taken in
            # its pipeline is 409.
            return 409, {"error": "Failed to create a pipeline version"}
        return 200, self._add_version(pipeline_id, name, query.get("description", ""), package)

    def _add_version(self, pipeline_id: str, name: str, description: str, package) -> dict:
        spec, platform = package
        version_id = self._new_id("version")
        version = {
            "pipeline_id": pipeline_id,
            "pipeline_version_id": version_id,
            "name": name,
            "display_name": name,
            "description": description,
            "created_at": self._now(),
            # The spec and, beside it, the platform spec, as the server returns
            # a version holding both.
            "pipeline_spec": (
                {"pipeline_spec": spec, "platform_spec": platform} if platform else spec
            ),
        }
        self.versions[version_id] = version
        return version

    def _create_recurring_run(self, body: dict) -> tuple[int, dict]:
        experiment = self.experiments.get(body.get("experiment_id") or "")
        if self.multi_user and experiment is None:
            return 400, {"error": NO_EXPERIMENT_ID}
        namespace = experiment["namespace"] if experiment else ""
        if refusal := self._namespace_refusal(namespace):
            return refusal
        trigger = (body.get("trigger") or {}).get("cron_schedule") or {}
        try:
            cron.parse(trigger.get("cron") or "")
        except cron.CronError as err:
            # api_converter.go 2.16.1 L1973-1978: robfig/cron v1.2.0's cron.Parse.
            return 400, {"error": f"Schedule cron is not a supported format: {err}"}
        if not body.get("display_name"):
            # The name must be non-empty and nothing else: names are not unique
            # (backend/api/v2beta1/recurring_run.proto 2.17.0 L85, "Not unique").
            return 400, {"error": "Recurring run name is empty"}
        concurrency = int(body.get("max_concurrency") or 0)
        if not 1 <= concurrency <= 10:
            # backend/src/apiserver/server/api_converter.go 2.17.0 L2084.
            return 400, {"error": f"max_concurrency {concurrency} must be within 1 and 10"}
        reference = body.get("pipeline_version_reference")
        spec = body.get("pipeline_spec")
        if reference is not None:
            version_id = reference.get("pipeline_version_id")
            if not version_id:
                if self.release < (2, 17):
                    # The "latest version" mode (a reference without a version)
                    # crashes 2.15 and 2.16; fixed in 2.17.0 (kubeflow/pipelines#13440).
                    return 500, {"error": "runtime error: invalid memory address"}
                versions = [
                    v
                    for v in self.versions.values()
                    if v["pipeline_id"] == reference["pipeline_id"]
                ]
                version_id = versions[-1]["pipeline_version_id"]
            version = self.versions.get(version_id)
            if version is None:
                return 404, {"error": f"pipeline version {version_id} not found"}
            # The version's spec is copied into the recurring run at creation
            # (backend/src/apiserver/resource/resource_manager.go 2.17.0 L1283,
            # CreateJob; 2.15.0 L1097): later versions do not change it.
            spec = version["pipeline_spec"]
        job_id = self._new_id("recurring")
        # MODE_UNSPECIFIED is disabled, as DISABLE is
        # (backend/src/apiserver/server/api_converter.go 2.17.0 L2154).
        enabled = body.get("mode") == "ENABLE"
        job = {
            **body,
            "recurring_run_id": job_id,
            "pipeline_spec": spec,
            "status": "ENABLED" if enabled else "DISABLED",
            "namespace": namespace,
            "created_at": self._now(),
            "updated_at": self._now(),
        }
        self.recurring_runs[job_id] = job
        self._reconcile()
        return 200, job

    # --- DELETE ------------------------------------------------------------

    def _delete(self, path: str, query: dict) -> tuple[int, dict]:
        if path.startswith(f"{API}/experiments/"):
            experiment_id = path[len(f"{API}/experiments/") :]
            if experiment_id not in self.experiments:
                return 404, {"error": f"experiment {experiment_id} not found"}
            del self.experiments[experiment_id]
            return 200, {}
        prefix = f"{API}/recurringruns/"
        if not path.startswith(prefix):
            return 404, {"error": f"stand-in has no DELETE {path}"}
        job_id = path[len(prefix) :]
        if job_id not in self.recurring_runs:
            return 404, {"error": f"recurring run {job_id} not found"}
        policy = query.get("propagation_policy", "")
        if self.release < (2, 16):
            # 2.15 deletes the ScheduledWorkflow with empty DeleteOptions
            # (backend/src/apiserver/resource/resource_manager.go 2.15.0 L1246-1256):
            # the request's propagation_policy is not in its API and is dropped.
            policy = ""
        # 2.16 and later pass ORPHAN, FOREGROUND or BACKGROUND on
        # (resource_manager.go 2.16.0 L1270, 2.17.0 L1458-1490). Without ORPHAN,
        # Kubernetes' garbage collector deletes the Workflows the schedule owns
        # (workflow.go 2.17.0 L724-733): its runs in progress die.
        if policy != "ORPHAN":
            for run in self.runs.values():
                if run["recurring_run_id"] == job_id:
                    run["workflow_exists"] = False
        del self.recurring_runs[job_id]
        return 200, {}


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _epoch(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _multipart_files(content_type: str, raw: bytes) -> dict[str, bytes]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw
    )
    return {
        part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
        for part in message.iter_parts()
    }


def _filtered(items, query: dict) -> list[dict]:
    """The EQUALS predicates of a JSON filter (backend/api/v2beta1/filter.proto); the
    client writes `stringValue`, the proto's JSON name, or `string_value`."""
    items = list(items)
    if "filter" not in query:
        return items
    for predicate in json.loads(query["filter"]).get("predicates", []):
        assert predicate.get("operation") in ("EQUALS", 1), predicate
        value = predicate.get("string_value", predicate.get("stringValue"))
        items = [i for i in items if i.get(predicate["key"]) == value]
    return items


def _page(key: str, id_key: str, items: list[dict], query: dict) -> tuple[int, dict]:
    """One page: oldest first by created_at unless `sort_by` says otherwise
    (model/pipeline_version.go 2.17.0 L72-74 and model/job.go L213-215,
    DefaultSortField "CreatedAtInSec"), at most page_size, with the token of the next.
    The id breaks ties within a second, as the server's key field does
    (backend/src/apiserver/list/list.go 2.17.0 L231-262)."""
    sort_by = query.get("sort_by", "").split()
    descending = len(sort_by) == 2 and sort_by[1] == "desc"
    field = sort_by[0] if sort_by else "created_at"
    items = sorted(items, key=lambda i: (i.get(field, ""), i.get(id_key, "")), reverse=descending)
    size = int(query.get("page_size") or DEFAULT_PAGE_SIZE)
    start = int(base64.b64decode(query["page_token"])) if query.get("page_token") else 0
    page = items[start : start + size]
    body = {key: page, "total_size": len(items)}
    if start + size < len(items):
        body["next_page_token"] = base64.b64encode(str(start + size).encode()).decode()
    return 200, body
