"""regorus in a child process, so that a deadline can stop an evaluation.

regorus holds the GIL while it evaluates and offers no way to interrupt it: a policy that is slow
for one input would hold its worker (the event loop, the reload watcher, every other request)
for as long as it runs. So the server evaluates in a child process of each worker, one
``RegorusEngine`` there (``evaluator.py``), and waits for each answer at most
``server.evaluationTimeoutSeconds``. Past it the child is killed, the request gets an
EvaluationError (answered per ``failureMode`` and recorded like any other) and the next
evaluation starts a new child. A round trip costs ~0.1 ms (``bench/load.py`` measures it).

Loading is bounded too: the child compiles the set and warms it up (an empty input and a plain
pod) within ``server.policyLoadTimeoutSeconds``, or the set is refused at start and at reload
like a file that does not parse.

Frames on the pipes are a 4-byte big-endian length and an orjson payload.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from ..core.contract import EngineInput, Evaluation, Inventory, PolicyResult, parse_result
from ..core.errors import EvaluationError, EvaluatorGone, EvaluatorTimeout, PolicyError
from .sources import PolicySet

EVALUATE, INTERPRET, INVENTORY, PING = b"E", b"I", b"D", b"P"
PING_SECONDS = 1.0  # a child that answers no ping within this is stopped or wedged
# The event loop writes frames up to this size itself: less than a pipe holds, so the write never
# blocks the loop (a larger one, a Volcano Job of many tasks, is written from an app thread).
LOOP_FRAME_BYTES = 60 * 1024
GONE_WAIT_SECONDS = 0.1  # how long the loop waits to learn how a child that closed its pipe ended
_READ_SIZE = 1 << 16  # a first read this size takes a usual frame whole; a 1 MiB one cost ~18 µs of allocation each
log = logging.getLogger("vgate")


class IsolatedEngine:
    """The in-process engines of ``RegorusEngine``, one child process away, with deadlines."""

    def __init__(self, policy_set: PolicySet, config_document: dict[str, Any], *, timeout: float,
                 load_budget: float) -> None:
        self.revision = policy_set.revision
        self._root = str(policy_set.root)
        self._load_request = orjson.dumps({"root": self._root, "files": policy_set.files,
                                           "revision": policy_set.revision, "config": config_document})
        self._timeout = timeout
        self._budget = load_budget
        self._lock = threading.Lock()
        self.inventory: Inventory | None = None  # the cluster state, given to the child when it changes
        self._sent_version = -1
        # The current child, if any (none after one was stopped, until the next evaluation starts one);
        # in a list so that one finalizer, which may not hold the engine, stops whichever it is then.
        self._children: list[_Child] = []
        self._turns: asyncio.Lock | None = None  # made by the loop that first evaluates
        weakref.finalize(self, _stop_all, self._children)
        ready = self._start()
        self.name: str = ready["name"]
        self.rvm_refusal: str | None = ready.get("rvm_refusal")

    def evaluate(self, request: EngineInput) -> Evaluation:
        """The child's answer within the deadline; EvaluationError if it fails or takes longer."""
        return _evaluation(self._exchange(EVALUATE + request.raw))

    async def evaluate_async(self, request: EngineInput, offload: Callable[..., Awaitable[Any]]) -> Evaluation:
        """``evaluate`` on the running event loop: the frame is written and the answer read as the pipe
        turns readable, so no thread waits for the child and the loop serves other requests meanwhile
        (docs/operators.md, "Performance"). The exchange runs to its end even if the request is
        cancelled (a client gone): the pipe never holds a stale answer. What the loop cannot do without
        blocking (no child running, one busy answering a ping, the cluster state to send first, a frame
        larger than the pipe holds) is ``evaluate`` on an app thread (``offload``)."""
        frame = EVALUATE + request.raw
        if self._turns is None:
            self._turns = asyncio.Lock()  # this loop's evaluations, one at a time and in order
        turns = self._turns
        await turns.acquire()
        try:
            exchange = self._begin_exchange(frame, turns.release) if len(frame) <= LOOP_FRAME_BYTES else None
        except BaseException:
            turns.release()
            raise
        if exchange is None:
            try:
                return await offload(self.evaluate, request)
            finally:
                turns.release()
        reply = await asyncio.shield(exchange)  # which gives the turn on when it ends, awaited or not
        return _evaluation(_checked(reply))

    def _begin_exchange(self, frame: bytes, ended: Callable[[], None]) -> asyncio.Future[dict[str, Any]] | None:
        """The child's reply to ``frame`` as a future of the running loop, the engine's lock held until it
        settles, then ``ended`` called; None if the exchange cannot be done on the loop now (see
        evaluate_async)."""
        if not self._inventory_sent() or not self._lock.acquire(blocking=False):
            return None
        if not self._children:  # (looked at with the lock held: the readiness check replaces children under it)
            self._lock.release()
            return None
        child = self._children[0]
        try:
            write_frame(child.input, frame)  # fits the pipe's buffer, which the idle child has emptied: never blocks
        except OSError:
            self._lock.release()
            return None  # the blocking path finds the child gone, says why and starts another
        try:
            return self._await_reply(child, ended)
        except BaseException:  # the child has a frame whose answer nobody will read: it goes
            _stop_all(self._children)
            self._lock.release()
            raise

    def _await_reply(self, child: _Child, ended: Callable[[], None]) -> asyncio.Future[dict[str, Any]]:
        """The reply to the frame ``child`` was just sent, read as it arrives (see _begin_exchange)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        reply = FrameBuffer()

        def settle(outcome: dict[str, Any] | None = None, failure: EvaluationError | None = None) -> None:
            if future.done():  # the reply and the deadline in one turn of the loop: the first settles
                return
            loop.remove_reader(child.output)
            timer.cancel()
            if failure is not None:
                _stop_all(self._children)
            self._lock.release()
            ended()
            if failure is not None:
                future.set_exception(failure)
            else:
                future.set_result(outcome or {})

        def readable() -> None:
            try:
                data = os.read(child.output, reply.wanted())
                whole = reply.add(data) if data else None
            except (OSError, ValueError) as error:
                settle(failure=EvaluationError(f"the policy evaluator exited during evaluation ({error})"))
                return
            if not data:
                reason = child.exit_reason(wait=GONE_WAIT_SECONDS) or "closed its output"
                settle(failure=EvaluationError(f"the policy evaluator exited during evaluation ({reason})"))
            elif whole is not None:
                settle(orjson.loads(whole))

        def overdue() -> None:
            settle(failure=EvaluationError(f"policy evaluation took longer than server.evaluationTimeoutSeconds "
                                           f"({self._timeout:g} s) and was stopped"))

        loop.add_reader(child.output, readable)
        timer = loop.call_later(self._timeout, overdue)
        return future

    def _inventory_sent(self) -> bool:
        """Whether the child has the cluster state's current version (or there is none to send)."""
        return self.inventory is None or self.inventory()[0] == self._sent_version

    def evaluate_interpreted(self, request: EngineInput) -> PolicyResult:
        return parse_result(self._exchange(INTERPRET + request.raw)["answer"])

    def close(self) -> None:
        """Stop the child, once an exchange in progress has ended (or its deadline has passed: one
        whose event loop closed before its answer came never ends)."""
        locked = self._lock.acquire(timeout=self._timeout + PING_SECONDS)
        try:
            _stop_all(self._children)
        finally:
            if locked:
                self._lock.release()

    def check(self) -> str | None:
        """Why this engine cannot evaluate now (None when it can), asked with each readiness report.

        A child that answers no ping within PING_SECONDS (stopped by a signal, wedged) is replaced
        here, before a request meets it and waits out the evaluation deadline; the replica turns
        unready only when no child can be started. An evaluation in progress is left alone: its own
        deadline covers it."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            if self._children:
                try:
                    self._children[0].ask(PING, PING_SECONDS)
                    return None
                except (EvaluatorTimeout, EvaluatorGone) as error:
                    log.warning("the policy evaluator answered no ping within %g s (%s): replaced", PING_SECONDS,
                                type(error).__name__ if isinstance(error, EvaluatorTimeout) else error)
                    _stop_all(self._children)
            try:
                self._start()
            except PolicyError as error:
                return f"the policy evaluator cannot be started: {error.reason}"
            return None
        finally:
            self._lock.release()

    def _exchange(self, frame: bytes) -> dict[str, Any]:
        with self._lock:
            if not self._children:
                try:
                    self._start()
                except PolicyError as error:
                    raise EvaluationError(f"the policy evaluator could not be restarted: {error.reason}") from None
            try:
                self._send_inventory()
                reply = self._children[0].ask(frame, self._timeout)
            except EvaluatorTimeout:
                _stop_all(self._children)
                raise EvaluationError(f"policy evaluation took longer than server.evaluationTimeoutSeconds "
                                      f"({self._timeout:g} s) and was stopped") from None
            except EvaluatorGone as gone:
                _stop_all(self._children)
                raise EvaluationError(f"the policy evaluator exited during evaluation ({gone})") from None
        return _checked(reply)

    def _send_inventory(self) -> None:
        """The cluster state to the child, when it changed since the child last had it (lock held)."""
        if self.inventory is None:
            return
        version, inventory = self.inventory()
        if version != self._sent_version:
            self._children[0].ask(INVENTORY + orjson.dumps(inventory), self._timeout)
            self._sent_version = version

    def _start(self) -> dict[str, Any]:
        """Start a child with the policy set compiled and warmed up, within the load budget; its ready
        message. PolicyError if it cannot."""
        child = _Child()
        try:
            ready = child.ask(self._load_request, self._budget)
        except EvaluatorTimeout:
            child.stop()
            raise PolicyError(self._root, None, f"compiling and warming up the policy set took longer than "
                                                f"server.policyLoadTimeoutSeconds ({self._budget:g} s)") from None
        except EvaluatorGone as gone:
            child.stop()
            raise PolicyError(self._root, None, f"the policy evaluator exited while loading the set ({gone})") from None
        if "policy_error" in ready:
            child.stop()
            file, line, reason = ready["policy_error"]
            raise PolicyError(file, line, reason)
        self._children[:] = [child]
        self._sent_version = -1  # a new child has no inventory yet
        return ready


def _checked(reply: dict[str, Any]) -> dict[str, Any]:
    """The child's reply, or the EvaluationError it reports."""
    if "error" in reply:
        raise EvaluationError(reply["error"])
    return reply


def _evaluation(reply: dict[str, Any]) -> Evaluation:
    return Evaluation(parse_result(reply["answer"]), reply["engine"], reply.get("fallback"))


def _stop_all(children: list[_Child]) -> None:
    for child in children:
        child.stop()
    children.clear()


class _Child:
    """One evaluator process and its pipes."""

    def __init__(self) -> None:
        self._process = subprocess.Popen([sys.executable, "-m", "webhook.policy.evaluator"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        assert self._process.stdin is not None and self._process.stdout is not None
        self.input = self._process.stdin.fileno()
        self.output = self._process.stdout.fileno()

    def ask(self, payload: bytes, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        try:
            write_frame(self.input, payload)
        except OSError as error:
            raise EvaluatorGone(self.exit_reason() or str(error)) from None
        reply: dict[str, Any] = orjson.loads(self._receive(deadline))
        return reply

    def _receive(self, deadline: float) -> bytes:
        """The child's reply frame, each part waited for until the deadline."""
        def part(most: int) -> bytes:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.output], [], [], left)[0]:
                raise EvaluatorTimeout()
            data = os.read(self.output, most)
            if not data:
                raise EvaluatorGone(self.exit_reason() or "closed its output")
            return data

        try:
            frame = _frame(part)
        except ValueError as error:
            raise EvaluatorGone(str(error)) from None
        assert frame is not None  # part raises at the end of output
        return frame

    def exit_reason(self, wait: float = 1.0) -> str | None:
        """How the child ended, if it ends within ``wait`` seconds."""
        try:
            code = self._process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return None
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"

    def stop(self) -> None:
        """Kill the child (it may be in the middle of an evaluation that never ends) and reap it."""
        if self._process.poll() is None:
            self._process.kill()
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
        self._process.wait()


def write_frame(fd: int, payload: bytes) -> None:
    data = len(payload).to_bytes(4, "big") + payload
    while data:
        data = data[os.write(fd, data):]


def read_frame(fd: int) -> bytes | None:
    """One frame from a blocking descriptor; None at end of input."""
    return _frame(lambda most: os.read(fd, most))


def _frame(read: Callable[[int], bytes]) -> bytes | None:
    """A frame put together from ``read(most)``'s parts (empty at end of input: None)."""
    frame = FrameBuffer()
    while True:
        part = read(frame.wanted())
        if not part:
            return None
        whole = frame.add(part)
        if whole is not None:
            return whole


class FrameBuffer:
    """One frame's parts as they arrive, in as few reads as it arrives in — one, mostly: a read for the
    header and one for the payload cost a wake-up each. Each side sends a frame only once it has the
    answer to the one before, so nothing is read past a frame's end."""

    def __init__(self) -> None:
        self._buffer, self._size = bytearray(), -1

    def wanted(self) -> int:
        """How much the next read should take."""
        return _READ_SIZE if self._size < 0 else 4 + self._size - len(self._buffer)

    def add(self, part: bytes) -> bytes | None:
        """The frame's payload once ``part`` completes it; None while more is to come."""
        self._buffer += part
        if self._size < 0 and len(self._buffer) >= 4:
            self._size = int.from_bytes(self._buffer[:4], "big")
        if self._size < 0 or len(self._buffer) < 4 + self._size:
            return None
        if len(self._buffer) != 4 + self._size:
            raise ValueError("a frame was sent before the answer to the last one")
        return bytes(self._buffer[4:])
