"""Serving on KServe: the Deploy step takes a pushed version to an InferenceService.

* manifest.py  the InferenceService (serving.kserve.io/v1beta1) and how to read its status
* cluster.py   the Kubernetes API calls the step makes
* layout.py    the per-version base path each version is served from
* smoke.py     the smoke request: eval rows through the JSON signature, checked
* rollout.py   create, canary, promote or roll back; the step's outcome
"""
