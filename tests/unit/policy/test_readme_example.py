"""The README's example image rule, loaded from the README itself: it denies a scratch image at
CREATE and through `kubectl set image` (an UPDATE changing a running pod's image), which a rule over
judged_containers would let through."""

from __future__ import annotations

import copy
import re
import shutil

from webhook.core.contract import EngineInput
from webhook.offline.admit import review_for
from webhook.policy.regorus_engine import RegorusEngine
from webhook.policy.sources import load_policy_set

from helpers import POLICIES, RESTRICTED_SPEC, ROOT, pod

RULE = "example-no-scratch-images"


def readme_rule() -> str:
    guide = (ROOT / "docs" / "policy-authors.md").read_text()
    [rule] = [block for block in re.findall(r"```rego\n(.*?)```", guide, re.S)
              if f"package vgate.rules.{RULE.replace('-', '_')}" in block]
    return rule


def denied_by(engine: RegorusEngine, review: dict) -> set[str]:
    return {result.rule for result in engine.evaluate(EngineInput.of(review)).result.deny}


def test_the_readme_image_rule_denies_set_image_too(tmp_path, config):
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    (policies / RULE).mkdir()
    (policies / RULE / "policy.rego").write_text(readme_rule())
    engine = RegorusEngine(load_policy_set(policies), config.document)
    before = pod("app", "web", **copy.deepcopy(RESTRICTED_SPEC))
    after = copy.deepcopy(before)
    after["spec"]["containers"][0]["image"] = "scratch.example.com/tools:1"
    assert RULE in denied_by(engine, review_for(after))
    assert RULE in denied_by(engine, review_for(after, operation="UPDATE", old_object=before))  # kubectl set image
    assert RULE not in denied_by(engine, review_for(before, operation="UPDATE", old_object=before))
    with_judged_containers = readme_rule().replace("image_judged_containers", "judged_containers")
    (policies / RULE / "policy.rego").write_text(with_judged_containers)
    bypassed = RegorusEngine(load_policy_set(policies), config.document)
    assert RULE not in denied_by(bypassed, review_for(after, operation="UPDATE", old_object=before))
