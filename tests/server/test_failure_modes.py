"""What happens when things break: evaluation errors, mutation errors, invalid files at start-up."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from e2e.waiting import eventually

from helpers import VGATE, copy_policies, evaluator_children, pod, review, shipped_config

# A real policy bug that reaches evaluation in both regorus engines: a result whose msg is a
# number breaks the decision contract. (Builtin errors such as to_number("x") are undefined on
# the RVM, as in OPA's default non-strict mode, so they no longer make a request fail.)
EXPLODING_RULE = """package vgate.rules.explodes

import rego.v1

deny contains {"rule": "explodes", "msg": msg} if {
\tboom := input.request.object.metadata.labels.boom
\tmsg := object.get({"ok": "boom is set"}, boom, 42)
}
"""


def exploding_policies(tmp_path):
    policies = copy_policies(tmp_path / "policies")
    (policies / "explodes").mkdir()
    (policies / "explodes" / "policy.rego").write_text(EXPLODING_RULE)
    return policies


def test_evaluation_error_is_denied_by_default_with_the_reason(tmp_path, start_server):
    server = start_server(policies=exploding_policies(tmp_path), workers=1)
    response = server.post("/validate", review(pod(labels={"boom": "bad"}), uid="boom-1")).json()["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert "each result needs string fields rule and msg" in response["status"]["message"]
    assert "failure mode is deny" in response["status"]["message"]
    healthy = server.post("/validate", review(pod(labels={"boom": "ok"}))).json()["response"]
    assert healthy["allowed"] is False and healthy["status"]["code"] == 403  # the rule itself still works
    record = next(r for r in server.decisions() if r.get("uid") == "boom-1")
    assert record["decision"] == "error" and "string fields rule and msg" in record["error"]
    metrics = server.session.get(server.url + "/metrics").text
    assert 'vgate_errors_total{endpoint="validate",reason="evaluation"} 1.0' in metrics


def test_failure_mode_allow_admits_with_a_warning(tmp_path, start_server):
    config = shipped_config(server={"failureMode": "allow"})  # only the evaluation's (audit's stays deny)
    server = start_server(policies=exploding_policies(tmp_path), config_text=config, workers=1)
    response = server.post("/validate", review(pod(labels={"boom": "x"}))).json()["response"]
    assert response["allowed"] is True
    assert "admitted by failure mode allow" in response["warnings"][0]


def test_mutation_error_allows_unpatched_and_is_recorded(server):
    # metadata must be an object; the API server never sends this, so it exercises the crash path.
    broken = {"apiVersion": "v1", "kind": "Pod", "metadata": "oops", "spec": {"containers": []}}
    sent = review(pod(namespace="ml-training"), uid="mutate-crash")
    sent["request"]["object"] = broken
    response = server.post("/mutate", sent)
    assert response.status_code == 200
    assert response.json()["response"] == {"uid": "mutate-crash", "allowed": True}
    record = next(r for r in server.decisions() if r.get("uid") == "mutate-crash")
    assert record["decision"] == "error" and record["error"].startswith("mutation failed")


def serve_fails(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*VGATE, "serve", "--bind", "127.0.0.1:1", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("text,expected", [
    ("server:\n  failureMode: deny\nqos:\n  memory:\n    guaranteed:\n      limit: lots\n",
     ":6: qos/memory/guaranteed/limit: 'lots' does not match"),
    ("queues:\n  byNamespace:\n    team-a: gold\n",
     ":3: queues/byNamespace/team-a: queue 'gold' is not in queues/definitions"),
    ("server:\n  failureMode: [deny\n", ":3: invalid YAML"),
], ids=["schema", "cross-reference", "yaml"])
def test_invalid_config_exits_with_file_line_and_reason(tmp_path, text, expected):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    result = serve_fails("--config", str(config))
    assert result.returncode == 1
    assert f"{config}{expected}" in result.stderr
    assert "Traceback" not in result.stderr


def test_rego_compile_error_exits_with_file_line_and_reason(tmp_path):
    policies = copy_policies(tmp_path / "policies")
    broken = policies / "network-no-external" / "policy.rego"
    lines = broken.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.startswith("egress := data"))
    broken.write_text(broken.read_text().replace("egress := data", "egress := := data"))
    result = serve_fails("--policies", str(policies))
    assert result.returncode == 1
    assert f"{broken}:{line}: expecting expression" in result.stderr and "Stack backtrace" not in result.stderr


@pytest.mark.parametrize("command", ["serve", "test"])
def test_error_found_only_when_evaluated_exits_with_file_line_and_reason(tmp_path, command):
    """An unsafe variable parses; regorus finds it on the first evaluation, which start-up runs."""
    policies = copy_policies(tmp_path / "policies")
    (policies / "unsafe").mkdir()
    rule = policies / "unsafe" / "policy.rego"
    rule.write_text(
        "package vgate.rules.unsafe\n\nimport rego.v1\n\n"
        'deny contains {"rule": "unsafe", "msg": "x"} if {\n\tsome a in [1]\n\tb := [a | some a in [2]]\n}\n'
    )
    result = (
        serve_fails("--policies", str(policies))
        if command == "serve"
        else subprocess.run([*VGATE, "test", str(policies)], capture_output=True, text=True, timeout=60)
    )
    assert result.returncode == 1
    assert f"{rule}:7:" in result.stderr and "used before definition" in result.stderr
    assert "Traceback" not in result.stderr and "Stack backtrace" not in result.stderr


def test_vgate_test_reports_a_sample_whose_evaluation_fails(tmp_path):
    """A rule breaking the decision contract fails its sample in `vgate test`; nothing escapes as a traceback."""
    policies = exploding_policies(tmp_path)
    (policies / "explodes" / "samples").mkdir()
    (policies / "explodes" / "samples" / "denied-boom.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: web, labels: {boom: bad}}\n"
        "spec: {containers: [{name: m, image: registry.example.com/app:1}]}\n"
    )
    result = subprocess.run([*VGATE, "test", str(policies)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert f"FAIL sample {policies}/explodes/samples/denied-boom.yaml: expected explodes" in result.stdout
    assert "Traceback" not in result.stderr + result.stdout


# Slow for one input: the RVM stops at its instruction budget and the interpreter, which has none,
# would count to the annotation's number while holding the GIL of its process.
SLOW_RULE = """package vgate.rules.slow

import rego.v1

deny contains {"rule": "slow", "msg": "counted"} if {
\tn := to_number(input.request.object.metadata.annotations.count)
\tcount([x | some x in numbers.range(1, n)]) < 0
}
"""

# Slow for every input, so already while the policy set is compiled and warmed up.
SLOW_AT_LOAD = """package vgate.rules.slow_load

import rego.v1

deny contains {"rule": "slow-load", "msg": "counted"} if {
\tcount([x | some x in numbers.range(1, 300000000)]) < 0
}
"""


def with_rule(tmp_path, name: str, text: str):
    policies = copy_policies(tmp_path / "policies")
    (policies / name).mkdir()
    (policies / name / "policy.rego").write_text(text)
    return policies


@pytest.mark.parametrize("failure_mode", ["deny", "allow"])
def test_an_evaluation_past_its_deadline_is_stopped_answered_per_failure_mode_and_recorded(
        tmp_path, start_server, failure_mode):
    server = start_server(policies=with_rule(tmp_path, "slow", SLOW_RULE), workers=1,
                          config_text=shipped_config(server={"failureMode": failure_mode,
                                                                  "evaluationTimeoutSeconds": 0.5}))
    slow = review(pod(annotations={"count": "400000000"}), uid="slow-1")
    response = server.post("/validate", slow).json()["response"]
    reason = "policy evaluation took longer than server.evaluationTimeoutSeconds (0.5 s) and was stopped"
    if failure_mode == "deny":
        assert response["allowed"] is False and response["status"]["code"] == 500
        assert reason in response["status"]["message"]
    else:
        assert response["allowed"] is True and reason in response["warnings"][0]
    record = next(r for r in server.decisions() if r.get("uid") == "slow-1")
    assert record["decision"] == "error" and reason in record["error"]
    # The worker was never held: the next requests are answered by a fresh evaluator.
    for uid in ("fast-1", "fast-2"):
        fast = server.post("/validate", review(pod(annotations={"count": "10"}), uid=uid)).json()["response"]
        assert fast["allowed"] is True, fast
    assert server.session.get(server.url + "/healthz", timeout=2).status_code == 200


def test_while_an_evaluation_runs_its_worker_answers_everything_else_even_with_one_app_thread(
        tmp_path, start_server):
    """The event loop hands an evaluation to the child and goes on: /mutate and /healthz on the same
    worker are answered while it runs. (Before, every request waited for an app thread, and with one
    app thread a slow evaluation held them all until its deadline.)"""
    server = start_server(policies=with_rule(tmp_path, "slow", SLOW_RULE), workers=1, extra_args=("--threads", "1"),
                          config_text=shipped_config(server={"evaluationTimeoutSeconds": 3}))
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(server.post, "/validate", review(pod(annotations={"count": "400000000"}), uid="slow-2"))
        time.sleep(0.5)  # the evaluation is under way
        for uid in ("meanwhile-1", "meanwhile-2"):
            started = time.monotonic()
            mutated = server.post("/mutate", review(pod(namespace="ml-training"), uid=uid))
            assert mutated.status_code == 200 and time.monotonic() - started < 1.5, time.monotonic() - started
            assert server.session.get(server.url + "/healthz", timeout=1.5).status_code == 200
        assert not slow.done()
        assert "took longer than server.evaluationTimeoutSeconds (3 s)" in slow.result().json()["response"]["status"][
            "message"]


def test_a_policy_set_slow_to_load_is_refused_at_start(tmp_path):
    config = tmp_path / "vgate.yaml"
    config.write_text(shipped_config(server={"policyLoadTimeoutSeconds": 1}))
    result = serve_fails("--config", str(config), "--policies", str(with_rule(tmp_path, "slow_load", SLOW_AT_LOAD)))
    assert result.returncode == 1
    assert "compiling and warming up the policy set took longer than server.policyLoadTimeoutSeconds (1 s)" in (
        result.stderr), result.stderr


def test_a_stopped_evaluator_is_replaced_by_the_readiness_check_before_a_request_meets_it(tmp_path, start_server):
    """SIGSTOP on the evaluator child (a wedged child looks the same): the worker's next readiness
    report pings it, gets no answer within a second, and starts a new one; the replica stays ready
    and the next request is answered at once, not after the 2 s evaluation deadline."""
    server = start_server(workers=1)
    [child] = evaluator_children(server.process.pid)
    os.kill(child, signal.SIGSTOP)
    try:
        assert eventually(lambda: evaluator_children(server.process.pid) not in ([], [child]), timeout=15), \
            server.output()[-2000:]
        started = time.monotonic()
        response = server.post("/validate", review(pod(), uid="after-stop")).json()["response"]
        took = time.monotonic() - started
        assert response["allowed"] is True and took < 1.5, (response, took)  # no evaluation deadline waited out
        assert server.session.get(server.url + "/readyz", timeout=5).status_code == 200
        assert "answered no ping within 1 s (EvaluatorTimeout): replaced" in server.output()
    finally:
        with contextlib.suppress(ProcessLookupError):  # killed and reaped by the worker, as it should be
            os.kill(child, signal.SIGKILL)
