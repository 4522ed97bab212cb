"""The remote OPA backend (`vgate serve --opa-url`), against tests/fake_opa.py.

The fake evaluates policies/lib/main.rego (what a real OPA serves), so these tests also check
that the files load unchanged behind OPA's Data API and judge like the in-process engine.
"""

from __future__ import annotations

import time

import pytest
import yaml

from webhook.offline.admit import admit

from fake_opa import FakeOpa
from helpers import POLICIES, pod, review

SAMPLES = sorted(POLICIES.glob("*/samples/*.yaml"))


@pytest.fixture
def opa():
    fake = FakeOpa(POLICIES)
    yield fake
    fake.stop()


@pytest.fixture
def opa_server(opa, start_server):
    return start_server(workers=1, extra_args=("--opa-url", opa.url, "--opa-timeout", "0.5"))


def test_samples_are_judged_by_opa_as_in_process(opa, opa_server, config, engine):
    for sample in SAMPLES:
        for manifest in filter(None, yaml.safe_load_all(sample.read_text())):
            local = admit(manifest, config, engine)
            sent = review(manifest)
            sent["request"]["object"] = local.mutated
            remote = opa_server.post("/validate", sent).json()["response"]
            assert remote["allowed"] is local.validation.decision.allowed, sample
            assert remote.get("status", {}).get("message", "") == local.validation.decision.message
    assert set(opa.queries) == {"vgate/main/result"}
    assert opa_server.session.get(opa_server.url + "/readyz").json()["policyEngine"] == "opa"
    assert opa.data["vgate"]["config"]["placement"]["zoneLabel"] == "topology.kubernetes.io/zone"


@pytest.mark.parametrize("mode,reason", [
    ("down", "OPA at http://127.0.0.1:"),
    ("slow", "did not answer within 0.5s"),
    ("error", "500"),
    ("malformed", "malformed answer"),
    ("wrong", "each result needs string fields rule and msg"),
])
def test_opa_failures_follow_the_failure_mode(opa, opa_server, mode, reason):
    opa.mode, opa.delay = mode, 2.0
    if mode == "down":
        opa.stop()
    started = time.monotonic()
    response = opa_server.post("/validate", review(pod(), uid=f"opa-{mode}")).json()["response"]
    assert time.monotonic() - started < 1.8, "the OPA timeout bounds the answer"
    assert response["allowed"] is False and response["status"]["code"] == 500
    assert reason in response["status"]["message"] and "failure mode is deny" in response["status"]["message"]
    record = next(r for r in opa_server.decisions() if r.get("uid") == f"opa-{mode}")
    assert record["decision"] == "error"


def test_mutation_does_not_need_opa(opa, opa_server):
    opa.stop()
    response = opa_server.post("/mutate", review(pod(namespace="ml-training"))).json()["response"]
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
