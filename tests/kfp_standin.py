"""A stand-in for the Kubeflow Pipelines v2beta1 REST API on 127.0.0.1.

It implements the few endpoints `kubeflow.submit` needs (healthz as the API
server writes it, with its release tag), records every request, and answers
404 to anything else so an unexpected call fails the test.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class KfpStandIn:
    """`tag_name`: the release its healthz answers, as the API server reports its
    TAG_NAME ("unknown" where the image was built without one). The default is
    a supported release that draws no warning (kubeflow/backend.py)."""

    def __init__(self, tag_name: str = "2.16.1") -> None:
        self.requests: list[tuple[str, str, dict | None]] = []
        self.experiments: dict[str, dict] = {}
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # Keep test output clean.
                pass

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict | None:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length)) if length else None

            def do_GET(self) -> None:
                url = urlparse(self.path)
                stand_in.requests.append(("GET", url.path, parse_qs(url.query)))
                if url.path == "/apis/v2beta1/healthz":
                    # The API server's own handler: its commit, its release, its mode.
                    return self._reply(
                        200, {"commit_sha": "0" * 40, "tag_name": tag_name, "multi_user": False}
                    )
                if url.path == "/apis/v2beta1/experiments":
                    query = parse_qs(url.query)
                    wanted = None
                    if "filter" in query:
                        predicates = json.loads(query["filter"][0]).get("predicates", [])
                        wanted = next(
                            (
                                p.get("string_value")
                                for p in predicates
                                if p.get("key") == "display_name"
                            ),
                            None,
                        )
                    found = [
                        e
                        for e in stand_in.experiments.values()
                        if wanted in (None, e["display_name"])
                    ]
                    return self._reply(200, {"experiments": found, "total_size": len(found)})
                return self._reply(404, {"error": f"stand-in has no GET {url.path}"})

            def do_POST(self) -> None:
                url = urlparse(self.path)
                body = self._body()
                stand_in.requests.append(("POST", url.path, body))
                if url.path == "/apis/v2beta1/experiments":
                    experiment = {
                        "experiment_id": f"exp-{len(stand_in.experiments) + 1}",
                        "display_name": body["display_name"],
                    }
                    stand_in.experiments[experiment["experiment_id"]] = experiment
                    return self._reply(200, experiment)
                if url.path == "/apis/v2beta1/runs":
                    return self._reply(200, {**body, "run_id": "run-1", "state": "PENDING"})
                if url.path == "/apis/v2beta1/recurringruns":
                    return self._reply(
                        200, {**body, "recurring_run_id": "recurring-1", "status": "ENABLED"}
                    )
                return self._reply(404, {"error": f"stand-in has no POST {url.path}"})

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
