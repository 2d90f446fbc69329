"""The names a TrainJob's pods get, ported from Trainer v2's and JobSet's source.

Each rule cites the tag, file and line it comes from; tests/test_trainjob.py
checks TF_CONFIG and the stand-in's pods against these, and the stand-in
(tests/trainjob_standin.py) names its pods with them. The same rules hold at
Trainer v2.1.0 / JobSet v0.10.1 and Trainer v2.2.0 / JobSet v0.11.0.

This module imports nothing heavy: the node's container reads it before
TensorFlow starts.

Port register: docs/ports.md
"""

from __future__ import annotations

import re

# Trainer's name for the replicated job and the container of the training nodes
# (kubeflow/trainer v2.1.0 pkg/constants/constants.go L52-53, `Node = "node"`),
# found by this label on the replicated job's template (L20-25, L48-50).
NODE = "node"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
# Trainer forces every replicated job of the trainer to one Job
# (pkg/runtime/framework/plugins/jobset/builder.go v2.1.0 L120-123), so the
# nodes are the pods of Job index 0.
JOB_INDEX = 0
# The JobSet is named as the TrainJob (jobset.go v2.1.0 L284; v2.2.0 the same).
# Labels JobSet puts on each child Job and its pods (jobset api/jobset/v1alpha2/
# jobset_types.go v0.10.1 L23-35; controller labelAndAnnotateObject,
# pkg/controllers/jobset_controller.go v0.10.1 L765-797).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
# Kubernetes' Job controller: the completion index of an Indexed Job's pod, as an
# annotation and, in every container, the JOB_COMPLETION_INDEX variable (batch/v1
# types, JobCompletionIndexAnnotation; Trainer reads the same annotation,
# pkg/constants/constants.go v2.1.0 L213-214).
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# The random suffix the Job controller adds to a pod's name, as JobSet's webhook
# counts it when it checks the longest pod name (jobset_webhook.go v0.10.1 L235-236).
_POD_SUFFIX = "-abcde"


def job_name(jobset: str, replicated_job: str, job_index: int) -> str:
    """JobSet's child Job: placement.GenJobName (pkg/util/placement/placement.go v0.10.1
    L14-16, v0.11.0 L15)."""
    return f"{jobset}-{replicated_job}-{job_index}"


def pod_hostname(jobset: str, replicated_job: str, job_index: int, pod_index: int) -> str:
    """A node's hostname: placement.GenPodName (placement.go v0.10.1 L20-22, v0.11.0 L21),
    which is the Indexed Job's `<job name>-<completion index>` hostname."""
    return f"{jobset}-{replicated_job}-{job_index}-{pod_index}"


def subdomain(jobset: str, network_subdomain: str | None = None) -> str:
    """The headless service the pods sit under: spec.network.subdomain, else the JobSet's
    name (GetSubdomain, jobset_controller.go v0.10.1 L835-842; the service of that name,
    ClusterIP None, selecting the JobSet's pods, L625-646; Trainer the same,
    jobset.go v2.1.0 L216-219, v2.2.0 L229-231)."""
    return network_subdomain or jobset


def node_address(trainjob: str, namespace: str, pod_index: int, port: int) -> str:
    """Where node `pod_index` of `trainjob` listens: `<hostname>.<subdomain>.<ns>.svc:port`.

    Trainer's own endpoints are `<trainjob>-<rjob>-0-<i>.<subdomain>` (IdentifyPodNetwork,
    jobset.go v2.1.0 L227, v2.2.0 L240); the namespace and `svc` make the name
    resolve from any namespace's search path, as the TFJob's do.
    """
    host = pod_hostname(trainjob, NODE, JOB_INDEX, pod_index)
    return f"{host}.{subdomain(trainjob)}.{namespace}.svc:{port}"


def longest_pod_name(trainjob: str, nodes: int) -> str:
    """The longest pod name the JobSet will create, as its webhook checks it."""
    return pod_hostname(trainjob, NODE, JOB_INDEX, nodes - 1) + _POD_SUFFIX


def name_problem(trainjob: str, nodes: int) -> str | None:
    """Why Trainer or JobSet would refuse `trainjob` as a name, or None.

    Trainer's CRD: an RFC 1035 label of at most 63 characters (trainjob_types.go
    v2.1.0 L37-38). JobSet's webhook: the longest child Job name and pod name must be
    DNS-1035 labels too (jobset_webhook.go v0.10.1 L221-243).
    """
    for what, name in (
        ("TrainJob name", trainjob),
        ("JobSet's Job name", job_name(trainjob, NODE, JOB_INDEX)),
        ("JobSet's pod name", longest_pod_name(trainjob, nodes)),
    ):
        if len(name) > 63 or not _DNS_1035.match(name):
            return f"{what} {name!r} is not a DNS-1035 label of at most 63 characters"
    return None
