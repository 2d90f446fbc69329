"""The TrainJob stand-in's name resolution: what a cluster's DNS does for a JobSet's pods.

    python -m tests.trainjob_dns -m kubeflow.trainjob.node ARGS...

tests/trainjob_standin.py starts each node's container through this module.
The node's TF_CONFIG is built as on a cluster (kubeflow/trainjob/tf_config.py,
from the pod's env); here every address in it is then looked up in
STANDIN_DNS, the stand-in's table of `<hostname>.<subdomain>.<ns>.svc:<port>`
for each pod of the JobSet, and replaced by the pod's loopback port. A name
the JobSet did not give a pod (or a port its container does not declare)
fails the node at once: no run waits on a peer that does not exist.
"""

from __future__ import annotations

import json
import os
import runpy
import sys

from kubeflow.trainjob import tf_config as built

_as_on_a_cluster = built.tf_config


def resolved(env):
    config = _as_on_a_cluster(env)
    print(f"TF_CONFIG as built {json.dumps(config, sort_keys=True)}", flush=True)
    table = json.loads(os.environ["STANDIN_DNS"])
    workers = []
    for address in config["cluster"]["worker"]:
        if address not in table:
            sys.stderr.write(
                f"error: TF_CONFIG names {address}, which no pod of the JobSet has "
                f"(its pods: {sorted(table)})\n"
            )
            sys.exit(3)
        workers.append(table[address])
    return {**config, "cluster": {"worker": workers}}


def main(argv: list[str]) -> None:
    if argv[:1] != ["-m"] or len(argv) < 2:
        sys.exit("usage: python -m tests.trainjob_dns -m MODULE ARGS...")
    module, args = argv[1], argv[2:]
    built.tf_config = resolved
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
