"""Pods and Volcano Jobs taken from the real manifests in ../shared/corpus."""

from __future__ import annotations

import copy
import json
from typing import Any

from helpers import CORPUS, corpus_documents, corpus_file


def _templates(document: dict[str, Any]) -> list[dict[str, Any]]:
    spec = document.get("spec") or {}
    if document.get("kind") == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    if isinstance(spec.get("tasks"), list):
        return [t["template"] for t in spec["tasks"] if isinstance(t.get("template"), dict)]
    template = spec.get("template")
    return [template] if isinstance(template, dict) and "spec" in template else []


def corpus_pods() -> list[tuple[str, dict[str, Any]]]:
    """(where, Pod) for every pod template in the Volcano examples."""
    pods = []
    for path in sorted((CORPUS / "volcano-examples").glob("*.yaml")):
        for index, document in enumerate(corpus_documents("volcano-examples", path.name)):
            for number, template in enumerate(_templates(document)):
                metadata = copy.deepcopy(template.get("metadata") or {})
                metadata.setdefault("name", f"{document['metadata'].get('name', 'pod')}-{number}")
                metadata["namespace"] = document["metadata"].get("namespace", "default")
                pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": copy.deepcopy(template["spec"])}
                pods.append((f"{path.name}#{index}/{number}", pod))
    assert len(pods) > 40, "the Volcano examples should yield dozens of pod templates"
    return pods


def corpus_volcano_jobs() -> list[tuple[str, dict[str, Any]]]:
    jobs = []
    for path in sorted((CORPUS / "volcano-examples").glob("*.yaml")):
        for index, document in enumerate(corpus_documents("volcano-examples", path.name)):
            if document.get("kind") == "Job" and document.get("apiVersion") == "batch.volcano.sh/v1alpha1":
                jobs.append((f"{path.name}#{index}", document))
    assert len(jobs) > 15
    return jobs


def fixture_pod() -> dict[str, Any]:
    """Kubernetes' round-trip Pod: every optional field set, odd values everywhere."""
    return json.loads(corpus_file("kubernetes-api-testdata", "core.v1.Pod.json").read_text())
