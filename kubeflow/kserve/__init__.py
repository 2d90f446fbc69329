"""Serving on KServe: the Deploy step takes a pushed version to an InferenceService.

* manifest.py     the InferenceService (serving.kserve.io/v1beta1), its patches, and its status
* serving_runtime.py  the TF Serving release (`runtimeVersion`) that loads the exported model
* credentials.py  the predictor's S3 credentials, checked as KServe reads them
* cluster.py      the Kubernetes API calls the step makes
* layout.py       the per-version base path each version is served from
* smoke.py        the smoke request: eval rows through the JSON signature, checked
* rollout.py      create, or 0%, smoke request, canary, promote; or roll back; the outcome
"""
