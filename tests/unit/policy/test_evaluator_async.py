"""The evaluator child asked from the event loop (IsolatedEngine.evaluate_async): the same answers
as the blocking path, the same deadline, and a loop that is never held while the child works.

Real children, real policies: the loop writes the frame and reads the reply as the pipe turns
readable; what it cannot do without blocking is handed to ``offload`` (an app thread in the server).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from webhook.core.contract import EngineInput
from webhook.core.errors import EvaluationError
from webhook.policy import isolated
from webhook.policy.isolated import IsolatedEngine
from webhook.policy.sources import load_policy_set

from helpers import POLICIES, copy_policies, evaluator_children, pod, review

# Slow in proportion to an annotation: a deadline can be met or missed at will.
SLOW_RULE = """package vgate.rules.slow

import rego.v1

deny contains {"rule": "slow", "msg": "counted"} if {
\tn := to_number(object.get(input.request.object.metadata, ["annotations", "count"], "1"))
\tcount([x | some x in numbers.range(1, n)]) < 0
}
"""


def slow_policies(tmp_path: Path) -> Path:
    policies = copy_policies(tmp_path / "policies")
    (policies / "slow").mkdir()
    (policies / "slow" / "policy.rego").write_text(SLOW_RULE)
    return policies


def engine_for(policies: Path, config: Any, timeout: float = 5.0) -> IsolatedEngine:
    return IsolatedEngine(load_policy_set(policies), config.document, timeout=timeout, load_budget=120)


def asked(obj: dict[str, Any], uid: str = "u") -> EngineInput:
    return EngineInput.of(review(obj, uid=uid))


class Offload:
    """Runs a call on another thread, as the server's app threads do, and remembers what it ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, call: Callable[..., Any], *args: Any) -> Any:
        self.calls.append(call.__name__)
        return await asyncio.to_thread(call, *args)


def on_loop(work: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(work())


PODS = [pod(), pod("leak", "ml-training", labels={"vgate.io/data-classification": "sensitive"}),
        pod(hostNetwork=True, containers=[{"name": "c", "image": "x", "securityContext": {"privileged": True}}])]


def test_the_loop_gets_the_answers_the_blocking_path_gets_without_a_thread(config):
    engine = engine_for(POLICIES, config)
    offload = Offload()
    try:
        expected = [engine.evaluate(asked(obj)) for obj in PODS]

        async def ask_all() -> list[Any]:
            return [await engine.evaluate_async(asked(obj), offload) for obj in PODS]

        assert on_loop(ask_all) == expected
        assert any(evaluation.result.deny for evaluation in expected)  # not only empty answers compared
        assert offload.calls == []
    finally:
        engine.close()


def test_while_the_child_evaluates_the_loop_serves_others_and_the_deadline_stops_it(tmp_path, config):
    engine = engine_for(slow_policies(tmp_path), config, timeout=0.5)
    offload = Offload()
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def slow_then_fast() -> tuple[EvaluationError, Any, float]:
        ticker = asyncio.create_task(tick())
        started = time.monotonic()
        with pytest.raises(EvaluationError) as stopped:
            await engine.evaluate_async(asked(pod(annotations={"count": "400000000"})), offload)
        took = time.monotonic() - started
        ticker.cancel()
        after = await engine.evaluate_async(asked(pod(annotations={"count": "10"})), offload)
        # (here: a child dies with the thread that started it, PR_SET_PDEATHSIG, and asyncio.run's ends)
        assert set(evaluator_children(os.getpid())) - before  # the stopped child was replaced
        return stopped.value, after, took

    try:
        before = set(evaluator_children(os.getpid()))
        error, after, took = on_loop(slow_then_fast)
        assert str(error) == ("policy evaluation took longer than server.evaluationTimeoutSeconds (0.5 s) "
                              "and was stopped")
        assert 0.45 < took < 2.0, took
        assert len(ticks) >= 25, len(ticks)  # the loop ran other work every 10 ms meanwhile
        assert after.engine == "rvm" and offload.calls == ["evaluate"]  # a new child, started on a thread
    finally:
        engine.close()


def test_a_child_killed_mid_evaluation_is_said_so_and_replaced(tmp_path, config):
    before = set(evaluator_children(os.getpid()))
    engine = engine_for(slow_policies(tmp_path), config, timeout=30)
    offload = Offload()

    async def killed() -> tuple[EvaluationError, Any]:
        evaluation = asyncio.ensure_future(engine.evaluate_async(asked(pod(annotations={"count": "400000000"})),
                                                                 offload))
        await asyncio.sleep(0.3)
        [child] = set(evaluator_children(os.getpid())) - before
        os.kill(child, signal.SIGKILL)
        with pytest.raises(EvaluationError) as gone:
            await evaluation
        return gone.value, await engine.evaluate_async(asked(pod()), offload)

    try:
        error, after = on_loop(killed)
        assert str(error) == "the policy evaluator exited during evaluation (killed by SIGKILL)"
        assert after.engine == "rvm" and offload.calls == ["evaluate"]
    finally:
        engine.close()


def test_a_request_cancelled_mid_evaluation_leaves_no_stale_answer_in_the_pipe(tmp_path, config):
    """A client that goes away cancels its request; its exchange still runs to its end, so the next
    request reads its own answer, not the cancelled one's."""
    engine = engine_for(slow_policies(tmp_path), config)
    offload = Offload()
    privileged = PODS[2]

    async def cancelled_then_next() -> Any:
        first = asyncio.ensure_future(engine.evaluate_async(asked(pod(annotations={"count": "20000"})), offload))
        await asyncio.sleep(0.01)
        first.cancel()
        return await asyncio.wait_for(engine.evaluate_async(asked(privileged), offload), 10)

    try:
        expected = engine.evaluate(asked(privileged))
        assert on_loop(cancelled_then_next) == expected and offload.calls == []
    finally:
        engine.close()


def test_what_would_block_the_loop_is_handed_to_an_app_thread(config, monkeypatch):
    """A frame larger than a pipe holds, and a child busy answering the readiness ping, are not
    waited for on the loop."""
    engine = engine_for(POLICIES, config)
    offload = Offload()
    big = pod(annotations={"note": "x" * (isolated.LOOP_FRAME_BYTES + 1)})
    try:
        expected = engine.evaluate(asked(big))
        assert on_loop(lambda: engine.evaluate_async(asked(big), offload)) == expected
        assert offload.calls == ["evaluate"]
        engine._lock.acquire()  # what IsolatedEngine.check holds while it pings
        offload.calls.clear()

        async def while_pinged() -> Any:
            handed = asyncio.ensure_future(engine.evaluate_async(asked(pod()), _releasing(engine, offload)))
            return await handed

        assert on_loop(while_pinged).engine == "rvm"
        assert offload.calls == ["evaluate"]
    finally:
        engine.close()


def _releasing(engine: IsolatedEngine, offload: Offload) -> Offload:
    """An offload that lets the ping finish before the handed call runs (it takes the same lock)."""
    class Releasing(Offload):
        async def __call__(self, call: Callable[..., Any], *args: Any) -> Any:
            engine._lock.release()
            return await offload(call, *args)
    return Releasing()


def test_a_reply_is_assembled_from_any_parts_it_arrives_in():
    frame = isolated.FrameBuffer()
    payload = orjson.dumps({"answer": {"deny": [], "warn": []}})
    data = len(payload).to_bytes(4, "big") + payload
    parts = [data[:2], data[2:7], data[7:]]
    assert [frame.add(part) for part in parts] == [None, None, payload]
    with pytest.raises(ValueError):
        isolated.FrameBuffer().add(data + b"extra")


def test_an_unexpected_failure_starting_an_exchange_wedges_no_later_evaluation(config, monkeypatch):
    """A failure before the frame is sent (the cluster state could not be read) or after (the loop
    could not watch the pipe) fails that request; the next ones are evaluated, not left waiting for a
    turn or a lock nobody gives back. A child that was sent a frame nobody will read is replaced."""
    engine = engine_for(POLICIES, config)
    offload = Offload()

    def unreadable() -> tuple[int, dict[str, Any]]:
        raise RuntimeError("the cluster state could not be read")

    async def failing_then_fine(where: str) -> Any:
        with pytest.raises(RuntimeError, match=where):
            await engine.evaluate_async(asked(pod()), offload)
        monkeypatch.undo()
        return await asyncio.wait_for(engine.evaluate_async(asked(pod()), offload), 10)

    try:
        monkeypatch.setattr(engine, "inventory", unreadable)
        assert on_loop(lambda: failing_then_fine("cluster state")).engine == "rvm"
        assert offload.calls == []  # the same child, on the loop
        [child] = engine._children

        def unwatchable(*args: Any) -> Any:
            raise RuntimeError("the pipe could not be watched")

        monkeypatch.setattr(engine, "_await_reply", unwatchable)
        assert on_loop(lambda: failing_then_fine("could not be watched")).engine == "rvm"
        assert offload.calls == ["evaluate"] and engine._children[0] is not child  # a new child
    finally:
        engine.close()
