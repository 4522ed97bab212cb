"""The gateway alone, with a fake engine and a fake decision log: decide, record, count, fail well.

No server, no regorus: what the gateway does with each answer an engine or a log can give,
including the failures that are hard to provoke end to end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from webhook.core.contract import EngineInput, Evaluation, PolicyResult, Violation
from webhook.core.errors import AuditError, EvaluationError, RequestError
from webhook.files.config_file import parse_config
from webhook.server.gateway import Gateway, bounded, bounded_record
from webhook.server.metrics import Metrics

from helpers import pod, review


class FakeEngine:
    """Answers what it is told to, or raises; remembers what it was asked."""

    revision = "fake-revision"
    name = "fake"

    def __init__(self, answer: Evaluation | Exception) -> None:
        self.answer = answer
        self.asked: list[EngineInput] = []

    def evaluate(self, request: EngineInput) -> Evaluation:
        self.asked.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class FakeDecisionLog:
    """Keeps records in memory, or fails every write like a full disk."""

    def __init__(self, broken: bool = False) -> None:
        self.records: list[dict[str, Any]] = []
        self.broken = broken
        self.failure_balance = 0
        self.directory = Path("/app/audit")

        self.stalled = 0.0

    def unwritable(self) -> str | None:
        return "No space left on device" if self.broken else None

    def stalled_seconds(self) -> float:
        return self.stalled

    def record(self, entry: dict[str, Any]) -> None:
        if self.broken:
            raise AuditError("cannot write the decision log: No space left on device")
        self.records.append(entry)

    async def record_async(self, entry: dict[str, Any]) -> None:
        self.record(entry)


DENIED = Evaluation(PolicyResult((Violation("security-privileged-container", "Pod: container c is privileged"),), ()),
                    "fake")


def gateway(engine: FakeEngine, log: FakeDecisionLog, config_text: str = "{}") -> Gateway:
    return Gateway(parse_config(config_text), engine, log, [], Path("policies"), Metrics())  # type: ignore[arg-type]


def counted(gate: Gateway, name: str, labels: dict[str, str]) -> float:
    return gate.metrics.registry.get_sample_value(name, labels) or 0.0


def body(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(review(obj))


def test_a_denial_is_answered_recorded_and_counted():
    engine, log = FakeEngine(DENIED), FakeDecisionLog()
    gate = gateway(engine, log)
    sent = body(pod(namespace="web"))
    response = gate.validate(sent)["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert "[security-privileged-container] Pod: container c is privileged" in response["status"]["message"]
    assert engine.asked[0].raw == sent and engine.asked[0].document == orjson.loads(sent)  # parsed once, passed on
    (record,) = log.records
    assert (record["decision"], record["policyRevision"]) == ("denied", "fake-revision")
    assert record["rules"] == [{"id": "security-privileged-container", "action": "deny",
                                "message": "Pod: container c is privileged"}]
    assert counted(gate, "vgate_policy_evaluations_total", {"engine": "fake"}) == 1


def test_an_unrecordable_decision_is_refused_unless_audit_failure_mode_allows():
    strict = gateway(FakeEngine(Evaluation(PolicyResult((), ()), "fake")), FakeDecisionLog(broken=True))
    response = strict.validate(body(pod()))["response"]
    assert response["allowed"] is False and response["status"]["code"] == 500
    assert "nothing is admitted unrecorded" in response["status"]["message"]
    assert counted(strict, "vgate_errors_total", {"endpoint": "validate", "reason": "audit"}) == 1
    answered = {"endpoint": "validate", "kind": "Pod", "operation": "CREATE", "dry_run": "false"}
    assert counted(strict, "vgate_admission_requests_total", {**answered, "decision": "error"}) == 1  # as refused
    assert counted(strict, "vgate_admission_requests_total", {**answered, "decision": "allowed"}) == 0
    lenient = gateway(FakeEngine(Evaluation(PolicyResult((), ()), "fake")), FakeDecisionLog(broken=True),
                      "audit:\n  failureMode: allow\n")
    assert lenient.validate(body(pod()))["response"]["allowed"] is True
    mutated = strict.mutate(body(pod(namespace="ml-training")))["response"]  # /mutate follows it too
    assert mutated["allowed"] is False and "patch" not in mutated
    assert counted(strict, "vgate_errors_total", {"endpoint": "mutate", "reason": "audit"}) == 1
    assert "patch" in lenient.mutate(body(pod(namespace="ml-training")))["response"]


@pytest.mark.parametrize("failure", [EvaluationError("data.vgate.main.result must be an object"),
                                     RuntimeError("engine crashed")])
def test_an_engine_failure_follows_the_failure_mode_and_is_recorded(failure):
    log = FakeDecisionLog()
    refused = gateway(FakeEngine(failure), log).validate(body(pod()))["response"]
    assert refused["allowed"] is False and refused["status"]["code"] == 500
    assert str(failure) in refused["status"]["message"]
    assert log.records[-1]["decision"] == "error" and str(failure) in log.records[-1]["error"]
    admitted = gateway(FakeEngine(failure), log, "server:\n  failureMode: allow\n").validate(body(pod()))["response"]
    assert admitted["allowed"] is True and "admitted by failure mode allow" in admitted["warnings"][0]


def test_exempt_namespaces_and_unknown_kinds_never_reach_the_engine():
    engine, log = FakeEngine(DENIED), FakeDecisionLog()
    gate = gateway(engine, log)
    assert gate.validate(body(pod(namespace="kube-system")))["response"]["allowed"] is True
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "web"}}
    assert gate.validate(body(config_map))["response"]["allowed"] is True
    assert engine.asked == [] and [r["decision"] for r in log.records] == ["allowed", "allowed"]
    assert log.records[0]["exempt"] is True


def test_bad_input_is_refused_and_still_recorded():
    log = FakeDecisionLog()
    gate = gateway(FakeEngine(DENIED), log)
    with pytest.raises(RequestError) as refused:
        gate.validate(b'{"kind": "AdmissionReview"')
    assert refused.value.status == 400
    assert log.records[-1]["decision"] == "error" and log.records[-1]["httpStatus"] == 400
    assert counted(gate, "vgate_errors_total", {"endpoint": "validate", "reason": "http_400"}) == 1


def many_containers(count: int) -> dict[str, Any]:
    return pod(namespace="ml-training", containers=[{"name": f"c{i}", "image": "x"} for i in range(count)])


def test_an_oversized_object_is_denied_before_any_rule_runs_and_not_mutated():
    engine, log = FakeEngine(DENIED), FakeDecisionLog()
    gate = gateway(engine, log)
    response = gate.validate(body(many_containers(257)))["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    message = response["status"]["message"]
    assert "257 containers; the gateway judges at most 256 (server.maxContainersPerPod)" in message
    assert engine.asked == [] and log.records[-1]["decision"] == "denied"
    assert "patch" not in gate.mutate(body(many_containers(257)))["response"]
    tasks = [{"name": f"t{i}", "replicas": 1, "template": {"spec": {"containers": []}}} for i in range(3)]
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "web"},
           "spec": {"tasks": tasks}}
    small = gateway(FakeEngine(DENIED), FakeDecisionLog(), "server:\n  maxTasksPerJob: 2\n")
    assert "3 tasks; the gateway judges at most 2" in small.validate(body(job))["response"]["status"]["message"]
    assert gate.validate(body(many_containers(256)))["response"]["status"]["code"] == 403  # judged: the rule denies
    assert len(engine.asked) == 1


def test_the_decision_record_stays_bounded_and_metric_labels_come_from_a_fixed_set():
    runaway = Evaluation(PolicyResult((Violation("some-rule", "x" * 1_000_000),), ()), "fake")
    log = FakeDecisionLog()
    gate = gateway(FakeEngine(runaway), log)
    widget = {"apiVersion": "example.com/v1", "kind": "Widget" + "w" * 500, "metadata": {"name": "n" * 100_000}}
    gate.validate(body(pod()))
    gate.validate(body(widget))
    record = orjson.dumps(log.records[0])
    assert len(record) < 20_000 and b"[1000000 bytes, sha256 " in record
    assert len(orjson.dumps(log.records[1])) < 20_000
    exposition = gate.metrics.exposition()[0].decode()
    assert 'kind="other"' in exposition and "Widgetw" not in exposition


def test_a_record_skips_the_walk_only_when_no_string_in_it_can_exceed_the_limit():
    """bounded_record's shortcut (the record's JSON within FIELD_LIMIT bytes) cuts every string the walk
    cuts: strings of any length around the limit, alone or beside others, multi-byte or not."""
    for size in (1, 1000, 2000, 2040, 2047, 2048, 2049, 3000, 10_000):
        for text in ("n" * size, "名" * size):
            for entry in ({"name": text}, {"rules": [{"msg": text}], "uid": "u"}, {"a": "x" * 10, "b": [text, 1]}):
                assert bounded_record(entry) == bounded(entry), (size, entry)


def test_a_log_that_takes_one_write_in_three_still_drains_the_replica():
    """A nearly full volume: small records still fit into a segment's last page, most do not. Once a
    success reset the count, and such a replica refusing two thirds of its requests stayed ready."""
    log = FakeDecisionLog()
    gate = gateway(FakeEngine(Evaluation(PolicyResult((), ()), "fake")), log, "audit:\n  unreadyAfterFailures: 3\n")
    for _ in range(3):
        log.broken = True
        gate.validate(body(pod()))
        gate.validate(body(pod()))
        log.broken = False
        gate.validate(body(pod()))
        log.broken = True  # the probe too finds no room
    assert gate.audit_unready() == ("decision log unavailable in /app/audit: No space left on device "
                                    "(3 more writes failed than succeeded)")


def test_a_replica_whose_log_keeps_failing_is_unready_until_the_log_takes_writes_again():
    log = FakeDecisionLog(broken=True)
    gate = gateway(FakeEngine(Evaluation(PolicyResult((), ()), "fake")), log, "audit:\n  unreadyAfterFailures: 2\n")
    gate.validate(body(pod()))
    assert gate.audit_unready() is None  # one failure is not a trend
    gate.validate(body(pod()))
    assert gate.audit_unready() == ("decision log unavailable in /app/audit: No space left on device "
                                    "(2 more writes failed than succeeded)")
    log.broken = False  # the volume is back: the probe succeeds, the replica is ready, no record written
    assert gate.audit_unready() is None and log.records == []
    assert gate.validate(body(pod()))["response"]["allowed"] is True and len(log.records) == 1


def on_the_loop(gate: Gateway, endpoint: str, sent: bytes) -> tuple[dict[str, Any], list[str]]:
    """``gate``'s answer from its event-loop path, and the calls it handed to an app thread."""
    offloaded: list[str] = []

    async def offload(call: Any, *args: Any) -> Any:
        offloaded.append(call.__name__)
        return call(*args)

    return asyncio.run(gate.answer_async(endpoint, sent, offload)), offloaded


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key != "latencyMs"}


@pytest.mark.parametrize("answer", [DENIED, EvaluationError("data.vgate.main.result must be an object")])
def test_the_event_loop_path_answers_and_records_as_the_blocking_one(answer):
    """The same steps, waited for two ways: blocking (Flask, the offline commands) and on the event
    loop (the ASGI path). An engine that is not the evaluator child (OPA over HTTP) is asked from an
    app thread, never on the loop."""
    blocking, looping = FakeDecisionLog(), FakeDecisionLog()
    for endpoint, obj, handed in [("validate", pod(namespace="web"), ["evaluate"]),
                                  ("mutate", pod(namespace="ml-training"), []),
                                  ("validate", many_containers(257), [])]:  # denied before any rule runs
        sent = body(obj)
        expected = getattr(gateway(FakeEngine(answer), blocking), endpoint)(sent)
        found, offloaded = on_the_loop(gateway(FakeEngine(answer), looping), endpoint, sent)
        assert (found, offloaded) == (expected, handed)
    assert len(looping.records) == 3
    assert [comparable(r) for r in looping.records] == [comparable(r) for r in blocking.records]
    with pytest.raises(RequestError):  # refused alike, and recorded alike
        on_the_loop(gateway(FakeEngine(answer), looping), "validate", b"{broken")
    assert looping.records[-1]["httpStatus"] == 400


def test_a_commit_that_does_not_end_makes_the_replica_unready_before_any_write_fails():
    """A disk that stopped answering: the commit in progress never returns, so no write fails and the
    failure count never grows; the event loop may be the one waiting. Unready once it runs 10 s."""
    log = FakeDecisionLog()
    gate = gateway(FakeEngine(Evaluation(PolicyResult((), ()), "fake")), log)
    log.stalled = 9.5
    assert gate.audit_unready() is None
    log.stalled = 12.4
    assert gate.audit_unready() == "decision log write in /app/audit has not completed for 12s"
