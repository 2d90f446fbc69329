"""Local execution: how `python local_runner.py` runs the DAG on this machine.

* run.py           `run_local(LocalRunOptions)`: checks, the run lock, the DAG, summary, report
* scheduler.py     the DAG in TFX's IR, run node by node, two at a time where it branches
* node_process.py  the second process that runs one node while this one runs another
* node_launch.py   one node through TFX's own launcher, in either process
* run_lock.py      one run per output directory
* run_summary.py   the run's report, read back from ML Metadata, and its closing summary
* watch.py         `--watch`: a warm process that forks a clean run on every change

Kubeflow runs the same DAG (`create_pipeline`) as a compiled spec instead.
"""
