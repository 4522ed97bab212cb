"""Pod Security Standards: the tests that start vgate over HTTPS (the rest: tests/unit/policy/)."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from policy.test_pod_security_standards import ALLOWED, CASES, MANIFESTS, PSS_RULES

from webhook.offline.admit import admit
from webhook.offline.chain.model import Cluster

from helpers import POLICIES, VGATE, review


@pytest.fixture(scope="module")
def eval_verdicts(tmp_path_factory) -> dict[str, dict]:
    """`vgate eval -o json` over every case at once, by pod name."""
    path = tmp_path_factory.mktemp("pss") / "cases.yaml"
    path.write_text(yaml.safe_dump_all(MANIFESTS.values()))
    result = subprocess.run([*VGATE, "eval", "--policies", str(POLICIES), "-o", "json", "-f", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr  # the baseline cases are denied
    return {verdict["name"]: verdict for verdict in json.loads(result.stdout)}


@pytest.mark.parametrize("case_id,rule,level", [(c, r, lvl) for c, _, r, lvl in CASES], ids=[c for c, *_ in CASES])
def test_a_documented_value_is_judged_alike_offline_by_eval_and_over_https(case_id, rule, level, config, engine,
                                                                          eval_verdicts, server):
    pod = MANIFESTS[case_id]
    offline = admit(pod, config, engine, cluster=Cluster.build(config))
    failing = {(v.rule, v.level) for v in offline.validation.result.deny if v.rule in PSS_RULES}
    messages = [v.message for v in offline.validation.result.deny]
    assert failing == (set() if rule == ALLOWED else {(rule, level)}), messages
    expected_action = {None: None, "baseline": "deny", "restricted": "warn"}[level]
    actions = {o.rule: o.action for o in offline.validation.outcomes}
    assert {r: a for r, a in actions.items() if r in PSS_RULES} == ({} if rule == ALLOWED else {rule: expected_action})
    assert offline.validation.decision.allowed is (level != "baseline")

    from_eval = eval_verdicts[pod["metadata"]["name"]]
    assert from_eval["allowed"] is offline.validation.decision.allowed
    assert {v["rule"]: v["action"] for v in from_eval["violations"]} == actions

    answer = server.post("/validate", review(offline.mutated))  # what the API server sends after mutation
    verdict = answer.json()["response"]
    assert verdict["allowed"] is offline.validation.decision.allowed
    annotations = verdict.get("auditAnnotations", {})
    for action, key in (("deny", "denied-rules"), ("warn", "warned-rules")):
        expected = ",".join(sorted(r for r, a in actions.items() if a == action))
        assert annotations.get(key, "") == expected, (case_id, annotations)
