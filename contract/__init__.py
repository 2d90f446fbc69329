"""What a user's files declare, and how they are read: the ground floor.

`dataset/` is the dataset contract, a spec's `dataset.yaml` (the label and its
task, each feature's encoding, the input files and their span pattern, the
thresholds), and `fields.py` the kit it and the Kubeflow settings
(kubeflow/settings/) read a user's file with, every error naming the field.
Pure Python and the lowest layer (pyproject.toml's import-linter contract): it
imports nothing of the project above it, so a runner checks a file, and a light
step reads the spec, before anything heavy is imported.
"""
