"""Policies: the tests that start vgate over HTTPS (the rest: tests/unit/policy/test_policies.py)."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import jsonpatch
import pytest
import yaml
from policy.test_policies import SAMPLES

from webhook.offline.admit import admit
from webhook.offline.chain.model import Cluster
from webhook.offline.policy_tests import also_denied_by, as_update

from helpers import POLICIES, VGATE, review


@pytest.fixture(scope="module")
def eval_verdicts() -> dict[str, list[dict]]:
    """`vgate eval -o json` over every sample at once, grouped by file; a sample that gives
    NetworkPolicies alone (one eval's manifests are one cluster: its policies would judge the others)."""
    verdicts: dict[str, list[dict]] = {}
    networked = [sample for sample in SAMPLES if gives_network_policies(sample)]
    for batch in [[s for s in SAMPLES if s not in networked], *([s] for s in networked)]:
        args = [arg for sample in batch for arg in ("-f", str(sample))]
        result = subprocess.run([*VGATE, "eval", "--policies", str(POLICIES), "-o", "json", *args],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode in (0, 1), result.stderr  # some samples are denied
        for verdict in json.loads(result.stdout):
            verdicts.setdefault(verdict["source"].rsplit("#", 1)[0], []).append(verdict)
    return verdicts


def gives_network_policies(sample: Path) -> bool:
    return any(m and m.get("kind") == "NetworkPolicy" for m in yaml.safe_load_all(sample.read_text()))


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_samples_are_judged_alike_by_eval_offline_and_over_https(server, config, engine, eval_verdicts,
                                                                  sample: Path):
    """As the API server delivers them (defaults, built-in plugins) to a real server over HTTPS."""
    *setup, last = [m for m in yaml.safe_load_all(sample.read_text()) if m]
    updating = as_update(sample.read_text(), setup, last)
    if updating:  # vgate eval judges no UPDATE of a Node it is given: offline and over HTTPS alike
        updated_alike(server, config, engine, sample, last, updating)
        return
    from_eval = eval_verdicts[str(sample)]
    cluster = Cluster.build(config)
    # Nodes, Namespaces and NetworkPolicies are cluster state (never judged, as eval learns them); a Binding is
    # judged against a cluster state, and so is effective egress, which this server does not watch:
    # tests/e2e/test_placement.py and test_effective_egress.py judge them through the real API server.
    state = [m for m in yaml.safe_load_all(sample.read_text()) if m and m["kind"] in ("Node", "NetworkPolicy",
                                                                                       "Namespace")]
    judged = [m for m in yaml.safe_load_all(sample.read_text()) if m and m not in state]
    for manifest in state:
        cluster.learn(manifest)
    for index, manifest in enumerate(judged):
        if manifest["kind"] == "Binding":
            assert from_eval[index]["kind"] == "Binding"
            continue
        offline = admit(manifest, config, engine, cluster=cluster)
        if offline.validation.decision.allowed:
            cluster.remember(offline.mutated)  # a PodGroup its members name, as vgate test and eval keep it
        assert offline.delivery is not None and offline.delivery.steps, "the model changed nothing"
        assert from_eval[index]["allowed"] is offline.validation.decision.allowed
        assert from_eval[index]["patch"] == offline.mutation.patch
        denied = [v["rule"] for v in from_eval[index]["violations"] if v["action"] == "deny"]
        assert denied == [o.rule for o in offline.validation.rules("deny")]
        if gives_network_policies(sample) and manifest is judged[-1]:
            assert offline.validation.egress is not None  # judged with effective egress, offline and by eval
            continue
        sent = review(offline.delivery.delivered)
        mutated = server.post("/mutate", sent).json()["response"]
        patch = json.loads(base64.b64decode(mutated["patch"])) if "patch" in mutated else []
        assert patch == offline.mutation.patch
        sent["request"]["object"] = jsonpatch.apply_patch(sent["request"]["object"], patch)
        assert sent["request"]["object"] == offline.mutated
        verdict = server.post("/validate", sent).json()["response"]
        assert verdict["allowed"] is offline.validation.decision.allowed
        expected = ",".join(sorted({sample.parent.parent.name, *also_denied_by(sample)}))
        if manifest is not judged[-1]:  # a sample's setup: admitted
            assert verdict["allowed"] is True
        elif sample.name.startswith("denied"):
            assert verdict["auditAnnotations"]["denied-rules"] == expected
            assert verdict["status"]["message"] == offline.validation.decision.message
        else:
            assert verdict["allowed"] is True and "denied-rules" not in verdict["auditAnnotations"]


def updated_alike(server, config, engine, sample: Path, judged: dict, options: dict) -> None:
    """A sample judged as a user's UPDATE (``# update by:``): offline as `vgate test` judges it, and
    over HTTPS, alike."""
    offline = admit(judged, config, engine, cluster=Cluster.build(config), **options)
    verdict = server.post("/validate", review(judged, **options)).json()["response"]
    assert verdict["allowed"] is offline.validation.decision.allowed is sample.name.startswith("allowed")
    if not verdict["allowed"]:
        assert verdict["auditAnnotations"]["denied-rules"] == sample.parent.parent.name
        assert verdict["status"]["message"] == offline.validation.decision.message

