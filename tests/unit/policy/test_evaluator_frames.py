"""The evaluator child's frames arrive whole whatever their size: the parent and the child read a
frame in as few reads as it arrives in, so a frame larger than a pipe's buffer (the inventory of a
big cluster, the denials of a big Volcano Job) must still be put together from its parts."""

from __future__ import annotations

import os
import threading

from test_inventory import namespaces, unmutated_pod

from webhook.core.contract import EngineInput
from webhook.policy.isolated import IsolatedEngine, read_frame, write_frame
from webhook.policy.sources import load_policy_set

from helpers import POLICIES, review


def test_a_frame_larger_than_a_pipe_arrives_whole_and_the_end_of_input_is_none():
    reading, writing = os.pipe()
    payload = os.urandom(3 * 2**20)  # 48 times a pipe's 64 KiB buffer
    writer = threading.Thread(target=write_frame, args=(writing, payload))
    writer.start()
    assert read_frame(reading) == payload
    writer.join()
    os.close(writing)
    assert read_frame(reading) is None
    os.close(reading)


def test_a_large_inventory_reaches_the_child_and_a_large_answer_comes_back(config):
    engine = IsolatedEngine(load_policy_set(POLICIES), config.document, timeout=60, load_budget=120)
    try:
        filler = {f"tenant-{n:05d}": "default" for n in range(8000)}  # about 1.5 MiB of inventory
        engine.inventory = lambda: (1, namespaces(**filler, **{"ml-inference": "batch"}))
        request = EngineInput.of(review(unmutated_pod("ml-inference")))
        # the annotated queue (batch, no memory cap) is judged by: the inventory arrived whole
        assert "resources-memory-limit-cap" not in {v.rule for v in engine.evaluate(request).result.deny}
        big = unmutated_pod("ml-training")  # 1,000 privileged containers: about 190 KB of denials
        big["spec"]["containers"] = [{**big["spec"]["containers"][0], "name": f"container-{n:04d}-" + "x" * 40,
                                      "securityContext": {"privileged": True}} for n in range(1000)]
        denied = engine.evaluate(EngineInput.of(review(big))).result.deny
        assert sum("container-0999-" in v.message for v in denied) >= 1  # the last container's denial is there
    finally:
        engine.close()
