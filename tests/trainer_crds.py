"""Kubeflow Trainer v2's CRD schemas, as much of them as the template's manifests touch.

    python -m tests.trainer_crds /work/.mirror/kubeflow+trainer/repo   # rewrites the excerpts

The excerpts (tests/golden/trainer_crds/<tag>.json) are derived, not copied:
for each CRD (manifests/base/crds/trainer.kubeflow.org_<plural>.yaml at the
tag), the openAPIV3Schema walked along the paths the template's TrainJob and
runtimes use, keeping at every node it reaches its type, required fields,
enums, bounds, patterns, int-or-string marks and CEL rules, and the *names*
of all its properties (so an unknown or misspelt field is caught). A field a
manifest starts to use that the excerpt has not walked fails the check and
says to rerun this module against a fetched github:kubeflow/trainer.

`errors(manifest, schema)` is the structural check the API server applies to
a custom resource (unknown fields, types, required, enums, bounds, patterns);
the CEL rules are not evaluated here, but each rule met on the way must be
one `KNOWN_RULES` names, with where the template keeps it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

TAGS = ("v2.1.0", "v2.2.0")
PLURALS = ("trainjobs", "clustertrainingruntimes", "trainingruntimes")
EXCERPTS = Path(__file__).parent / "golden" / "trainer_crds"
CRD_PATH = "manifests/base/crds/trainer.kubeflow.org_{plural}.yaml"
_KEEP = (
    "type", "required", "enum", "format", "minimum", "maximum", "minLength", "maxLength",
    "minItems", "maxItems", "pattern", "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
)  # fmt: skip
# Every CEL rule on the walked paths, and what keeps the template's manifests within it.
KNOWN_RULES = {
    # TrainJob, trainjob_types.go v2.1.0 L37-38: kubeflow/trainjob/naming.py name_problem.
    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')": "naming.name_problem",
    "size(self.metadata.name) <= 63": "naming.name_problem",
    # Immutability on update: the step never updates a TrainJob.
    "self == oldSelf": "never updated",
    # TrainJob spec.managedBy (trainjob_types.go v2.1.0 L143): the template sets none, the
    # CRD defaults it to the controller; tests/trainjob_standin.py checks the rule.
    "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']": "stand-in",
    # The JobSet template: the runtime sets no startupPolicy (JobSet defaults AnyOrder).
    "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
    "self.replicatedJobs.exists(x, has(x.dependsOn)))": "no startupPolicy",
}


def _rules(schema: dict[str, Any]) -> list[str]:
    return [v["rule"] for v in schema.get("x-kubernetes-validations", [])]


def excerpt(schema: dict[str, Any], values: Sequence[Any]) -> dict[str, Any]:
    """`schema` cut down to what `values` (the instances at this node) reach."""
    node = {key: schema[key] for key in _KEEP if key in schema}
    if _rules(schema):
        node["rules"] = _rules(schema)
    objects = [v for v in values if isinstance(v, dict)]
    if "properties" in schema:
        node["properties"] = {
            name: (
                excerpt(sub, [o[name] for o in objects if name in o])
                if any(name in o for o in objects)
                else None
            )
            for name, sub in sorted(schema["properties"].items())
        }
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        node["additionalProperties"] = excerpt(extra, [v for o in objects for v in o.values()])
    elif extra is not None:
        node["additionalProperties"] = extra
    if "items" in schema:
        lists = [v for v in values if isinstance(v, list)]
        node["items"] = excerpt(schema["items"], [item for lst in lists for item in lst])
    return node


_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def errors(value: Any, schema: dict[str, Any] | None, path: str = "") -> list[str]:
    """Where `value` breaks the excerpt `schema`; [] when it is valid."""
    where = path or "<root>"
    if schema is None:
        return [f"{where}: the excerpt has not walked this field: python -m tests.trainer_crds"]
    found: list[str] = []
    found += [f"{where}: CEL rule {rule!r} unchecked" for rule in schema.get("rules", [])
              if rule not in KNOWN_RULES]  # fmt: skip
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            return [*found, f"{where}: must be an integer or a string, got {value!r}"]
    elif "type" in schema:
        expected = _TYPES[schema["type"]]
        wrong_bool = isinstance(value, bool) and schema["type"] in ("integer", "number")
        if not isinstance(value, expected) or wrong_bool:
            return [*found, f"{where}: must be of type {schema['type']}, got {value!r}"]
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: Unsupported value {value!r}: supported values {schema['enum']}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        found.append(f"{where}: must be >= {schema['minimum']}, got {value}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            found.append(f"{where}: must be at least {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            found.append(f"{where}: must be at most {schema['maxLength']} characters")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(f"{where}: {value!r} does not match {schema['pattern']!r}")
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                found.append(f"{where}.{name}: Required value")
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for name, sub in value.items():
            child = f"{path}.{name}" if path else name
            if properties is not None and name in properties:
                found += errors(sub, properties[name], child)
            elif isinstance(extra, dict):
                found += errors(sub, extra, child)
            elif properties is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                found.append(f'{child}: unknown field "{name}"')
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += errors(item, schema["items"], f"{path}[{i}]")
    return found


def load(tag: str) -> dict[str, dict[str, Any]]:
    """The committed excerpts of `tag`: plural -> schema."""
    return json.loads((EXCERPTS / f"{tag}.json").read_text())["schemas"]


DIGEST_IMAGE = "registry.example.com/taxi@sha256:" + "0" * 64


def template_spec():
    """The template's `training.trainjob`, with MinIO's env (a secret ref among it)."""
    import dataclasses

    from kubeflow import package_dags
    from tests.harness import MINIO, multi_node_settings

    changes = {**MINIO, "parameters.data_root": "s3://mlpipeline/data"}
    settings = multi_node_settings("trainjob", **changes)
    return dataclasses.replace(package_dags.trainjob_spec(settings), image=DIGEST_IMAGE)


def template_manifests() -> dict[str, list[dict[str, Any]]]:
    """The manifests the excerpts are walked along: every field the template sets."""
    from kubeflow.trainjob.manifest import runtime_manifest, trainjob_manifest

    spec = template_spec()
    job = trainjob_manifest(
        spec, name="trainer-0123456789ab", namespace="team-a", args=["--inputs", "{}"],
        labels={"pipeline/runid": "run-1"}, annotations={"a": "b"},
    )  # fmt: skip
    namespaced = runtime_manifest(
        __import__("dataclasses").replace(spec, runtime_kind="TrainingRuntime"), "team-a"
    )
    # As the CRD's defaults leave it (what tests/trainjob_standin.py then checks).
    defaulted = __import__("copy").deepcopy(job)
    defaulted["spec"].update(suspend=False, managedBy="trainer.kubeflow.org/trainjob-controller")
    return {
        "trainjobs": [job, defaulted],
        "clustertrainingruntimes": [runtime_manifest(spec)],
        "trainingruntimes": [namespaced],
    }


def main(argv: list[str]) -> int:
    (mirror,) = argv
    manifests = template_manifests()
    EXCERPTS.mkdir(parents=True, exist_ok=True)
    for tag in TAGS:
        schemas = {}
        for plural in PLURALS:
            text = subprocess.run(
                ["git", "-C", mirror, "show", f"{tag}:{CRD_PATH.format(plural=plural)}"],
                check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            crd = yaml.safe_load(text)
            (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
            schemas[plural] = {
                "scope": crd["spec"]["scope"],
                "schema": excerpt(version["schema"]["openAPIV3Schema"], manifests[plural]),
            }
        source = {
            "repository": "github.com/kubeflow/trainer",
            "tag": tag,
            "files": [CRD_PATH.format(plural=p) for p in PLURALS],
            "derived_by": "python -m tests.trainer_crds",
        }
        (EXCERPTS / f"{tag}.json").write_text(
            json.dumps({"source": source, "schemas": schemas}, indent=1, sort_keys=True) + "\n"
        )
        print(f"wrote {EXCERPTS / f'{tag}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
