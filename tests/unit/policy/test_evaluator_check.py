"""The readiness check of the evaluator child (IsolatedEngine.check): a live child answers a ping;
a stopped one is replaced; a replica whose evaluator cannot be started again says so."""

from __future__ import annotations

import os
import signal

from webhook.policy.isolated import IsolatedEngine
from webhook.policy.sources import load_policy_set

from helpers import POLICIES, evaluator_children


def test_a_stopped_child_is_replaced_and_one_that_cannot_be_started_is_the_reason(config):
    others = set(evaluator_children(os.getpid()))  # children of engines other tests of this session hold

    def mine() -> list[int]:
        return sorted(set(evaluator_children(os.getpid())) - others)

    engine = IsolatedEngine(load_policy_set(POLICIES), config.document, timeout=5, load_budget=120)
    try:
        [child] = mine()
        assert engine.check() is None and mine() == [child]  # answered the ping
        os.kill(child, signal.SIGSTOP)
        assert engine.check() is None  # replaced
        [replacement] = mine()
        assert replacement != child
        os.kill(replacement, signal.SIGSTOP)
        engine._budget = 0.001  # a machine too loaded to compile the set again in its load budget
        reason = engine.check()
        assert reason is not None and reason.startswith("the policy evaluator cannot be started: compiling"), reason
        assert mine() == []
    finally:
        engine.close()
