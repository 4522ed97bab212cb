"""Decision records from the event loop (DecisionLog.record_async): committed by the loop itself on
a quick disk, by the syncer thread on a slow one, and in both cases durable, in one intact chain,
and failed loudly.

Real files and the real verify; a slow disk is an ``fdatasync`` that takes longer.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from webhook.audit import log as decision_log
from webhook.audit.log import DecisionLog
from webhook.audit.verify import verify_segments
from webhook.core.errors import AuditError

REAL_FDATASYNC = os.fdatasync


def syncer_running() -> bool:
    return any(thread.name == "vgate-syncer" for thread in threading.enumerate())


class Syncs:
    """``os.fdatasync`` counted, from which threads, and slowed down by ``seconds``."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.threads: list[str] = []

    def __call__(self, fd: int) -> None:
        self.threads.append(threading.current_thread().name)
        if self.seconds:
            time.sleep(self.seconds)
        REAL_FDATASYNC(fd)


def records(directory: Path, count: int, log: DecisionLog) -> tuple[list[BaseException | None], int]:
    """``count`` records sent at once from one event loop; what each got, and how often the loop ran
    other work (a 1 ms ticker) while they were committed."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    async def send() -> list[BaseException | None]:
        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)
        outcomes = await asyncio.gather(*(log.record_async({"endpoint": "validate", "uid": f"u{i}"})
                                          for i in range(count)), return_exceptions=True)
        ticker.cancel()
        return outcomes

    return asyncio.run(send()), ticks


def test_on_a_quick_disk_the_loop_commits_its_records_itself(tmp_path, monkeypatch):
    # Quick next to the threshold, whatever the machine: a real fdatasync under CI's other I/O once
    # took over the shipped 2 ms, and the next commit rightly went to the syncer.
    monkeypatch.setattr(decision_log, "INLINE_COMMIT_SECONDS", 1.0)
    syncs = Syncs()
    monkeypatch.setattr(os, "fdatasync", syncs)
    log = DecisionLog(tmp_path, replica="unit")
    outcomes, _ = records(tmp_path, 20, log)
    assert outcomes == [None] * 20
    assert verify_segments(tmp_path) == (20, [])
    assert set(syncs.threads) == {threading.current_thread().name}  # no hand-off to another thread


def test_on_a_slow_disk_the_syncer_commits_in_batches_while_the_loop_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(decision_log, "INLINE_COMMIT_SECONDS", 0.25)  # slow and quick far either side of it
    syncs = Syncs(seconds=0.5)
    monkeypatch.setattr(os, "fdatasync", syncs)
    log = DecisionLog(tmp_path, replica="unit")
    outcomes, ticks = records(tmp_path, 100, log)
    assert outcomes == [None] * 100
    assert verify_segments(tmp_path) == (100, [])
    # the first commit, on the loop, is seen to be slow; every later one is the syncer's, batched
    assert syncs.threads[0] == threading.current_thread().name and set(syncs.threads[1:]) == {"vgate-syncer"}
    assert len(syncs.threads) <= 5, len(syncs.threads)
    assert ticks >= 10, ticks  # the loop was free while the syncer waited for the disk
    syncs.seconds = 0.0
    quick_again, written = len(syncs.threads), 105
    records(tmp_path, 5, log)  # the disk is quick again: its next commit says so, and from then on
    for _ in range(5):  # the loop commits itself once more, once it finds the lock free: the syncer
        # holds it a moment after settling a commit, and wakes once more for a record it took
        records(tmp_path, 5, log)
        written += 5
        if threading.current_thread().name in syncs.threads[quick_again:]:
            break
    assert threading.current_thread().name in syncs.threads[quick_again:], syncs.threads[quick_again:]
    assert verify_segments(tmp_path) == (written, [])


def test_a_failed_sync_fails_every_record_of_its_commit_on_either_path(tmp_path, monkeypatch):
    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "the disk did not take it")

    log = DecisionLog(tmp_path, replica="unit")
    monkeypatch.setattr(os, "fdatasync", failing)
    for slow in (False, True):  # the loop's own commit, then the syncer's
        log._last_commit_seconds = 1.0 if slow else 0.0
        outcomes, _ = records(tmp_path, 3, log)
        assert all(isinstance(outcome, AuditError) and "the disk did not take it" in str(outcome)
                   for outcome in outcomes), outcomes
    monkeypatch.setattr(os, "fdatasync", REAL_FDATASYNC)
    assert records(tmp_path, 2, log)[0] == [None, None]
    assert verify_segments(tmp_path) == (2, [])  # nothing of the failed commits was left behind


def test_a_record_no_json_can_hold_fails_its_commit_and_leaves_the_syncer_running(tmp_path):
    log = DecisionLog(tmp_path, replica="unit")
    log._last_commit_seconds = 1.0  # the syncer's path

    async def send(entry: dict[str, Any]) -> None:
        await log.record_async(entry)

    with pytest.raises(AuditError, match="could not be written as JSON"):
        asyncio.run(send({"endpoint": "validate", "uid": "bad", "value": {1, 2}}))
    assert syncer_running()
    log._last_commit_seconds = 1.0
    asyncio.run(send({"endpoint": "validate", "uid": "next"}))
    assert verify_segments(tmp_path) == (1, [])


def test_a_commit_that_does_not_end_is_seen_and_its_records_time_out(tmp_path, monkeypatch):
    """A disk that stopped answering: the commit's age is what the replica's readiness reads, and the
    records waiting for it are refused after the wait bound, not held for ever."""
    release = threading.Event()

    def hung(fd: int) -> None:
        release.wait(30)
        REAL_FDATASYNC(fd)

    log = DecisionLog(tmp_path, replica="unit")
    log._last_commit_seconds = 1.0
    monkeypatch.setattr(os, "fdatasync", hung)
    monkeypatch.setattr(decision_log, "_WAIT_SECONDS", 0.5)
    assert log.stalled_seconds() == 0.0
    outcomes, _ = records(tmp_path, 2, log)
    assert all(isinstance(outcome, AuditError) and "did not complete within" in str(outcome) for outcome in outcomes)
    assert log.stalled_seconds() >= 0.4
    release.set()
    deadline = time.monotonic() + 10
    while log.stalled_seconds() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log.stalled_seconds() == 0.0
