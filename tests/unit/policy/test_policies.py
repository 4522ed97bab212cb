"""The shipped policies: Rego unit tests, samples, and agreement between offline and HTTPS paths."""

from __future__ import annotations

import json
import re
import subprocess

import yaml

from webhook.policy.sources import policy_metadata
from webhook.reports import mlps

from helpers import POLICIES, VGATE, copy_policies, review

SAMPLES = sorted(POLICIES.glob("*/samples/*.yaml"))
CATALOGUE = set(re.findall(r"^\| `([a-z-]+)` \| (?:critical|high|medium|low) \|",
                           (POLICIES.parent / "docs" / "policy-authors.md").read_text(), re.MULTILINE))


def vgate_test(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*VGATE, "test", *args], capture_output=True, text=True, timeout=120)


def test_every_rule_folder_has_policy_tests_and_both_kinds_of_sample():
    rules = [p for p in POLICIES.iterdir() if p.is_dir() and p.name != "lib"]
    assert len(rules) == len(CATALOGUE) == 36  # the README's catalogue table: one folder per rule, no more, no less
    assert {rule.name for rule in rules} == CATALOGUE
    for rule in rules:
        assert (rule / "policy.rego").is_file() and (rule / "policy_test.rego").is_file(), rule
        names = [s.name for s in (rule / "samples").glob("*.yaml")]
        assert any(n.startswith("allowed") for n in names) and any(n.startswith("denied") for n in names), rule
        text = (rule / "policy.rego").read_text()
        assert f"package vgate.rules.{rule.name.replace('-', '_')}\n" in text, "folder name is the rule id"
        assert "id:" not in text, "the folder names the rule: no METADATA id to disagree with it"
        test = (rule / "policy_test.rego").read_text()
        written = re.findall(rf'"{rule.name.replace("-", "_")}"', test)
        assert len(written) <= 1, f"{rule.name}: the tests name their rule once (rule := ...), not per test"


def test_vgate_test_passes_on_the_shipped_policies():
    result = vgate_test("-v", str(POLICIES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout
    summary = result.stdout.strip().splitlines()[-1]
    tests, samples = summary.split(";")
    written = sum(len(re.findall(r"^test_\w+ if", p.read_text(), re.MULTILINE)) for p in POLICIES.rglob("*_test.rego"))
    assert tests.split()[1] == f"{written}/{written}"  # every test rule in the files ran, and passed
    assert ("\n" + result.stdout).count("\nPASS data.") == written
    # one judged document per sample file (the documents before its last are its setup)
    assert samples.split()[1] == f"{len(SAMPLES)}/{len(SAMPLES)}"
    for rule in ("placement-single-zone", "placement-encrypted-memory", "network-no-external"):
        assert f"% {POLICIES}/{rule}/policy.rego" in result.stdout  # coverage reported per policy file


def test_vgate_test_fails_on_a_broken_rule_and_says_where(tmp_path):
    policies = copy_policies(tmp_path / "policies")
    rule = policies / "placement-single-zone" / "policy.rego"
    rule.write_text(rule.read_text().replace("count(found) != 1", "count(found) > 1"))
    result = vgate_test(str(policies))
    assert result.returncode == 1
    assert (f"FAIL data.vgate.rules_test.placement_single_zone.test_denies_sensitive_pod_without_zone "
            f"({policies}/placement-single-zone/policy_test.rego:") in result.stdout
    assert "FAIL sample" in result.stdout and "denied-pod-two-zones.yaml" in result.stdout


def test_generated_entry_agrees_with_main_rego_that_opa_serves(config):
    """The in-process engine evaluates a generated union; OPA evaluates policies/lib/main.rego."""
    from webhook.policy.regorus_engine import compile_engine
    from webhook.policy.sources import load_policy_set

    from corpus import corpus_pods

    engine = compile_engine(load_policy_set(POLICIES), {"vgate": {"config": config.document}})
    manifests = [m for s in SAMPLES for m in yaml.safe_load_all(s.read_text()) if m]
    manifests += [p for _, p in corpus_pods()]
    denials = 0
    for manifest in manifests:
        engine.set_input_json(json.dumps(review(manifest)))
        main = json.loads(engine.eval_rule_as_json("data.vgate.main.result"))
        entry = json.loads(engine.eval_rule_as_json("data.vgate.entry.result"))
        for kind in ("deny", "warn"):  # sets in main.rego, arrays in the entry: compare as sets
            assert sorted(map(json.dumps, entry[kind])) == sorted(map(json.dumps, main[kind]))
        denials += bool(main["deny"])
    assert denials >= 9, "the comparison must cover denials, not only empty results"


def test_every_rule_declares_its_catalogue_metadata():
    rules = sorted(POLICIES.glob("*/policy.rego"))
    assert len(rules) >= 17
    for rule in rules:
        metadata = policy_metadata(rule)
        assert metadata, f"{rule}: must open with a METADATA block"
        custom = metadata["custom"]
        assert metadata["title"] and metadata["description"], rule
        assert "id" not in custom, f"{rule}: the folder and package name the rule; no METADATA id to disagree"
        assert custom["severity"] in {"critical", "high", "medium", "low"}, rule
        assert custom["category"] and custom["remediation"], rule
        assert mlps.is_valid(custom["control"]), f"{rule}: {custom['control']} is no GB/T 22239-2019 control point"
        assert "import rego.v1" in rule.read_text(), rule
        if rule.parent.name.startswith("security-"):  # a Pod Security Standards check: which, and at which level
            assert custom["pss"]["check"] and custom["pss"]["level"] in {
                "baseline", "restricted", "baseline and restricted"}, rule
