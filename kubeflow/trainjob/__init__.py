"""The Trainer on Kubeflow Trainer v2: one step hands training to a TrainJob and waits.

Trainer v2 (trainer.kubeflow.org/v1alpha1, v2.1.0 and v2.2.0, the trainer the
Kubeflow platform installs from v1.11.0) ships no TensorFlow runtime. The
template ships one (manifest.py; `python -m kubeflow.compile
--training-runtime` writes it): a runtime with no ML policy, which Trainer
runs through its PlainML plugin, over a JobSet of one replicated job,
`node`, of N pods. Each pod builds its own TF_CONFIG from the JobSet's names
and its completion index (tf_config.py) and runs the stock Trainer's
`run_fn` (kubeflow/tfjob/replica.py) under `multi_worker_mirrored`. The
step's pod checks the runtime, creates the TrainJob, streams node 0's log,
waits and deletes the job when it fails, times out or the run is cancelled
(kubeflow/training_job.py, shared with the TFJob engine).

* naming.py    the JobSet's and Trainer's naming rules, ported with their source
* tf_config.py TF_CONFIG from what a node's pod has
* node.py      what each node's container runs
* spec.py      what the compile fixes: image, nodes, runtime, port
* manifest.py  the TrainJob and the runtime, as Trainer v2's CRDs take them
* cluster.py   the few Kubernetes API calls the step makes
* job.py       the TrainJob's part of the shared wait loop
* executor.py  the TFX executor of the Trainer step; component.py its component
"""
