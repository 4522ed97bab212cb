"""Policy reports: the tests that start vgate over HTTPS (the rest: tests/unit/reports/test_policy_reports.py)."""

from __future__ import annotations

import copy
import uuid
from datetime import datetime, timedelta, timezone

import yaml
from reports.test_policy_reports import privileged, schema

from webhook.reports.build import build_report

from helpers import POLICIES, RESTRICTED_SPEC, pod, review


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
