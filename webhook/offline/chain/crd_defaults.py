"""Structural-schema defaults of CustomResourceDefinitions, applied as the API server applies them.

The API server fills in every ``default`` of a CRD's OpenAPI v3 schema when it decodes a request,
again after each mutating webhook that returned a patch, and when it reads from etcd, so vgate
never sees a Volcano Job without ``spec.queue``: the Job and PodGroup CRDs default it to
``default``. ``apply_defaults`` is the algorithm of apiextensions-apiserver's
``pkg/apiserver/schema/defaulting/algorithm.go`` (``Default``): for an object, each property with
a default that is absent, or null where the schema does not allow null, gets a copy of it; then
every property (or ``additionalProperties``) and every array item is defaulted recursively.

vgate ships derived files, ``volcano_crd_defaults.json`` and ``spark_crd_defaults.json``: only the
parts of Volcano's Job, PodGroup and Queue schemas, and of the Spark operator's SparkApplication and
ScheduledSparkApplication schemas, that lead to a default (the CRDs are Apache-2.0,
volcano-sh/volcano and kubeflow/spark-operator). Regenerate one with ``python -m
webhook.offline.chain.crd_defaults SOURCE CRD.yaml... > FILE``; a test keeps both equal to what the
CRDs in ../shared/corpus give. ``vgate eval --crd FILE`` adds
or replaces CRDs the same way.
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ...core.errors import ModelError

SHIPPED = ("volcano_crd_defaults.json", "spark_crd_defaults.json")


@dataclass(frozen=True)
class CrdDefaults:
    """The defaults of one CRD: a pruned schema per served version."""

    group: str
    kind: str
    versions: dict[str, dict[str, Any]]
    source: str

    def as_json(self) -> dict[str, Any]:
        return {"group": self.group, "kind": self.kind, "versions": self.versions}


def skeleton(schema: Any) -> dict[str, Any] | None:
    """The part of a schema that leads to a ``default``, or None when nothing below it has one."""
    if not isinstance(schema, dict):
        return None
    pruned: dict[str, Any] = {}
    properties = {name: sub for name, sub in ((n, skeleton(s)) for n, s in (schema.get("properties") or {}).items())
                  if sub is not None}
    if properties:
        pruned["properties"] = properties
    for key in ("items", "additionalProperties"):
        sub = skeleton(schema.get(key))
        if sub is not None:
            pruned[key] = sub
    if "default" in schema:
        pruned["default"] = schema["default"]
    if pruned and schema.get("nullable"):
        pruned["nullable"] = True
    return pruned or None


def apply_defaults(value: Any, schema: dict[str, Any] | None) -> None:
    """Fill in defaults in place (apiextensions-apiserver's defaulting.Default)."""
    if not schema:
        return
    if isinstance(value, dict):
        for name, prop in (schema.get("properties") or {}).items():
            if "default" in prop and (name not in value or _non_nullable_null(value[name], prop)):
                value[name] = copy.deepcopy(prop["default"])
        properties = schema.get("properties") or {}
        for name, child in value.items():
            apply_defaults(child, properties.get(name, schema.get("additionalProperties")))
    elif isinstance(value, list):
        items = schema.get("items")
        for index, child in enumerate(value):
            if items and "default" in items and _non_nullable_null(child, items):
                value[index] = child = copy.deepcopy(items["default"])
            apply_defaults(child, items)


def _non_nullable_null(value: Any, schema: dict[str, Any]) -> bool:
    return value is None and not schema.get("nullable")


def read_crd_file(path: str | Path) -> list[CrdDefaults]:
    """The CRDs in a (multi-document) YAML file; ModelError naming the file and what is wrong."""
    try:
        documents = [d for d in yaml.safe_load_all(Path(path).read_text(encoding="utf-8")) if d is not None]
    except OSError as exc:
        raise ModelError(f"{path}: cannot read CRD file: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ModelError(f"{path}: invalid YAML: {exc}") from exc
    crds = [_crd(document, f"{path}#{index}") for index, document in enumerate(documents)]
    if not crds:
        raise ModelError(f"{path}: no CustomResourceDefinition in the file")
    return crds


def _crd(document: Any, source: str) -> CrdDefaults:
    if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
        raise ModelError(f"{source}: not a CustomResourceDefinition")
    spec = document.get("spec")
    names = spec.get("names") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("group"), str) or not isinstance(names, dict) \
            or not isinstance(names.get("kind"), str) or not isinstance(spec.get("versions"), list):
        raise ModelError(f"{source}: a CRD needs spec.group, spec.names.kind and spec.versions")
    versions: dict[str, dict[str, Any]] = {}
    for version in spec["versions"]:
        schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema") if isinstance(version, dict) else None
        if not isinstance(schema, dict) or not isinstance(version.get("name"), str):
            raise ModelError(f"{source}: every version of a structural CRD needs a name and schema.openAPIV3Schema")
        versions[version["name"]] = skeleton(schema) or {}
    return CrdDefaults(spec["group"], names["kind"], versions, source)


def shipped_crds() -> list[CrdDefaults]:
    """The Volcano and Spark operator CRDs' defaults that ship with vgate."""
    crds = []
    for name in SHIPPED:
        document = json.loads((resources.files("webhook.offline.chain") / name).read_text())
        crds += [CrdDefaults(c["group"], c["kind"], c["versions"], f"{name} ({document['source']})")
                 for c in document["crds"]]
    return crds


if __name__ == "__main__":
    crds = [crd for path in sys.argv[2:] for crd in read_crd_file(path)]
    print(json.dumps({"source": sys.argv[1], "crds": [crd.as_json() for crd in crds]}, indent=1, sort_keys=True))
