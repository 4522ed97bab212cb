"""The remote OPA backend: the tests that start vgate over HTTPS (the rest: tests/unit/policy/test_opa_backend.py)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml
from policy.test_opa_backend import SAMPLES

from webhook.offline.admit import admit

from fake_opa import FakeOpa
from helpers import POLICIES, free_port, pod, review


@pytest.fixture
def opa():
    fake = FakeOpa(POLICIES)
    yield fake
    fake.stop()



@pytest.fixture
def real_opa(opa_binary: Path, tmp_path: Path) -> Iterator[str]:
    """`opa run --server` on the shipped policies, as the README says to run it."""
    port = free_port()
    with open(tmp_path / "opa.log", "wb") as log:
        process = subprocess.Popen([str(opa_binary), "run", "--server", "--addr", f"127.0.0.1:{port}",
                                    "--ignore", "*.yaml", str(POLICIES)], stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "opa.log").read_text()
            time.sleep(0.2)
        yield url
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def opa_server(opa, start_server):
    return start_server(workers=1, extra_args=("--opa-url", opa.url, "--opa-timeout", "0.5"))


def test_samples_are_judged_by_a_real_opa_as_in_process(real_opa, start_server, config, engine):
    served = start_server(workers=1, extra_args=("--opa-url", real_opa, "--opa-timeout", "5"))
    judged = 0
    for sample in SAMPLES:
        for manifest in filter(None, yaml.safe_load_all(sample.read_text())):
            local = admit(manifest, config, engine)
            sent = review(manifest)
            sent["request"]["object"] = local.mutated
            remote = served.post("/validate", sent).json()["response"]
            assert remote["allowed"] is local.validation.decision.allowed, sample
            assert remote.get("status", {}).get("message", "") == local.validation.decision.message, sample
            judged += 1
    assert judged >= len(SAMPLES)
    assert served.session.get(served.url + "/readyz").json()["policyEngine"] == "opa"
    pushed = requests.get(real_opa + "/v1/data/vgate/config", timeout=5).json()["result"]
    assert pushed["placement"]["zoneLabel"] == "topology.kubernetes.io/zone"


def test_the_fake_speaks_the_data_api_as_opa_does(opa, opa_server):
    """What the failure tests below rely on: the fake answers a sample as OPA's Data API does."""
    response = opa_server.post("/validate", review(pod())).json()["response"]
    assert "allowed" in response
    assert set(opa.queries) == {"vgate/main/result"}
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


def test_a_real_opa_is_given_the_cluster_state_as_data_inventory(real_opa, config):
    """With cluster.watch and --opa-url, vgate puts the inventory at OPA's data.inventory when it
    changes, as kube-mgmt replicates objects: OPA's rules then infer a queue from it as regorus's do."""
    from webhook.core.contract import EngineInput
    from webhook.policy.opa import OpaEngine
    from webhook.policy.sources import load_policy_set

    engine = OpaEngine(real_opa, load_policy_set(POLICIES), config.document, 5.0)
    unnamed = pod("p", namespace="ml-training", priorityClassName="vgate-low")  # names no queue

    def denial() -> str:
        return " ".join(o.message for o in engine.evaluate(EngineInput.of(review(unnamed))).result.deny)

    assert 'queue "training" uses priority class "vgate-low"' in denial()
    annotated = {"cluster": {"v1": {"Namespace": {"ml-training": {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "ml-training", "annotations": {"scheduling.volcano.sh/queue-name": "batch"}}}}}}, "namespace": {}}
    engine.inventory = lambda: (1, annotated)
    assert "priority class" not in denial()
    engine.inventory = lambda: (2, {"cluster": {}, "namespace": {}})
    assert 'queue "training" uses priority class "vgate-low"' in denial()
