"""What each replica of the Trainer's TFJob runs (training.engine tfjob).

    python -m kubeflow.tfjob.replica --inputs JSON --outputs JSON --exec-properties JSON

The Trainer step (kubeflow/tfjob/executor.py) hands every replica
its own inputs, outputs and execution properties. Each replica rebuilds the
same `fn_args` as the stock TFX Trainer executor would (the examples, the
Transform graph, the schema, the train and eval steps, the custom config)
and calls the same `run_fn`. TF_CONFIG, which the Training Operator injects,
makes `run_fn` train under `multi_worker_mirrored`: the Chief exports the
model to the Trainer's output URI, the workers to scratch space in their pod.
"""

from __future__ import annotations

import argparse
import json
import logging as std_logging
import sys
import traceback

from kubeflow.tfjob.executor import EXEC_PROPERTIES_FLAG, INPUTS_FLAG, OUTPUTS_FLAG
from pipeline import object_store


def train(inputs: str, outputs: str, exec_properties: str) -> None:
    from absl import logging
    from tfx.components.trainer import executor as trainer_executor
    from tfx.components.util import udf_utils
    from tfx.types import artifact_utils

    # The replica's log is what the step streams (the Chief's) and what a
    # failure shows: the Trainer's own INFO lines (strategy, epochs) belong in it.
    logging.set_verbosity(logging.INFO)
    std_logging.getLogger().setLevel(std_logging.INFO)
    input_dict = artifact_utils.parse_artifact_dict(inputs)
    output_dict = artifact_utils.parse_artifact_dict(outputs)
    properties = json.loads(exec_properties)
    executor = trainer_executor.GenericExecutor()
    fn_args = executor._GetFnArgs(input_dict, output_dict, properties)
    run_fn = udf_utils.get_fn(properties, "run_fn")
    logging.info("Training model on this replica.")
    run_fn(fn_args)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(INPUTS_FLAG, required=True)
    parser.add_argument(OUTPUTS_FLAG, required=True)
    parser.add_argument(EXEC_PROPERTIES_FLAG, required=True)
    args = parser.parse_args(argv)
    object_store.register_filesystems()
    try:
        train(args.inputs, args.outputs, args.exec_properties)
        code = 0
    except Exception:
        traceback.print_exc()
        code = 1
    object_store.exit_process(code)


if __name__ == "__main__":
    main(sys.argv[1:])
