"""Beam's worker pool on a port the kernel picks, its address written to a file.

`worker_pool_main` takes only a port to bind and does not say which one it got
for port 0, so a test would have to probe a free port and hand it over, racing
any other process for it. This starts the same servicer (what the sidecar of a
Flink task manager runs) on port 0 and writes `localhost:PORT` to the file named
by the first argument, atomically, once it is serving.

    python -m tests.beam_worker_pool ADDRESS_FILE CONTAINER_EXECUTABLE
"""

from __future__ import annotations

import os
import sys
import time

from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer


def main(address_file: str, container_executable: str) -> None:
    address, server = BeamFnExternalWorkerPoolServicer.start(
        use_process=True, port=0, container_executable=container_executable
    )
    with open(address_file + ".tmp", "w") as f:
        f.write(address)
    os.rename(address_file + ".tmp", address_file)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
