"""Enforcement actions, exempt namespaces and policy exceptions."""

from __future__ import annotations

import copy
import fnmatch
import random
import re
import string
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from webhook.core.enforcement import action_for
from webhook.core.namespace_globs import matches_every_namespace
from webhook.core.policy_exceptions import ExceptionRules
from webhook.files.config_file import DEFAULT_CONFIG_PATH, parse_config
from webhook.files.exception_files import load_exceptions
from webhook.offline.admit import admit

from helpers import POLICIES, pod

OPEN_EGRESS = yaml.safe_load((POLICIES / "network-no-external" / "samples" / "denied-no-egress-label.yaml").read_text())
# The same pod as /mutate leaves it in ml-training, whose queue runs Guaranteed: /validate judges
# what will be stored, and an unmutated pod there lacks the memory limits training requires.
OPEN_EGRESS_MUTATED = copy.deepcopy(OPEN_EGRESS)
for _container in OPEN_EGRESS_MUTATED["spec"]["containers"]:
    _container["resources"] = {"limits": {"cpu": "1", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "4Gi"}}


def config_with(extra: str):
    return parse_config(DEFAULT_CONFIG_PATH.read_text() + extra)


IN_A_MONTH = (datetime.now(timezone.utc) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
RULES = ExceptionRules(datetime.now(timezone.utc))


def exception(name: str = "hostnet-debug", expires: str = IN_A_MONTH, **match) -> dict:
    return {"apiVersion": "vgate.io/v1alpha1", "kind": "PolicyException", "metadata": {"name": name},
            "spec": {"rules": ["network-no-external"], "match": {"namespaces": ["ml-training"], **match},
                     "justification": "packet capture for incident INC-42", "approver": "secops-lead",
                     "ticket": "SEC-1234", "expiresAt": expires}}


def test_action_precedence_namespace_override_then_rule_then_default():
    enforcement = config_with("""
enforcement:
  default: deny
  rules: {network-no-external: warn}
  namespaces:
    - namespaces: [sandbox-*]
      rules: {"*": audit}
    - namespaces: [ml-*]
      rules: {placement-single-zone: warn}
""").enforcement
    assert action_for("network-no-external", "web", enforcement) == "warn"
    assert action_for("placement-single-zone", "web", enforcement) == "deny"
    assert action_for("placement-single-zone", "sandbox-1", enforcement) == "audit"
    assert action_for("placement-single-zone", "ml-training", enforcement) == "warn"
    assert action_for("network-no-external", "ml-training", enforcement) == "warn"


def test_warn_action_admits_with_a_warning_and_audit_only_records(engine):
    warned = admit(OPEN_EGRESS, config_with("enforcement: {rules: {network-no-external: warn}}\n"), engine)
    assert warned.validation.decision.allowed is True
    assert any(w.startswith("[network-no-external]") for w in warned.validation.decision.warnings)
    audited = admit(OPEN_EGRESS, config_with("enforcement: {default: audit}\n"), engine)
    assert audited.validation.decision.allowed is True
    assert not any(w.startswith("[network-no-external]") for w in audited.validation.decision.warnings)
    assert [o.action for o in audited.validation.outcomes if o.rule == "network-no-external"] == ["audit"]
    assert audited.validation.decision.audit_annotations["audited-rules"] == "network-no-external"


def test_exempt_namespaces_are_neither_mutated_nor_validated(config, engine):
    system = admit(OPEN_EGRESS, config, engine, namespace="kube-system")
    assert system.mutation.patch == [] and system.validation.exempt is True
    assert system.validation.decision.allowed is True and system.validation.outcomes == []


def test_current_matching_exception_excepts_the_rule(tmp_path, config, engine):
    (tmp_path / "debug.yaml").write_text(yaml.safe_dump(exception()))
    exceptions, errors = load_exceptions(tmp_path, RULES)
    assert errors == [] and len(exceptions) == 1
    result = admit(OPEN_EGRESS, config, engine, exceptions)
    assert result.validation.decision.allowed is True
    assert [(o.rule, o.action, o.exception) for o in result.validation.outcomes if o.action != "warn"] == [
        ("network-no-external", "excepted", "hostnet-debug")]


def test_expired_or_unmatched_exceptions_do_not_apply(tmp_path, config, engine):
    documents = [exception("expired", expires="2020-01-01T00:00:00Z"),
                 exception("other-namespace", namespaces=["web"]),
                 exception("other-name", names=["tcpdump-*"]),
                 exception("other-labels", labels={"team": "netops"})]
    (tmp_path / "many.yaml").write_text(yaml.safe_dump_all(documents))
    exceptions, errors = load_exceptions(tmp_path, RULES)
    assert errors == [] and len(exceptions) == 4
    result = admit(OPEN_EGRESS, config, engine, exceptions)
    assert result.validation.decision.allowed is False
    matching_name = exception("by-name", names=["feature-store-*"])
    (tmp_path / "by-name.yaml").write_text(yaml.safe_dump(matching_name))
    exceptions, _ = load_exceptions(tmp_path, RULES)
    assert admit(OPEN_EGRESS, config, engine, exceptions).validation.decision.allowed is True
    later = datetime(2100, 1, 1, tzinfo=timezone.utc)
    assert not any(
        e.covers("network-no-external", "ml-training", "feature-store-hostnet", {}, later) for e in exceptions
    )


def test_malformed_exception_files_are_rejected_alone(tmp_path):
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(exception()))
    no_ticket = exception()
    del no_ticket["spec"]["ticket"]
    (tmp_path / "no-ticket.yaml").write_text(yaml.safe_dump(no_ticket))
    (tmp_path / "bad-time.yaml").write_text(yaml.safe_dump(exception(expires="next tuesday")))
    (tmp_path / "broken.yaml").write_text("spec: [")
    exceptions, errors = load_exceptions(tmp_path, RULES)
    assert [e.name for e in exceptions] == ["hostnet-debug"]
    reasons = {error.file.rsplit("/", 1)[1]: error.reason for error in errors}
    assert "'ticket' is a required property" in reasons["no-ticket.yaml"]
    assert "not an RFC 3339 time" in reasons["bad-time.yaml"]
    assert reasons["broken.yaml"].startswith("invalid YAML: ")


def test_exceptions_must_be_namespaced_time_boxed_and_not_cluster_wide(tmp_path):
    label_only = exception("label-only")
    label_only["spec"]["match"] = {"labels": {"team": "data"}}
    (tmp_path / "label-only.yaml").write_text(yaml.safe_dump(label_only))
    (tmp_path / "everywhere.yaml").write_text(yaml.safe_dump(exception("everywhere", namespaces=["*"])))
    too_long = (datetime.now(timezone.utc) + timedelta(days=91)).strftime("%Y-%m-%dT%H:%M:%SZ")
    (tmp_path / "forever.yaml").write_text(yaml.safe_dump(exception("forever", expires=too_long)))
    exceptions, errors = load_exceptions(tmp_path, RULES)
    assert exceptions == []
    reasons = {error.file.rsplit("/", 1)[1]: error.reason for error in errors}
    assert "'namespaces' is a required property" in reasons["label-only.yaml"]
    assert "* would except every namespace" in reasons["everywhere.yaml"]
    assert "more than 90 days away (exceptions.maxLifetimeDays)" in reasons["forever.yaml"]
    lenient = ExceptionRules(datetime.now(timezone.utc), allow_cluster_wide=True, max_lifetime_days=120)
    assert sorted(e.name for e in load_exceptions(tmp_path, lenient)[0]) == ["everywhere", "forever"]


@pytest.mark.parametrize("glob", ["?*", "*?", "**", "[a-z0-9]*", "[!-]*", "*[!-]", "[a-z0-9-]*"])
def test_a_glob_that_matches_every_namespace_is_cluster_wide_however_it_is_spelled(tmp_path, glob):
    """Bypass: allowClusterWide false refused the literal * only; "?*" excepted every namespace."""
    (tmp_path / "sneaky.yaml").write_text(yaml.safe_dump(exception("sneaky", namespaces=["team-a", glob])))
    exceptions, errors = load_exceptions(tmp_path, RULES)
    assert exceptions == [] and f"{glob} would except every namespace" in errors[0].reason
    narrow = exception("narrow", namespaces=["team-*", "[a-z]*", "?-*"])
    (tmp_path / "sneaky.yaml").write_text(yaml.safe_dump(narrow))
    assert [e.name for e in load_exceptions(tmp_path, RULES)[0]] == ["narrow"]


SPLIT = ["[a-m]*", "[n-z]*", "[0-9]*"]


def test_globs_that_together_match_every_namespace_are_cluster_wide(tmp_path):
    """Bypass (issue 34): [a-m]*, [n-z]*, [0-9]* each cover part, together every namespace, in one
    exception or in three of the same rule, without exceptions.allowClusterWide."""
    assert matches_every_namespace(*SPLIT) and not any(matches_every_namespace(glob) for glob in SPLIT)
    assert not matches_every_namespace("[a-m]*", "[n-z]*")  # a name starting with a digit escapes
    (tmp_path / "split.yaml").write_text(yaml.safe_dump(exception("split", namespaces=SPLIT)))
    exceptions, errors = load_exceptions(tmp_path, RULES)
    assert exceptions == [] and "[a-m]*, [n-z]*, [0-9]* would except every namespace" in errors[0].reason
    (tmp_path / "split.yaml").unlink()
    for index, glob in enumerate(SPLIT):
        (tmp_path / f"part-{index}.yaml").write_text(yaml.safe_dump(exception(f"part-{index}", namespaces=[glob])))
    exceptions, errors = load_exceptions(tmp_path, RULES)
    assert exceptions == [] and len(errors) == 3
    assert "exceptions part-0, part-1, part-2 together except rule network-no-external in every namespace" in \
        errors[0].reason
    lenient = ExceptionRules(datetime.now(timezone.utc), allow_cluster_wide=True)
    assert len(load_exceptions(tmp_path, lenient)[0]) == 3
    (tmp_path / "part-2.yaml").unlink()  # two of the three: some namespaces are left, both stand
    assert [e.name for e in load_exceptions(tmp_path, RULES)[0]] == ["part-0", "part-1"]


def test_the_every_namespace_check_agrees_with_fnmatch_on_generated_names():
    rng = random.Random(7)
    alphabet = string.ascii_lowercase + string.digits
    names = ["".join(rng.choice(alphabet + "-") for _ in range(rng.randint(0, 20))) for _ in range(3000)]
    names = [n for n in names if re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", n)] + ["a", "0", "a-b", "x" * 63]
    pieces = ["*", "?", "a", "-", "[a-z]", "[!a]", "[0-9a-z]", "[!-]", "[a-z0-9-]"]
    for _ in range(400):
        glob = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))
        if matches_every_namespace(glob):
            assert all(fnmatch.fnmatchcase(n, glob) for n in names), glob
        else:  # not universal: the automaton's verdict is exact, so some short name escapes it
            assert not all(fnmatch.fnmatchcase(n, glob) for n in _short_names()), glob


def _short_names() -> list[str]:
    alphabet = string.ascii_lowercase + string.digits + "-"
    one = [c for c in alphabet if c != "-"]
    two = [a + b for a in one for b in one]
    three = [a + "-" + b for a in "a0" for b in "z9"] + [a + b + c for a in "a0" for b in alphabet for c in "z9"]
    return one + two + three


def test_exemptions_are_exact_names_and_globs_only_where_asked(engine):
    """Bypass: a tenant namespace named like a platform one is judged like any other."""
    for lookalike in ("kube-systemx", "kube-system-team", "volcano-system2"):
        assert not admit(OPEN_EGRESS, config_with(""), engine, namespace=lookalike).validation.exempt, lookalike
    globbed = config_with("exemptNamespaceGlobs: [sandbox-*]\n")
    assert admit(OPEN_EGRESS, globbed, engine, namespace="sandbox-7").validation.exempt
    assert not admit(OPEN_EGRESS, globbed, engine, namespace="sandbox").validation.exempt


def test_memory_devices_stay_denied_whatever_the_memory_mapping_rules_action(engine):
    """Issue 13: with placement-unencrypted-memory-mapping at warn (or audit), /dev/mem was admitted."""
    for action in ("warn", "audit", "deny"):
        config = parse_config(DEFAULT_CONFIG_PATH.read_text().replace(
            "  rules: {}\n", f"  rules: {{placement-unencrypted-memory-mapping: {action}}}\n", 1))
        for device in ("/dev/mem", "/dev/kmem", "/dev/port"):
            manifest = pod(volumes=[{"name": "mem", "hostPath": {"path": device}}])
            result = admit(manifest, config, engine)
            assert not result.validation.decision.allowed
            assert [o.rule for o in result.validation.rules("deny")] == ["security-hostpath-volume"]


def pss_config(pod_security: dict, enforcement: dict | None = None):
    document = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    document["podSecurity"] = pod_security
    if enforcement is not None:
        document["enforcement"] = enforcement
    return parse_config(yaml.safe_dump(document))


def pss_outcomes(config, *violations: tuple[str, str], namespace: str = "web", exceptions=()):
    from webhook.core.contract import PolicyResult, Violation
    from webhook.core.enforcement import enforce

    result = PolicyResult(tuple(Violation(f"check-{level}", "m", level) for level, _ in violations), ())
    return {o.rule: o.action for o in enforce(result, config, list(exceptions), namespace=namespace, name="p",
                                                 labels={}, now=datetime.now(timezone.utc))}


def test_pod_security_modes_decide_a_level_result_as_pod_security_admission_would():
    cases = [  # enforce, warn, audit -> baseline result, restricted result
        (("baseline", "restricted", "restricted"), ("deny", "warn")),
        (("restricted", "restricted", "restricted"), ("deny", "deny")),
        (("privileged", "baseline", "restricted"), ("warn", "audit")),
        (("privileged", "privileged", "baseline"), ("audit", None)),
        (("privileged", "privileged", "privileged"), (None, None)),
    ]
    for (enforce_level, warn, audit), expected in cases:
        config = pss_config({"enforce": enforce_level, "warn": warn, "audit": audit})
        actions = pss_outcomes(config, ("baseline", ""), ("restricted", ""))
        got = (actions.get("check-baseline"), actions.get("check-restricted"))
        assert got == expected, (enforce_level, warn, audit)


def test_the_first_matching_namespace_entry_overrides_the_modes_it_names():
    config = pss_config(
        {
            "enforce": "baseline",
            "namespaces": [
                {"namespaces": ["secure-*"], "enforce": "restricted"},
                {"namespaces": ["secure-*", "legacy"], "enforce": "privileged", "warn": "privileged"},
            ],
        }
    )
    assert pss_outcomes(config, ("restricted", ""), namespace="secure-apps") == {"check-restricted": "deny"}
    assert pss_outcomes(config, ("baseline", ""), ("restricted", ""), namespace="legacy") == {
        "check-baseline": "audit",
        "check-restricted": "audit",
    }  # audit: restricted, from the top level
    # An exact name is not a prefix: "secure" is not "secure-*".
    assert pss_outcomes(config, ("restricted", ""), namespace="secure") == {"check-restricted": "warn"}


def test_an_explicit_enforcement_entry_overrides_the_modes():
    config = pss_config(
        {"enforce": "baseline"},
        {
            "default": "deny",
            "rules": {"check-restricted": "deny"},
            "namespaces": [{"namespaces": ["sandbox"], "rules": {"*": "audit"}}],
        },
    )
    assert pss_outcomes(config, ("restricted", "")) == {"check-restricted": "deny"}
    assert pss_outcomes(config, ("baseline", ""), ("restricted", ""), namespace="sandbox") == {
        "check-baseline": "audit",
        "check-restricted": "audit",
    }


def test_a_result_no_mode_covers_is_dropped_and_one_a_mode_covers_can_be_excepted(tmp_path):
    covering = exception("pss-debug")
    covering["spec"].update(rules=["check-baseline"], match={"namespaces": ["web"]})
    (tmp_path / "pss.yaml").write_text(yaml.safe_dump(covering))
    exceptions, errors = load_exceptions(tmp_path, RULES)
    assert errors == [] and len(exceptions) == 1
    silent = pss_config({"enforce": "privileged", "warn": "privileged", "audit": "privileged"})
    assert pss_outcomes(silent, ("baseline", ""), exceptions=exceptions) == {}  # nothing to except, nothing recorded
    assert pss_outcomes(pss_config({}), ("baseline", ""), exceptions=exceptions) == {"check-baseline": "excepted"}
