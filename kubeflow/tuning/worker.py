"""What each worker pod of the Tune step runs: a KerasTuner worker on the job file.

    python -m kubeflow.tuning.worker s3://.../worker_job.json

trainer/tuning.py's worker, with the object store's filesystems registered
first: the job file and the search's directory are on it.
"""

from __future__ import annotations

import sys

from pipeline import object_store


def main(argv: list[str]) -> None:
    from trainer.tuning import worker_main

    object_store.register_filesystems()
    object_store.exit_process(worker_main(argv[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
