#!/usr/bin/env python
"""The pipeline image's Beam boot binary, for a worker pool on this machine: its Python contract.

In the image, `/opt/apache/beam/boot --worker_pool` runs Beam's
`worker_pool_main` with `--container_executable=/opt/apache/beam/boot`: for
each worker, the pool calls boot with the Fn API endpoints, and boot asks the
provision service for the pipeline options, puts them where the SDK harness
reads them, and starts `sdk_worker_main`. That is where `--beam_plugins` are
imported and Beam's filesystems get their options (s3:// needs them). The boot
binary is Go and lives only in Beam's container images, so the worker-pool
test hands `worker_pool_main` this script instead: the same requests and
environment, nothing else (no artifact staging: the image holds every package).

    worker_pool_main --service_port=PORT --container_executable=tests/beam_boot.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import grpc
from apache_beam.portability.api import (
    beam_provision_api_pb2,
    beam_provision_api_pb2_grpc,
    endpoints_pb2,
)
from google.protobuf import json_format, text_format


def descriptor(url: str) -> str:
    return text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=url))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    for flag in ("id", "logging_endpoint", "artifact_endpoint", "provision_endpoint",
                 "control_endpoint"):  # fmt: skip
        parser.add_argument(f"--{flag}", required=True)
    args = parser.parse_args(argv)
    with grpc.insecure_channel(args.provision_endpoint) as channel:
        info = (
            beam_provision_api_pb2_grpc.ProvisionServiceStub(channel)
            .GetProvisionInfo(
                beam_provision_api_pb2.GetProvisionInfoRequest(),
                metadata=[("worker_id", args.id)],
            )
            .info
        )
    env = {
        **os.environ,
        "WORKER_ID": args.id,
        "PIPELINE_OPTIONS": json_format.MessageToJson(info.pipeline_options),
        "CONTROL_API_SERVICE_DESCRIPTOR": descriptor(args.control_endpoint),
        "LOGGING_API_SERVICE_DESCRIPTOR": descriptor(args.logging_endpoint),
        "SEMI_PERSISTENT_DIRECTORY": tempfile.mkdtemp(prefix="beam-worker-"),
        "RUNNER_CAPABILITIES": " ".join(info.runner_capabilities),
    }
    if info.HasField("status_endpoint"):
        env["STATUS_API_SERVICE_DESCRIPTOR"] = text_format.MessageToString(info.status_endpoint)
    command = [sys.executable, "-m", "apache_beam.runners.worker.sdk_worker_main"]
    os.execve(sys.executable, command, env)


if __name__ == "__main__":
    main(sys.argv[1:])
