"""The Kubeflow platform as kubeflow/community-distribution installs it (v1.11.0, 26.03,
26.03.1): the profile namespace's object store prefix, and the rules of `kubeflow-edit`
that every Kubernetes call a step makes must pass (docs/kubeflow-operations.md)."""

from __future__ import annotations

import copy
import sys

import pytest
import yaml

from kubeflow import compile as kfp_compile
from kubeflow import package_dags, package_settings, spec_completion
from kubeflow.kubernetes_api import STEP_CALLS, ApiCall
from kubeflow.settings import parse_settings
from kubeflow.settings.fields import SettingsError
from kubeflow.settings.object_store import launcher_root
from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE
from tests.kubernetes_standin import KubernetesStandin, request_info
from tests.s3_standin import s3_standin, seaweedfs_actions, seaweedfs_allows

NAMESPACE = "kubeflow-user-example-com"
HOME = f"s3://mlpipeline/private-artifacts/{NAMESPACE}/"
RAW_SETTINGS = yaml.safe_load(TEMPLATE_SETTINGS_FILE.read_text())
PACKAGES = ("training", "scoring", "tuning")


def _platform_raw(**changes) -> dict:
    """The template's settings on the platform preset: no roots of their own."""
    raw = copy.deepcopy(RAW_SETTINGS)
    del raw["pipeline_root"], raw["serving_model_dir"]
    raw["object_store"] = {"preset": "kubeflow-platform", "namespace": NAMESPACE}
    raw["parameters"]["data_root"] = f"{HOME}data/chicago_taxi"
    raw["serving"] = {"inference_service": "taxi", "service_account": "kserve-models"}
    for path, value in changes.items():
        target = raw
        *parents, last = path.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value
    return raw


def _platform(**changes):
    return parse_settings(_platform_raw(**changes), package_settings.pipeline_step_ids())


def test_the_preset_puts_every_path_a_package_writes_under_the_namespaces_prefix():
    settings = _platform()
    for package in PACKAGES:
        paths = package_settings.store_paths(settings, package)
        assert paths, package
        for where, path, _ in paths:
            assert path.startswith(HOME), (package, where, path)
        package_settings.check_store_paths(settings, package)
    # Drift statistics go inside each served version, under serving_model_dir.
    assert settings.pipeline_root == f"{HOME}v2/artifacts"
    assert settings.serving_model_dir == f"{HOME}serving"
    assert settings.serving.storage_root == f"{HOME}serving-kserve"
    assert package_dags.scores_root(settings) == f"{HOME}scores"
    # The launcher's own root is the same bucket and key, as minio://.
    assert launcher_root(NAMESPACE) == "minio://" + settings.pipeline_root.removeprefix("s3://")
    store = settings.object_store
    assert store.environment()["AWS_ENDPOINT_URL_S3"] == "http://seaweedfs.kubeflow:8333"
    assert spec_completion.secret_as_env(store)[0]["secretName"] == "mlpipeline-minio-artifact"
    assert [k["secretKey"] for k in spec_completion.secret_as_env(store)[0]["keyToEnv"]] == [
        "accesskey",
        "secretkey",
    ]


def test_the_presets_namespace_is_kfp_namespace_when_not_given_and_must_agree_with_it():
    raw = _platform_raw(**{"kfp.namespace": NAMESPACE})
    del raw["object_store"]["namespace"]
    settings = parse_settings(raw, package_settings.pipeline_step_ids())
    assert settings.object_store.namespace == NAMESPACE == settings.kfp.namespace
    assert settings.pipeline_root == f"{HOME}v2/artifacts"
    other = _platform_raw(**{"kfp.namespace": "team-b"})
    with pytest.raises(SettingsError, match=r"object_store.namespace: .* is not kfp.namespace"):
        parse_settings(other, package_settings.pipeline_step_ids())


def test_the_preset_keeps_roots_set_inside_the_prefixes_the_secret_may_write():
    settings = _platform(
        pipeline_root=f"s3://mlpipeline/private/{NAMESPACE}/tfx",
        serving_model_dir=f"s3://mlpipeline/private/{NAMESPACE}/serving/taxi",
    )
    assert settings.pipeline_root == f"s3://mlpipeline/private/{NAMESPACE}/tfx"
    for package in PACKAGES:
        package_settings.check_store_paths(settings, package)


@pytest.mark.parametrize(
    ("changes", "package", "setting", "path"),
    [
        ({"pipeline_root": "s3://mlpipeline/tfx/taxi"}, "training", "pipeline_root", None),
        (
            {
                "serving_model_dir": "s3://mlpipeline/serving/taxi",
                "serving.storage_root": f"{HOME}serving-kserve",
            },
            "training",
            "serving_model_dir",
            None,
        ),
        (
            {"parameters.data_root": "s3://mlpipeline/private-artifacts/another-team/data"},
            "training",
            "parameters.data_root",
            None,
        ),
        (
            {"serving.storage_root": "s3://mlpipeline/models/taxi"},
            "training",
            "serving.storage_root",
            None,
        ),
        # The scores go beside the serving directory: here one level above the prefix.
        (
            {"serving_model_dir": HOME.rstrip("/"), "serving.storage_root": f"{HOME}kserve"},
            "scoring",
            "serving_model_dir",
            "s3://mlpipeline/private-artifacts/scores",
        ),
        ({"pipeline_root": f"{HOME}../another-team/tfx"}, "training", "pipeline_root", None),
        ({"pipeline_root": "s3://other-bucket/tfx"}, "tuning", "pipeline_root", None),
    ],
)
def test_a_package_whose_paths_leave_the_namespaces_prefix_is_refused_at_compile(
    tmp_path, capsys, changes, package, setting, path
):
    raw = _platform_raw(**changes)
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump(raw))
    out = tmp_path / "pipeline.yaml"
    flags = [] if package == "training" else [f"--{package}"]
    assert kfp_compile.main(["--output", str(out), "--config", str(config), *flags]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {setting}: {path or ''}"), lines[0]
    assert f"namespace {NAMESPACE}'s mlpipeline-minio-artifact secret" in lines[0]
    assert f"Put it under {HOME}" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize(
    ("store", "message"),
    [
        ({"preset": "kubeflow-platform"}, r"^object_store.namespace: required with preset"),
        (
            {"preset": "kubeflow-platform", "namespace": "Team_A"},
            r"^object_store.namespace: 'Team_A' is not a namespace$",
        ),
        (
            {
                "preset": "kubeflow-platform",
                "namespace": NAMESPACE,
                "credentials": {"secret": "s", "access_key_id_key": "a"},
            },
            r"^object_store.credentials: the kubeflow-platform preset uses the namespace's own "
            r"mlpipeline-minio-artifact secret",
        ),
        ({"preset": "kubeflow"}, r"^object_store.preset: must be 'kubeflow-platform'"),
        (
            {"preset": "kubeflow-platform", "namespace": NAMESPACE, "bucket": "x"},
            r"^object_store: unknown field\(s\) \['bucket'\]",
        ),
        (
            {"preset": "kubeflow-platform", "namespace": NAMESPACE, "endpoint": "seaweedfs:8333"},
            r"^object_store.endpoint: 'seaweedfs:8333' is not http\(s\)://HOST",
        ),
    ],
)
def test_preset_errors_name_the_field(store, message):
    with pytest.raises(SettingsError, match=message):
        _platform(object_store=store)


def test_the_compile_says_which_root_a_run_really_uses():
    note = kfp_compile.pipeline_root_note(_platform())
    assert note.startswith(f"pipeline root {HOME}v2/artifacts: the backend ignores")
    assert (
        f"namespace {NAMESPACE}'s kfp-launcher ConfigMap's defaultPipelineRoot, "
        f"minio://mlpipeline/private-artifacts/{NAMESPACE}/v2/artifacts" in note
    )
    # Without the preset, the platform's value is named with a placeholder.
    plain = parse_settings(RAW_SETTINGS, package_settings.pipeline_step_ids())
    assert "minio://mlpipeline/private-artifacts/NAMESPACE/v2/artifacts" in (
        kfp_compile.pipeline_root_note(plain)
    )


# --- permissions: every Kubernetes call a step makes, against kubeflow-edit -----------------

ROLES_FILE = REPO_ROOT / "tests" / "data" / "kubeflow_edit_roles.yaml"
RELEASES = ("v1.11.0", "26.03", "26.03.1")
TRAINING_OPERATOR = "training-operator"


def _roles(release: str, extra: tuple[str, ...] = ()) -> dict[str, dict]:
    """The ClusterRoles a release installs by default (and `extra` components), each with
    the rules it has at that release."""
    data = yaml.safe_load(ROLES_FILE.read_text())
    installed = set(data["installed_by_default"]) | set(extra)
    return {
        role["name"]: {
            **role,
            "rules": [r for r in role["rules"] if release in r.get("releases", RELEASES)],
        }
        for role in data["roles"]
        if role["component"] in installed
    }


def _aggregated(name: str, roles: dict[str, dict], seen: frozenset = frozenset()) -> list:
    """(role, rule) for every rule `name` holds once aggregated: its own, and those of
    every ClusterRole carrying a label its aggregationRule selects, transitively."""
    role = roles[name]
    rules = [(name, rule) for rule in role["rules"]]
    for other in sorted(roles):
        if other not in seen | {name} and set(roles[other].get("labels", ())) & set(
            role.get("aggregates", ())
        ):
            rules += _aggregated(other, roles, seen | {name})
    return rules


def _matches(rule: dict, verb: str, group: str, resource: str) -> bool:
    """RBAC's match of one rule (kubernetes pkg/apis/rbac/v1/evaluation_helpers.go at
    03bf11a: VerbMatches L31-41, APIGroupMatches L44-54, ResourceMatches L57-83, where
    `*/SUBRESOURCE` matches any resource's subresource)."""
    subresource = resource.partition("/")[2]
    return (
        any(v in ("*", verb) for v in rule["verbs"])
        and any(g in ("*", group) for g in rule["apiGroups"])
        and any(
            r in ("*", resource) or (subresource and r == f"*/{subresource}")
            for r in rule["resources"]
        )
    )


def allowed_by(release: str, verb: str, group: str, resource: str, extra=()) -> list[str]:
    """The roles whose rules, aggregated into kubeflow-edit, allow the call."""
    return sorted(
        {
            role
            for role, rule in _aggregated("kubeflow-edit", _roles(release, extra))
            if _matches(rule, verb, group, resource)
        }
    )


def allowed_to_default_editor(release: str, verb: str, group: str, resource: str, extra=()):
    """kubeflow-edit's roles, and the roles bound to every authenticated user (a
    ClusterRoleBinding to system:authenticated), which default-editor has too."""
    roles = _roles(release, extra)
    bound = {
        name
        for name, role in roles.items()
        if role.get("bound_to_every_authenticated_user")
        and any(_matches(rule, verb, group, resource) for rule in role["rules"])
    }
    return sorted(set(allowed_by(release, verb, group, resource, extra)) | bound)


def _call_id(call: ApiCall) -> str:
    return f"{call.step}:{call.verb}:{call.group or 'core'}/{call.resource}"


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("call", STEP_CALLS, ids=_call_id)
def test_each_kubernetes_call_a_step_makes_is_allowed_to_kubeflow_edit(release, call):
    if call.needs == "Training Operator":
        # Allowed only where the Training Operator is installed, which no release does.
        assert not allowed_by(release, call.verb, call.group, call.resource)
        extra = (TRAINING_OPERATOR,)
    else:
        extra = ()
    assert allowed_to_default_editor(release, call.verb, call.group, call.resource, extra), (
        _call_id(call)
    )


@pytest.mark.parametrize(
    ("verb", "group", "resource"),
    [
        ("create", "", "nodes"),
        ("create", "rbac.authorization.k8s.io", "rolebindings"),  # kubeflow-admin's only
        ("update", "serving.kserve.io", "inferenceservices/status"),
        ("patch", "kubeflow.org", "tfjobs"),  # Training Operator not installed
        ("list", "trainer.kubeflow.org", "clustertrainingruntimes"),  # bound apart
        ("impersonate", "", "serviceaccounts"),  # v1.11.0 only
    ],
)
def test_a_call_no_kubeflow_edit_rule_allows_is_refused(verb, group, resource):
    assert not allowed_by("26.03.1", verb, group, resource)
    if resource == "serviceaccounts":
        assert allowed_by("v1.11.0", verb, group, resource) == ["kubeflow-kubernetes-edit"]


def test_the_conformance_table_names_each_call_and_a_role_that_allows_it():
    """docs/kubeflow-operations.md: one row per call in STEP_CALLS, its role among those
    whose rules allow it at every release."""
    text = (REPO_ROOT / "docs" / "kubeflow-operations.md").read_text()
    section = text.split("## Permissions on the Kubeflow platform", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[1] not in ("verb", "---"):
            step, verb, group, resource, role, _ = cells
            rows[(step, verb, "" if group == "core" else group, resource)] = role
    declared = {(c.step, c.verb, c.group, c.resource): c for c in STEP_CALLS}
    assert set(rows) == set(declared)
    for key, role in rows.items():
        call = declared[key]
        extra = (TRAINING_OPERATOR,) if call.needs else ()
        for release in RELEASES:
            allowed = allowed_to_default_editor(
                release, call.verb, call.group, call.resource, extra
            )
            assert role in allowed, key


@pytest.mark.parametrize(
    ("method", "url", "info"),
    [
        ("GET", "/api/v1/namespaces/ns/pods/p", ("get", "", "pods", "ns")),
        ("GET", "/api/v1/namespaces/ns/pods?labelSelector=a%3Db", ("list", "", "pods", "ns")),
        ("GET", "/api/v1/namespaces/ns/pods?watch=true", ("watch", "", "pods", "ns")),
        ("GET", "/api/v1/namespaces/ns/pods/p/log?follow=true", ("get", "", "pods/log", "ns")),
        ("DELETE", "/api/v1/namespaces/ns/pods", ("deletecollection", "", "pods", "ns")),
        (
            "PATCH",
            "/apis/serving.kserve.io/v1beta1/namespaces/ns/inferenceservices/m",
            ("patch", "serving.kserve.io", "inferenceservices", "ns"),
        ),
        (
            "POST",
            "/apis/kubeflow.org/v1/namespaces/ns/tfjobs",
            ("create", "kubeflow.org", "tfjobs", "ns"),
        ),
        ("POST", "/serving/ns/m/v1/models/m:predict", None),
    ],
)
def test_the_kubernetes_stand_in_names_each_request_as_rbac_does(method, url, info):
    assert request_info(method, url) == info


def test_the_kubernetes_stand_in_refuses_a_call_no_step_declares():
    import urllib.error
    import urllib.request

    standin = KubernetesStandin(sys.executable)
    with (
        pytest.raises(
            AssertionError, match=r"calls no step declares: \[\('get', '', 'configmaps'\)\]"
        ),
        standin,
    ):
        url = f"{standin.url}/api/v1/namespaces/ns/configmaps/kfp-launcher"
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url, timeout=5)
    # A declared call passes.
    with KubernetesStandin(sys.executable) as standin, pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"{standin.url}/api/v1/namespaces/ns/pods/p", timeout=5)
    assert standin.requests == [("get", "", "pods", "ns")]


# --- the object store: what the namespace's SeaweedFS user may do ---------------------------


def _namespace_policy(namespace: str) -> dict:
    """The policy Kubeflow's profile controller gives the namespace's SeaweedFS user
    (pipelines-profile-controller/sync.py L356-377 at v1.11.0, L388-409 at 26.03)."""
    resources = [
        f"arn:aws:s3:::mlpipeline/{prefix}*"
        for prefix in (
            "artifacts/",
            f"private-artifacts/{namespace}/",
            f"private/{namespace}/",
            "shared/",
        )
    ]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:Put*", "s3:Get*", "s3:List*"], "Resource": resources}
        ],
    }


def test_the_preset_prefixes_are_what_the_namespaces_seaweedfs_user_may_write():
    actions = seaweedfs_actions(_namespace_policy(NAMESPACE))
    store = _platform().object_store
    for prefix in store.writable_prefixes:
        bucket, key = prefix.removeprefix("s3://").split("/", 1)
        assert seaweedfs_allows(actions, "Write", bucket, f"{key}model/saved_model.pb")
    assert not seaweedfs_allows(actions, "Write", "mlpipeline", "serving/taxi/1/saved_model.pb")
    other = "private-artifacts/another-team/v2/artifacts/x"
    assert not seaweedfs_allows(actions, "Read", "mlpipeline", other)
    assert store.outside_prefixes(f"s3://mlpipeline/{other}")


def test_the_steps_store_check_lists_only_where_the_namespaces_user_may(monkeypatch):
    """Every step lists each bucket it uses before it starts (pipeline/object_store.py,
    check_reachable); on the platform a list of the whole bucket is refused."""
    from pipeline import object_store

    sent: list[tuple[str, dict]] = []
    real_client = object_store.s3_client

    def recording_client():
        client = real_client()
        client.meta.events.register(
            "before-parameter-build.s3",
            lambda model, params, **_: sent.append((model.name, dict(params))),
        )
        return client

    actions = seaweedfs_actions(_namespace_policy(NAMESPACE))
    with s3_standin() as store:
        store.client().create_bucket(Bucket="mlpipeline")
        for name, value in {
            "AWS_ENDPOINT_URL_S3": store.endpoint,
            "AWS_ACCESS_KEY_ID": store.access_key_id,
            "AWS_SECRET_ACCESS_KEY": store.secret_access_key,
            "AWS_DEFAULT_REGION": store.region,
        }.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(object_store, "s3_client", recording_client)
        object_store.check_reachable(
            [f"{HOME}v2/artifacts/taxi/run-1/Transform/transform_graph", f"{HOME}data/taxi"]
        )
    lists = [params for operation, params in sent if operation == "ListObjectsV2"]
    assert [(p["Bucket"], p.get("Prefix"), p["MaxKeys"]) for p in lists] == [
        ("mlpipeline", f"private-artifacts/{NAMESPACE}/data/taxi", 1)
    ]
    for params in lists:
        assert seaweedfs_allows(actions, "List", params["Bucket"], params.get("Prefix", ""))
    # The list of the whole bucket the check used to send.
    assert not seaweedfs_allows(actions, "List", "mlpipeline", "")


@pytest.mark.slow  # compiles the training package through TFX
def test_every_store_path_in_the_compiled_package_is_under_the_namespaces_prefix():
    import re

    settings = _platform()
    spec, platform = kfp_compile.compile_pipeline(settings)
    assert spec["defaultPipelineRoot"] == f"{HOME}v2/artifacts"
    text = yaml.safe_dump_all([spec, platform])
    uris = set(re.findall(r"s3://[^\s\"'\\,}]+", text))
    assert f"{HOME}serving" in uris  # the Pusher's, the drift gate's, the baseline's
    assert any(u.startswith(f"{HOME}serving-kserve") for u in uris)  # the Deploy step's
    assert uris and all(u.startswith(HOME) for u in uris), sorted(uris)
    secrets = [
        entry["secretName"]
        for executor in platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"].values()
        for entry in executor.get("secretAsEnv", [])
    ]
    assert secrets and set(secrets) == {"mlpipeline-minio-artifact"}
