"""Pod controllers: the tests that start vgate over HTTPS (the rest: tests/unit/core/test_pod_controllers.py)."""

from __future__ import annotations

from core.test_pod_controllers import PRIVILEGED, controller, debug_review, resize_review

from helpers import review


def test_https_controller_and_debug_decisions_are_answered_and_recorded(server):
    deployment = controller("Deployment", {"containers": [PRIVILEGED]}, name="https-web")
    answer = server.post("/validate", review(deployment)).json()["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 403
    assert 'Deployment https-web: privileged (container "app" must not set' in answer["status"]["message"]
    debug = debug_review({"name": "https-debugger", "image": "x", "securityContext": {"privileged": True}})
    answer = server.post("/validate", debug).json()["response"]
    assert answer["allowed"] is False and "https-debugger" in answer["status"]["message"]
    records = server.decisions()
    web = next(r for r in records if r.get("name") == "https-web")
    assert (web["kind"], web["decision"]) == ("apps/v1/Deployment", "denied")
    assert [rule["id"] for rule in web["rules"] if rule["action"] == "deny"] == ["security-privileged-container"]
    debugged = next(r for r in records if r.get("name") == "trainer" and r.get("decision") == "denied")
    assert debugged["operation"] == "UPDATE"


def test_https_an_in_place_resize_is_judged_by_the_resource_rules(server):
    """Bypass: pods/resize was answered as allowed (an unknown subresource); 4Gi could become 1Ti."""
    answer = server.post("/validate", resize_review("1Ti")).json()["response"]
    assert answer["allowed"] is False and "[resources-memory-limit-cap]" in answer["status"]["message"]
    assert server.post("/validate", resize_review("8Gi")).json()["response"]["allowed"] is True
