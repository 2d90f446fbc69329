"""One release at a time per KFP namespace, whatever runs beside it.

The KFP API has no lock and no conditional update (backend/api/v2beta1/
recurring_run.proto 2.16.1: Create, Get, List, Enable, Disable, Delete). What
it does guarantee is that an experiment's name is unique in its namespace: the
experiments table has a unique index on (Name, Namespace)
(backend/src/apiserver/model/experiment.go 2.16.1 L20, L25), and a second
create of the same name is AlreadyExists (storage/experiment_store.go 2.16.1
L261-263), which the gateway answers as 409. So the lock is an experiment named
LOCK_NAME in the release's namespace: whoever creates it holds it; the others
get 409, wait, and try again.

A holder that died leaves the lock behind. It expires LOCK_TTL after the
server created it; a waiter then deletes that lock *by its id* and creates its
own. Two waiters that both find it expired both delete the same id (one of the
deletes answers 404) and both create: the unique name lets exactly one of the
creates through, so a takeover never yields two holders. A holder that
outlived its lock finds out at its next `check()`, which every changing call
of a release is preceded by, and stops with nothing more changed.

Clocks: the expiry compares the lock's created_at with the Date of the
server's 409 answer, both the server's clock. The holder stops changing
anything HOLD_AT_MOST after it took the lock, by its own monotonic clock, so a
takeover never overlaps a holder's changes. `Lock.server_now` is the server's
time when the lock was taken, which the schedule rules use (kubeflow/schedules.py).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

LOCK_NAME = "kubeflow-release-lock"
LOCK_DESCRIPTION = "Held by kubeflow.release while it changes pipelines and schedules"
# How long a lock holds before another release may take it (seconds), and how long
# its holder may go on changing things: half of that, by its own clock, so that a
# holder never changes anything once a waiter may have taken the lock over.
LOCK_TTL = 10 * 60
HOLD_AT_MOST = LOCK_TTL / 2
# How often a waiting release asks again (seconds).
POLL = 2.0


class LockError(Exception):
    """The lock could not be had, or was lost: one line saying why."""


@dataclass
class Lock:
    experiment_id: str
    holder: str
    # The server's clock when the lock was created (its created_at).
    server_now: datetime
    namespace: str | None
    taken: float = field(default_factory=time.monotonic)

    def check(self, client) -> None:
        """Still ours: raise LockError before a change if another release took it over,
        or if it has been held so long that one may."""
        if time.monotonic() - self.taken > HOLD_AT_MOST:
            raise LockError(
                f"the release has held its lock over {int(HOLD_AT_MOST)} s, after which another "
                "release may take it: stopped with nothing more changed; run it again"
            )
        try:
            experiment = client._experiment_api.experiment_service_get_experiment(
                experiment_id=self.experiment_id
            )
        except Exception as err:
            if getattr(err, "status", None) == 404:
                raise LockError(
                    "the release lock expired and another release took it over; nothing "
                    "more was changed: run the release again"
                ) from None
            raise
        if _holder_of(experiment) != self.holder:
            raise LockError(
                "the release lock is held by another release now; nothing more was changed"
            )

    def release(self, client) -> None:
        try:
            client._experiment_api.experiment_service_delete_experiment(
                experiment_id=self.experiment_id
            )
        except Exception as err:
            if getattr(err, "status", None) != 404:
                raise


def acquire(client, namespace: str | None, what: dict, wait: float, out=sys.stderr) -> Lock:
    """The namespace's release lock, waiting up to `wait` seconds for another holder."""
    import kfp_server_api

    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    description = json.dumps({"lock": LOCK_DESCRIPTION, "holder": holder, **what}, sort_keys=True)
    deadline = time.monotonic() + wait
    said_waiting = False
    while True:
        body = kfp_server_api.V2beta1Experiment(
            display_name=LOCK_NAME, description=description, namespace=namespace
        )
        try:
            experiment = client._experiment_api.experiment_service_create_experiment(
                experiment=body
            )
            return Lock(experiment.experiment_id, holder, utc(experiment.created_at), namespace)
        except kfp_server_api.ApiException as err:
            if err.status != 409:
                raise
            server_now = _server_date(err.headers)
        held = _find(client, namespace)
        if held is None:
            continue  # Released between our create and our look: try again at once.
        record = _record(held)
        # Both times are the server's: its Date header (Go's net/http writes one on
        # every answer) and the lock's created_at; this machine's clock plays no part.
        age = (server_now - utc(held.created_at)).total_seconds()
        if age > LOCK_TTL:
            print(
                f"release lock: {record.get('holder', 'an unknown holder')}'s lock is "
                f"{int(age)} s old, past {LOCK_TTL} s: taken over",
                file=out,
            )
            try:
                client._experiment_api.experiment_service_delete_experiment(
                    experiment_id=held.experiment_id
                )
            except kfp_server_api.ApiException as err:
                if err.status != 404:
                    raise
            continue
        if time.monotonic() >= deadline:
            raise LockError(
                f"another release holds the lock (experiment {LOCK_NAME!r}, "
                f"{held.experiment_id}): {record.get('holder')} releasing "
                f"{record.get('commit') or record.get('action')}, for {int(age)} s; it expires "
                f"after {LOCK_TTL} s. Run again later (or --lock-wait SECONDS); delete that "
                "experiment only if that release is known to have died"
            )
        if not said_waiting:
            print(
                f"release lock: held by {record.get('holder')} "
                f"({record.get('commit') or record.get('action')}); waiting",
                file=out,
            )
            said_waiting = True
        time.sleep(POLL)


def _server_date(headers) -> datetime:
    date = (headers or {}).get("Date") or (headers or {}).get("date")
    if date:
        return parsedate_to_datetime(date)
    return datetime.now(timezone.utc)


def _find(client, namespace: str | None):
    predicate = {"operation": "EQUALS", "key": "display_name", "stringValue": LOCK_NAME}
    kwargs = {"namespace": namespace} if namespace else {}
    found = client._experiment_api.experiment_service_list_experiments(
        filter=json.dumps({"predicates": [predicate]}), page_size=10, **kwargs
    ).experiments
    return found[0] if found else None


def _record(experiment) -> dict:
    try:
        record = json.loads(experiment.description or "")
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _holder_of(experiment) -> str | None:
    return _record(experiment).get("holder")


def utc(value) -> datetime:
    """A time the API answers (datetime or RFC 3339 text), in UTC."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
