"""End to end: a real `vgate serve` (granian, TLS) answering over HTTPS.

The certificate is verified against the CA `vgate certs` wrote; bodies are real AdmissionReviews.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import time

import jsonpatch
import pytest
import requests
from cryptography import x509

from webhook.server.certs import write_certs

from helpers import RESTRICTED_SPEC, pod, review, shipped_config

SENSITIVE = {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}
DIGEST = "registry.example.com/app@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
PINNED = {"topology.kubernetes.io/zone": "cn-north-1a",
          "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true"}


# The head of a raw POST to /validate, for the tests that frame its body themselves.
POST_VALIDATE = b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


def tls_to(server) -> ssl.SSLSocket:
    """A raw TLS connection to ``server``, its certificate verified against the CA `vgate certs` wrote, for
    requests framed by hand; a read waits 10 s at most."""
    context = ssl.create_default_context(cafile=str(server.ca))
    tls = context.wrap_socket(socket.create_connection(("127.0.0.1", server.port)), server_hostname="localhost")
    tls.settimeout(10)
    return tls


def answer(response: requests.Response) -> dict:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    return body["response"]


def test_certificate_verifies_against_generated_ca_for_service_names(server):
    with tls_to(server) as tls:
        der = tls.getpeercert(binary_form=True)
    names = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "vgate.vgate-system.svc" in names.get_values_for_type(x509.DNSName)
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(server.url + "/healthz", timeout=5, verify=True)  # system CAs do not know ours


def test_health_ready_and_metrics(server):
    assert server.session.get(server.url + "/healthz").json() == {"status": "ok"}
    ready = server.session.get(server.url + "/readyz").json()
    assert ready["status"] == "ready" and len(ready["policyRevision"]) == 64
    assert ready["policyEngine"] == "rvm"
    before = rvm_evaluations(server)
    # A pod no rule warns about, so the decision counted below is "allowed" whatever ran before.
    for _ in range(3):
        answer = server.post("/validate", review(pod(namespace="web", **RESTRICTED_SPEC)))
        assert answer.json()["response"]["allowed"] is True and "warnings" not in answer.json()["response"]
    metrics = server.session.get(server.url + "/metrics")
    assert metrics.headers["Content-Type"].startswith("text/plain")
    assert (
        'vgate_admission_requests_total{decision="allowed",dry_run="false",endpoint="validate",kind="Pod",operation="CREATE"}'
        in metrics.text
    )
    assert "vgate_admission_duration_seconds_bucket" in metrics.text
    assert rvm_evaluations(server) == before + 3  # one per request: loading an engine counts none


def rvm_evaluations(server) -> float:
    text = server.session.get(server.url + "/metrics").text
    found = re.search(r'^vgate_policy_evaluations_total\{engine="rvm"\} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def counter(server, sample: str) -> float:
    found = re.search(rf"^{re.escape(sample)} (\S+)$", server.session.get(server.url + "/metrics").text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_request_and_patch_bytes_are_counted_as_received_and_sent(server):
    """Issue 39: bytes per pod, read from vgate's metrics, over every worker process."""
    requests_sample = 'vgate_admission_request_bytes_total{endpoint="%s"}'
    before = {e: counter(server, requests_sample % e) for e in ("mutate", "validate")}
    patches = counter(server, "vgate_admission_patch_bytes_total")
    body = json.dumps(review(pod(namespace="ml-training"))).encode()
    sent = answer(server.post("/mutate", body))["patch"]
    server.post("/validate", body + b" " * 10)
    assert counter(server, requests_sample % "mutate") - before["mutate"] == len(body)
    assert counter(server, requests_sample % "validate") - before["validate"] == len(body) + 10
    assert counter(server, "vgate_admission_patch_bytes_total") - patches == len(sent)


def test_mutate_returns_base64_json_patch_for_a_pod(server):
    source = pod(namespace="ml-training", annotations={"team": "vision"})
    sent = review(source)
    response = answer(server.post("/mutate", sent))
    assert response["uid"] == sent["request"]["uid"] and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {
        "op": "add",
        "path": "/metadata/annotations/scheduling.volcano.sh~1queue-name",
        "value": "training",
    } in patch
    result = jsonpatch.apply_patch(source, patch)
    second = answer(server.post("/mutate", review(result)))
    assert "patch" not in second, "mutation must be idempotent"
    assert response["warnings"] == ["pod container main set no cpu/memory: queue training (Guaranteed) gave it "
                                    "cpu 1, memory 4Gi; set resources to choose"]  # not silently
    assert "warnings" not in second or not second["warnings"]
    given = pod(namespace="ml-training", containers=[{"name": "main", "image": "registry.example.com/app:1",
                                                     "resources": {"limits": {"cpu": "8", "memory": "64Gi"}}}])
    assert not answer(server.post("/mutate", review(given))).get("warnings")  # its own: nothing to say


def test_validate_denies_with_every_rule_and_how_to_fix(server):
    bad = pod(namespace="ml-training", labels={"vgate.io/data-classification": "sensitive"}, hostNetwork=True)
    response = answer(server.post("/validate", review(bad)))
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    message = response["status"]["message"]
    for rule in ("placement-single-zone", "placement-encrypted-memory", "network-no-external"):
        assert f"[{rule}]" in message
    assert "remove hostNetwork" in message and "nodeSelector" in message
    denied = set(response["auditAnnotations"]["denied-rules"].split(","))
    assert {
        "network-no-external",
        "placement-encrypted-memory",
        "placement-single-zone",
        "security-host-namespaces",
    } <= denied


def test_validate_allows_a_compliant_sensitive_pod(server):
    # As /mutate leaves it: ml-training's queue (training) runs Guaranteed, so it carries memory limits.
    guaranteed = {"limits": {"cpu": "1", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "4Gi"}}
    good = pod(namespace="ml-training", labels=SENSITIVE, nodeSelector=PINNED,
               containers=[{"name": "main", "image": DIGEST, "resources": guaranteed}])
    response = answer(server.post("/validate", review(good)))
    assert response["allowed"] is True and "status" not in response
    assert len(response["auditAnnotations"]["policy-revision"]) == 64


def test_v1beta1_is_answered_in_kind(server):
    sent = review(pod(namespace="ml-training"))
    sent["apiVersion"] = "admission.k8s.io/v1beta1"
    body = server.post("/mutate", sent).json()
    assert body["apiVersion"] == "admission.k8s.io/v1beta1" and body["response"]["patchType"] == "JSONPatch"


def test_unknown_kind_is_allowed_untouched(server):
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}
    for endpoint in ("/mutate", "/validate"):
        response = answer(server.post(endpoint, review(config_map, namespace="ml-training")))
        assert response == {"uid": "offline", "allowed": True}


def deep(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


BAD_BODIES = {
    "malformed JSON": ('{"kind": "AdmissionReview", ', "malformed JSON"),
    "not an AdmissionReview": (json.dumps({"kind": "Pod", "apiVersion": "v1"}), "not an AdmissionReview"),
    "JSON array": ("[1, 2]", "expected a JSON object"),
    "missing request": (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}), "no request"),
    "wrong apiVersion": (json.dumps({**review(pod()), "apiVersion": "admission.k8s.io/v2"}), "unsupported apiVersion"),
    "deeply nested": (deep(150), "nested deeper than 100"),
    "very deeply nested": (deep(5000), "malformed JSON"),
}


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
def test_bad_bodies_get_400_with_a_one_line_message(server, case, endpoint):
    body, expected = BAD_BODIES[case]
    response = server.post(endpoint, body)
    assert response.status_code == 400
    error = response.json()
    assert error["status"] == 400 and expected in error["error"]
    assert "\n" not in response.text.strip() and "Traceback" not in response.text


@pytest.mark.parametrize(
    "breakage,expected",
    [
        (lambda r: r["request"].pop("uid"), "request.uid is missing"),
        (lambda r: r["request"].update(object="a pod"), "request.object must be a JSON object"),
        (lambda r: r["request"].update(object=None), "request.object is required for CREATE"),
        (lambda r: r["request"].pop("kind"), "request.kind must be an object"),
        (lambda r: r["request"].update(operation="PATCH"), "request.operation 'PATCH'"),
    ],
)
def test_incomplete_admission_requests_get_400(server, breakage, expected):
    sent = review(pod())
    breakage(sent)
    response = server.post("/validate", sent)
    assert response.status_code == 400 and expected in response.json()["error"]


def test_oversized_body_gets_413(server):
    huge = review(pod(annotations={"blob": "x" * (3 * 1024 * 1024)}))
    response = server.post("/validate", huge)
    assert response.status_code == 413
    assert response.json() == {"error": "request body is larger than 3145728 bytes", "status": 413}


def test_an_oversized_chunked_body_gets_413_and_is_recorded(server):
    """No Content-Length to refuse by: the body is read to the cap, the rest read and dropped (to a
    bound), so the client, still sending, is not cut off before it reads the answer."""

    def chunks():
        for _ in range(64):  # 4 MiB, over the 3 MiB cap
            yield b"x" * 65536

    for _ in range(5):  # the cut-off was a race: once in a while the client saw a reset instead
        response = server.session.post(server.url + "/validate", data=chunks(), timeout=30,
                                       headers={"Content-Type": "application/json", "X-Probe": "chunked-413"})
        assert response.request.headers.get("Transfer-Encoding") == "chunked"
        assert response.status_code == 413
        assert response.json() == {"error": "request body is larger than 3145728 bytes", "status": 413}
        assert server.decisions()[-1]["httpStatus"] == 413


def test_unknown_paths_and_methods_are_json_errors(server):
    assert server.session.get(server.url + "/nope").json()["status"] == 404
    assert server.session.get(server.url + "/validate").json()["status"] == 405


def test_every_decision_reaches_the_audit_trail(server):
    sent = review(pod(name="audited", namespace="ml-training"), uid="audit-1", dry_run=True)
    server.post("/mutate", sent)
    server.post("/validate", sent)
    server.post("/validate", "{not json")
    records = server.decisions()
    mine = [r for r in records if r.get("uid") == "audit-1"]
    assert {r["endpoint"] for r in mine} == {"mutate", "validate"}
    mutate_record = next(r for r in mine if r["endpoint"] == "mutate")
    assert mutate_record["decision"] == "mutated" and mutate_record["dryRun"] is True
    assert "/metadata/annotations" in mutate_record["patch"] and mutate_record["queue"] == "training"
    assert mutate_record["replica"] == "test-replica" and mutate_record["user"] == "vgate-offline"
    refused = [r for r in records if r.get("httpStatus") == 400 and "malformed JSON" in r["error"]]
    assert refused and refused[-1]["decision"] == "error"
    for segment in server.audit_dir.glob("*.jsonl"):
        assert segment.stat().st_mode & 0o777 == 0o600


WARNING_RULE = """package vgate.rules.latest_tag

import rego.v1

warn contains {"rule": "image-latest-tag", "msg": msg} if {
\tsome c in input.request.object.spec.containers
\tendswith(c.image, ":latest")
\tmsg := sprintf("container %s uses a :latest image: pin a version", [c.name])
}
"""


def test_warn_results_become_admission_warnings(tmp_path, start_server):
    from helpers import copy_policies

    policies = copy_policies(tmp_path / "policies")
    (policies / "image-latest-tag").mkdir()
    (policies / "image-latest-tag" / "policy.rego").write_text(WARNING_RULE)
    server = start_server(policies=policies, workers=1)
    latest = pod(containers=[{"name": "web", "image": "nginx:latest"}])
    response = answer(server.post("/validate", review(latest)))
    assert response["allowed"] is True
    assert "[image-latest-tag] container web uses a :latest image: pin a version" in response["warnings"]
    assert "image-latest-tag" in response["auditAnnotations"]["warned-rules"].split(",")
    record = [r for r in server.decisions() if r["endpoint"] == "validate"][-1]
    assert record["decision"] == "warned"
    assert {
        "id": "image-latest-tag",
        "action": "warn",
        "message": "container web uses a :latest image: pin a version",
    } in record["rules"]


def test_with_client_ca_only_callers_with_a_certificate_from_it_get_an_answer(tmp_path, start_server):
    """server.clientCA: mutual TLS, as the API server does with a kubeconfig naming a client certificate."""
    apiserver = write_certs(tmp_path / "apiserver", "kube-apiserver", "kube-system", client=True)
    stranger = write_certs(tmp_path / "stranger", "kube-apiserver", "kube-system", client=True)
    server = start_server(config_text=shipped_config(server={"clientCA": str(apiserver.ca)}), workers=1,
                          client_cert=(str(apiserver.cert), str(apiserver.key)))
    body = json.dumps(review(pod(), uid="mtls"))
    headers = {"Content-Type": "application/json"}

    answered = server.session.post(server.url + "/validate", data=body, headers=headers, timeout=5)
    assert answered.status_code == 200 and answered.json()["response"]["uid"] == "mtls"
    for cert in (None, (str(stranger.cert), str(stranger.key))):
        with requests.Session() as caller:
            caller.verify, caller.cert, caller.trust_env = str(server.ca), cert, False
            with pytest.raises(requests.exceptions.ConnectionError):
                caller.post(server.url + "/validate", data=body, headers=headers, timeout=5)
    assert [r["uid"] for r in server.decisions() if r.get("uid")] == ["mtls"]


def test_both_content_length_and_chunked_get_the_json_shape_and_a_record(server):
    """Request smuggling's classic shape: HTTP/1.1 says chunked wins; gunicorn answered its own HTML page."""
    body = json.dumps(review(pod(), uid="cl-te")).encode()
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    with tls_to(server) as tls:
        tls.sendall(POST_VALIDATE + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                    + chunked)
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    head, _, payload = answer.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200"), head
    assert json.loads(payload)["response"]["uid"] == "cl-te"
    assert any(r.get("uid") == "cl-te" for r in server.decisions())


def _exchange(tls: ssl.SSLSocket, pieces: list[bytes], pause: float = 0.3) -> tuple[str, bytes]:
    """Send ``pieces`` on ``tls`` with a pause between them; the answer's head and its body (by its length)."""
    for index, piece in enumerate(pieces):
        if index:
            time.sleep(pause)  # each piece its own TLS record, so the server reads the body in parts
        tls.sendall(piece)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += tls.recv(65536)
    head, _, payload = answer.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
    while len(payload) < length:
        payload += tls.recv(65536)
    return head.decode(), payload


def test_a_body_is_whole_at_its_content_length_and_the_connection_serves_the_next(server):
    """The body is read until its Content-Length is in, however it is split, and no further: the same
    keep-alive connection then serves an empty body (400 without waiting for one) and another review."""
    def refused() -> list[dict]:
        return [r for r in server.decisions() if r.get("httpStatus") == 400 and r["endpoint"] == "validate"]

    earlier = len(refused())
    body = json.dumps(review(pod(), uid="in-pieces")).encode()
    head = POST_VALIDATE + b"Content-Length: %d\r\n\r\n"
    with tls_to(server) as tls:
        status, payload = _exchange(tls, [head % len(body) + body[:7], body[7:300], body[300:]])
        assert status.startswith("HTTP/1.1 200"), status
        assert json.loads(payload)["response"]["uid"] == "in-pieces"
        status, payload = _exchange(tls, [head % 0])
        assert status.startswith("HTTP/1.1 400") and "\n" not in payload.decode(), (status, payload)
        again = json.dumps(review(pod(), uid="after-empty")).encode()
        status, payload = _exchange(tls, [head % len(again) + again])
        assert json.loads(payload)["response"]["uid"] == "after-empty"
    assert len(refused()) == earlier + 1 and refused()[-1]["decision"] == "error"
    assert {"in-pieces", "after-empty"} <= {r.get("uid") for r in server.decisions()}


def test_a_chunked_body_is_not_cut_at_a_content_length_sent_beside_it(server):
    """Chunked wins over Content-Length (RFC 9112, 6.3): a first chunk exactly as long as the declared
    length is not the whole body; judging it alone would refuse a review the API server sent whole."""
    body = json.dumps(review(pod(), uid="cl-te-split")).encode()
    with tls_to(server) as tls:
        status, payload = _exchange(tls, [
            POST_VALIDATE + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n" + body[:5] + b"\r\n",
            f"{len(body) - 5:x}\r\n".encode() + body[5:] + b"\r\n0\r\n\r\n",
        ])
    assert status.startswith("HTTP/1.1 200"), (status, payload)
    assert json.loads(payload)["response"]["uid"] == "cl-te-split"


def test_bad_updates_get_a_clear_decision_and_are_recorded(server):
    """UPDATEs a real API server should never send, and one it sends but vgate does not judge."""
    running = pod(namespace="ml-training", schedulerName="volcano", nodeName="node-1")
    # A subresource of a kind vgate judges, which its configuration does not register: refused, not allowed.
    status = review(running, operation="UPDATE", old_object=running, uid="bad-subresource")
    status["request"]["subResource"] = "status"
    response = answer(server.post("/validate", status))
    assert response["allowed"] is False and "vgate judges no pods/status writes" in response["status"]["message"]
    # An oldObject of another kind: what changed cannot be told; a one-line JSON 400.
    other = review(running, operation="UPDATE", old_object={"apiVersion": "v1", "kind": "ConfigMap"}, uid="bad-old")
    reply = server.post("/validate", other)
    assert reply.status_code == 400 and "request.oldObject is a 'ConfigMap'" in reply.json()["error"]
    assert "\n" not in reply.text.strip()
    # No oldObject at all: judged conservatively, as if everything the object has were added.
    foreign = {"key": "dedicated", "operator": "Equal", "value": "serving", "effect": "NoSchedule"}
    tolerating = pod(namespace="ml-training", schedulerName="volcano", tolerations=[foreign])
    missing = review(tolerating, operation="UPDATE", uid="no-old")
    missing["request"]["oldObject"] = None
    response = answer(server.post("/validate", missing))
    assert response["allowed"] is False and "[placement-foreign-taint-toleration]" in response["status"]["message"]
    recorded = {r.get("uid"): r for r in server.decisions()}  # on disk before each answer left
    assert recorded["bad-subresource"]["allowed"] is False and recorded["no-old"]["allowed"] is False
    assert any(r.get("decision") == "error" and "ConfigMap" in (r.get("error") or "") for r in server.decisions())
