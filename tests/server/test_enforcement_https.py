"""Enforcement: the tests that start vgate over HTTPS (the rest: tests/unit/core/test_enforcement.py)."""

from __future__ import annotations

import json
import subprocess

import yaml
from core.test_enforcement import OPEN_EGRESS, OPEN_EGRESS_MUTATED, exception

from webhook.files.config_file import DEFAULT_CONFIG_PATH

from helpers import POLICIES, VGATE, pod, review, shipped_config


def test_exception_use_is_recorded_over_https(tmp_path, start_server):
    exceptions_dir = tmp_path / "exceptions"
    exceptions_dir.mkdir()
    (exceptions_dir / "debug.yaml").write_text(yaml.safe_dump(exception()))
    config = DEFAULT_CONFIG_PATH.read_text() + f"\nexceptions:\n  dir: {exceptions_dir}\n"
    server = start_server(config_text=config, workers=1)
    sent = review(OPEN_EGRESS_MUTATED, uid="excepted-1")
    response = server.post("/validate", sent).json()["response"]
    assert response["allowed"] is True and response["auditAnnotations"]["excepted-rules"] == "network-no-external"
    record = next(r for r in server.decisions() if r.get("uid") == "excepted-1")
    excepted = [r for r in record["rules"] if r["action"] == "excepted"]
    assert excepted == [
        {
            "id": "network-no-external",
            "action": "excepted",
            "exception": "hostnet-debug",
            "message": excepted[0]["message"],
        }
    ]
    exempt = server.post("/validate", review(pod(namespace="kube-system", hostNetwork=True), uid="exempt-1")).json()
    assert exempt["response"]["allowed"] is True
    assert next(r for r in server.decisions() if r.get("uid") == "exempt-1")["exempt"] is True


def test_vgate_eval_applies_the_configs_exceptions_as_the_server_does(tmp_path, start_server):
    """Bypass of trust: eval ignored exceptions.dir and said DENIED where the server ALLOWED."""
    exceptions_dir = tmp_path / "exceptions"
    exceptions_dir.mkdir()
    (exceptions_dir / "hostnet-debug.yaml").write_text(yaml.safe_dump(exception()))
    (exceptions_dir / "sneaky.yaml").write_text(yaml.safe_dump(exception("sneaky", namespaces=["?*"])))
    config = shipped_config(exceptions={"dir": str(exceptions_dir)})
    (tmp_path / "vgate.yaml").write_text(config)
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(OPEN_EGRESS))

    def offline(namespace: str) -> subprocess.CompletedProcess:
        return subprocess.run([*VGATE, "eval", "--policies", str(POLICIES), "--config", str(tmp_path / "vgate.yaml"),
                               "-f", str(manifest), "--namespace", namespace, "-o", "json"],
                              capture_output=True, text=True, timeout=120)

    server = start_server(config_text=config, workers=1)
    for namespace, allowed in (("ml-training", True), ("ml-inference", False)):
        result = offline(namespace)
        assert result.returncode == (0 if allowed else 1), result.stderr
        verdict = json.loads(result.stdout)[0]
        sent = review({**OPEN_EGRESS_MUTATED, "metadata": {**OPEN_EGRESS["metadata"], "namespace": namespace}})
        answer = server.post("/validate", sent).json()["response"]
        assert verdict["allowed"] is answer["allowed"] is allowed, (namespace, verdict, answer)
    assert "policy exception rejected" in result.stderr and "?* would except every namespace" in result.stderr
