"""The Trainer on Kubeflow's Training Operator: one step hands training to a TFJob and waits.

The TFJob (kubeflow.org/v1, training-operator release-1.9) has a Chief and
workers; each replica runs the stock TFX Trainer's `run_fn` with the step's
own inputs under `multi_worker_mirrored` (replica.py). The step's pod
creates the job, streams the Chief's log, waits, and deletes the job when it
fails, times out or the run is cancelled (job.py, executor.py).

* component.py TFJobTrainer: TFX's Trainer with the executor below
* spec.py      what the compile fixes: image, replicas, placement, run policy
* manifest.py  the TFJob object, as the operator's CRD and webhook take it
* cluster.py   the few Kubernetes API calls the step makes
* job.py       create, stream, wait, clean up, explain a failure
* executor.py  the TFX executor of the Trainer step
* replica.py   what each replica's container runs
"""
