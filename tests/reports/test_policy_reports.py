"""Policy reports as Policy Reporter reads them, from real decisions of a running vgate: a report per
namespace and one for cluster-scoped objects, one result per resource and rule from each resource's
latest decision, warn as warn, valid against the report CRDs."""

from __future__ import annotations

import copy
import uuid
from datetime import datetime, timedelta, timezone

import jsonschema
import yaml

from webhook.reports.build import build_report

from helpers import CORPUS, POLICIES, RESTRICTED_SPEC, pod, review


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


def test_one_result_per_resource_and_rule_from_its_latest_decision(server, tmp_path):
    a, b = f"team-a-{uuid.uuid4().hex[:5]}", f"team-b-{uuid.uuid4().hex[:5]}"
    server.post("/validate", review(privileged("fixed-later", a)))       # denied, then fixed: passes now
    server.post("/validate", review(pod("fixed-later", a, **copy.deepcopy(RESTRICTED_SPEC))))
    for _ in range(3):                                                  # denied three times: one result
        server.post("/validate", review(privileged("still-privileged", a)))
    server.post("/validate", review(privileged("only-a-dry-run", a), dry_run=True))
    server.post("/validate", review(pod("loose", b)))                   # admitted with warnings
    annotated = pod("loose", b, annotations={"scheduling.k8s.io/group-name": "pg"})  # a scheduler's UPDATE:
    server.post("/validate", review(annotated, operation="UPDATE", old_object=pod("loose", b)))  # no re-judging
    records = server.decisions()
    hour = datetime.fromisoformat(records[-1]["time"]).replace(minute=0, second=0, microsecond=0)
    key = tmp_path / "keys" / "r.key"
    from webhook.reports.keys import ensure_key

    ensure_key(key)
    out = build_report(hour, server.audit_dir, tmp_path / "reports", POLICIES, key,
                       now=datetime.now(timezone.utc) + timedelta(hours=2))
    wg = {r["metadata"]["namespace"]: r for r in yaml.safe_load_all((out / "policyreports.yaml").read_text())}
    opened = {r["metadata"]["namespace"]: r for r in yaml.safe_load_all((out / "reports.yaml").read_text())}
    assert {a, b} <= set(wg) and {a, b} <= set(opened)
    named = {result["resources"][0]["name"] for result in wg[a]["results"]}
    assert named == {"still-privileged"}  # fixed-later passes now; a dry run is no resource state
    pairs = [(r["resources"][0]["name"], r["rule"]) for r in wg[a]["results"]]
    assert len(pairs) == len(set(pairs))  # one result per resource and rule, however often it was judged
    failing = next(r for r in wg[a]["results"] if r["rule"] == "security-privileged-container")
    assert failing["result"] == "fail" and failing["severity"] in ("critical", "high")
    assert failing["resources"] == [{"apiVersion": "v1", "kind": "Pod", "name": "still-privileged", "namespace": a}]
    assert wg[a]["summary"]["fail"] >= 1
    loose = wg[b]["results"]
    assert loose and {r["result"] for r in loose} == {"warn"}  # admitted with warnings: warn, not fail
    assert {r["resources"][0]["name"] for r in loose} == {"loose"}  # the UPDATE after it kept them
    assert wg[b]["summary"]["fail"] == 0 and wg[b]["summary"]["warn"] == len(loose)
    assert (wg[a]["kind"], wg[a]["apiVersion"]) == ("PolicyReport", "wgpolicyk8s.io/v1alpha2")
    assert (opened[a]["kind"], opened[a]["apiVersion"]) == ("Report", "openreports.io/v1alpha1")
    cluster_wg = yaml.safe_load((out / "clusterpolicyreport.yaml").read_text())
    cluster_open = yaml.safe_load((out / "clusterreport.yaml").read_text())
    assert cluster_wg["kind"] == "ClusterPolicyReport" and "namespace" not in cluster_wg["metadata"]
    for document in [*wg.values(), cluster_wg]:
        schema("wgpolicyk8s.io_clusterpolicyreports.yaml", "v1alpha2").validate(document)
    for document in [*opened.values(), cluster_open]:
        schema("openreports.io_clusterreports.yaml", "v1alpha1").validate(document)


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
