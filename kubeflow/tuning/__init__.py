"""The tuning package's step: KerasTuner's chief in the step's pod, its workers in pods.

`python -m kubeflow.compile --tuning` compiles the training DAG's steps up to
Transform, then Tune (component.py): the step's pod serves the oracle with
trainer/tuning_workers.py's `serve_workers`, as `tune_runner.py --parallel K` does
on loopback, and starts K worker pods (pods.py) instead of processes, each
with `KERASTUNER_ORACLE_IP/PORT` and `KERASTUNER_TUNER_ID`. The search's
directory is on the object store, keyed by the data's fingerprint and the
search space's digest, so a retried step resumes its oracle (docs/tuning.md).

* spec.py       what the compile fixes: image, workers, budget, the pods' placement
* pods.py       the worker pods, and the few Kubernetes API calls the step makes
* component.py  the Tune step; its output, the frozen hyperparameters file
* worker.py     what each worker pod runs
"""
