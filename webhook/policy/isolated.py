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

import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import orjson

from ..core.contract import EngineInput, Evaluation, Inventory, PolicyResult, parse_result
from ..core.errors import EvaluationError, EvaluatorGone, EvaluatorTimeout, PolicyError
from .sources import PolicySet

EVALUATE, INTERPRET, INVENTORY, PING = b"E", b"I", b"D", b"P"
PING_SECONDS = 1.0  # a child that answers no ping within this is stopped or wedged
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
        weakref.finalize(self, _stop_all, self._children)
        ready = self._start()
        self.name: str = ready["name"]
        self.rvm_refusal: str | None = ready.get("rvm_refusal")

    def evaluate(self, request: EngineInput) -> Evaluation:
        """The child's answer within the deadline; EvaluationError if it fails or takes longer."""
        reply = self._exchange(EVALUATE + request.raw)
        return Evaluation(parse_result(reply["answer"]), reply["engine"], reply.get("fallback"))

    def evaluate_interpreted(self, request: EngineInput) -> PolicyResult:
        return parse_result(self._exchange(INTERPRET + request.raw)["answer"])

    def close(self) -> None:
        with self._lock:
            _stop_all(self._children)

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
        if "error" in reply:
            raise EvaluationError(reply["error"])
        return reply

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
        self._in = self._process.stdin.fileno()
        self._out = self._process.stdout.fileno()

    def ask(self, payload: bytes, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        try:
            write_frame(self._in, payload)
        except OSError as error:
            raise EvaluatorGone(self._exit_reason() or str(error)) from None
        reply: dict[str, Any] = orjson.loads(self._receive(deadline))
        return reply

    def _receive(self, deadline: float) -> bytes:
        """The child's reply frame, each part waited for until the deadline."""
        def part(most: int) -> bytes:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out], [], [], left)[0]:
                raise EvaluatorTimeout()
            data = os.read(self._out, most)
            if not data:
                raise EvaluatorGone(self._exit_reason() or "closed its output")
            return data

        try:
            frame = _frame(part)
        except ValueError as error:
            raise EvaluatorGone(str(error)) from None
        assert frame is not None  # part raises at the end of output
        return frame

    def _exit_reason(self) -> str | None:
        try:
            code = self._process.wait(timeout=1)
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
    """A frame put together from ``read(most)``'s parts (empty at end of input: None), in as few
    reads as it arrives in — one, mostly: a read for the header and one for the payload cost a
    wake-up each. Each side sends a frame only once it has the answer to the one before, so
    nothing is read past a frame's end."""
    buffer, size = bytearray(), -1
    while size < 0 or len(buffer) < 4 + size:
        part = read(_READ_SIZE if size < 0 else 4 + size - len(buffer))
        if not part:
            return None
        buffer += part
        if size < 0 and len(buffer) >= 4:
            size = int.from_bytes(buffer[:4], "big")
    if len(buffer) != 4 + size:
        raise ValueError("a frame was sent before the answer to the last one")
    return bytes(buffer[4:])
