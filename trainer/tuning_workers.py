"""KerasTuner's chief/worker protocol, for a search that runs its trials in parallel.

The chief serves the search's oracle with KerasTuner's own gRPC servicer
(`serve_workers`); a worker is a process that three environment variables make
a KerasTuner worker of that chief (`worker_environment`), which asks it for
trials until none are left. `local_workers` starts them on this machine, asking
on 127.0.0.1; the Kubeflow tuning step's are pods (kubeflow/tuning/pods.py).
Each worker runs trainer/tuning.py's `worker_main` on the job file the chief
writes into the search's directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

# KerasTuner's distributed tuning reads these (keras_tuner/src/distribute/utils.py, 1.4.8).
ORACLE_IP = "KERASTUNER_ORACLE_IP"
ORACLE_PORT = "KERASTUNER_ORACLE_PORT"
TUNER_ID = "KERASTUNER_TUNER_ID"
WORKER_JOB_FILE = "worker_job.json"
# What a worker exits with when the deadline stopped its search.
EXIT_DEADLINE = 3


def worker_environment(oracle_ip: str, oracle_port: int, index: int) -> dict[str, str]:
    """What KerasTuner reads to make a process worker `index` of the chief at ip:port."""
    return {ORACLE_IP: oracle_ip, ORACLE_PORT: str(oracle_port), TUNER_ID: f"tuner{index}"}


def local_workers(job_file: str, oracle_ip: str, oracle_port: int, workers: int) -> list[int]:
    """Runs `workers` worker processes on this machine; returns their exit codes."""
    import subprocess
    import sys

    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "trainer.tuning", job_file],
            env=os.environ | worker_environment(oracle_ip, oracle_port, i),
        )
        for i in range(workers)
    ]
    try:
        return [process.wait() for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()


# Starts the workers of the chief at (ip, port) on the job file, waits; their exit codes.
WorkerLauncher = Callable[[str, str, int, int], list[int]]


def serve_workers(
    oracle,
    workers: int,
    job: Mapping[str, Any],
    directory: str,
    *,
    launch: WorkerLauncher = local_workers,
    bind: str = "127.0.0.1",
    advertise: str = "127.0.0.1",
) -> bool:
    """Serves `oracle` with KerasTuner's own gRPC servicer on `bind` while `workers`
    KerasTuner workers (`launch`: local processes, or pods on Kubeflow) run trials, asking
    it at `advertise`; returns whether the deadline stopped one. `job`: what each worker
    builds its tuner from, written as JSON into the search's `directory`.

    KerasTuner's chief (`KERASTUNER_TUNER_ID=chief`) would serve until a
    worker is told the budget is spent, and so wait forever for workers a
    deadline or a crash ended; here the server stops when the workers have.
    """
    import json
    from concurrent import futures

    import grpc
    import tensorflow as tf

    # The servicer KerasTuner's chief serves (keras_tuner/src/distribute/oracle_chief.py,
    # 1.4.8): its workers' OracleClient speaks to exactly this.
    from keras_tuner.src import protos
    from keras_tuner.src.distribute.oracle_chief import OracleServicer

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    protos.get_service_grpc().add_OracleServicer_to_server(OracleServicer(oracle), server)
    port = server.add_insecure_port(f"{bind}:0")
    server.start()
    # The search's directory may be on an object store (the Kubeflow tuning step's).
    job_file = f"{directory.rstrip('/')}/{WORKER_JOB_FILE}"
    with tf.io.gfile.GFile(job_file, "w") as f:
        f.write(json.dumps(job))
    try:
        codes = launch(job_file, advertise, port, workers)
    finally:
        server.stop(grace=None)
        # The oracle saves its state before it drops a trial that ended from its
        # ongoing ones (Oracle.end_trial, keras-tuner 1.4.8); KerasTuner's sequential
        # tuner saves again after, a worker does not save the chief's oracle. Without
        # this save a resumed search would run the last trial again.
        oracle.save()
    failed = [
        f"tuner{i} exited {code}" for i, code in enumerate(codes) if code not in (0, EXIT_DEADLINE)
    ]
    if failed:
        raise RuntimeError(f"tuning workers failed: {', '.join(failed)}; their logs are above")
    return EXIT_DEADLINE in codes
