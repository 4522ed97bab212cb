"""Policy reports as Policy Reporter reads them, from real decisions of a running vgate: a report per
namespace and one for cluster-scoped objects, one result per resource and rule from each resource's
latest decision, warn as warn, valid against the report CRDs."""

from __future__ import annotations

import copy

import jsonschema
import yaml

from helpers import CORPUS, RESTRICTED_SPEC, pod


def schema(filename: str, version: str) -> jsonschema.Draft4Validator:
    """A report CRD's schema; a namespaced report (PolicyReport, Report) has its cluster twin's."""
    crd = yaml.safe_load((CORPUS / "report-crds" / filename).read_text())
    found = next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]
    return jsonschema.Draft4Validator(found)


def privileged(name: str, namespace: str) -> dict:
    spec = copy.deepcopy(RESTRICTED_SPEC)
    spec["containers"][0]["securityContext"] = {**spec["containers"][0].get("securityContext", {}),
                                                "privileged": True}
    return pod(name, namespace, **spec)


def test_a_report_keeps_its_newest_results_within_what_one_object_may_hold():
    """etcd takes 1.5 MiB a request: a namespace's report holds its newest 1,000 results and counts
    the rest; the hour keeps at most 5,000 resources (the oldest dropped, counted)."""
    from webhook.reports.render_policy_reports import MAX_RESULTS, namespaced_reports
    from webhook.reports.resource_results import MAX_RESOURCES, ResourceResults

    resources = ResourceResults()
    for n in range(MAX_RESOURCES + 7):
        resources.add({"endpoint": "validate", "operation": "CREATE", "kind": "v1/Pod", "namespace": "busy",
                       "name": f"p{n:05d}", "time": f"2026-12-02T10:{n // 100 % 60:02d}:{n % 60:02d}.{n:06d}+00:00",
                       "decision": "warned", "rules": [{"id": "r", "action": "warn", "message": "m"}]})
    assert resources.left_out == 7 and len(resources.latest) == MAX_RESOURCES
    document = {"hour": "2026-12-02T10", "to": "2026-12-02T11:00:00+00:00", "perRule": []}
    [report] = namespaced_reports(document, resources, "wgpolicy")
    assert len(report["results"]) == MAX_RESULTS
    assert report["metadata"]["annotations"]["vgate.io/results-left-out"] == str(MAX_RESOURCES - MAX_RESULTS)
    assert report["metadata"]["annotations"]["vgate.io/resources-left-out"] == "7"
    assert report["results"][0]["resources"][0]["name"] == f"p{MAX_RESOURCES + 6:05d}"  # the newest first
    assert len(yaml.safe_dump(report)) < 1_000_000
