"""The serving path: an ASGI app that reads each body on the event loop, bounded in size and time,
and answers /mutate and /validate on that loop (``Endpoints.answer_async``).

Thread-per-request servers hand a connection to a thread as soon as its headers arrive, so a
client that drips its body one byte a second holds a thread; a few such clients hold them all
(measured in docs/operators.md, "Serving"). Here the event loop of granian's ASGI worker reads every
body, for thousands of connections at once, and decides each complete one itself: it waits for the
evaluator child's answer and for the decision record's sync without holding a thread, so no
request is handed to another thread and back (each hand-off was two wake-ups: 0.85x the CPU of
/mutate without them, docs/operators.md, "Performance"). What would block the loop (the probes, a
refusal's record, OPA over HTTP, an evaluator child to start) runs on a few app threads
(``--threads`` per worker). No WSGI environ is built and no web framework runs on any request.

Bodies are bounded by ``server.maxBodyBytes``: a Content-Length over the limit is refused without
reading the body, and any other body is read to the limit plus one byte at most (413 to both);
the rest of an oversized body is read and dropped up to ``DRAIN_FACTOR`` times the limit, so the
client reads the answer instead of a reset. A body that does not arrive within
``server.bodyReadTimeoutSeconds`` is refused with 408. Both refusals are recorded (``Endpoints.refuse``).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .draining import closes_connections
from .endpoints import Answer, Endpoints

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# A refused body up to this many times the limit is read and dropped before the 413 is sent: a
# client still sending when the connection closes sees a reset instead of the answer. Larger
# ones are not worth reading; their connection is closed.
DRAIN_FACTOR = 4


class AdmissionServer:
    """An ASGI application serving ``endpoints`` with bodies read on the event loop."""

    def __init__(self, endpoints: Endpoints, threads: int = 1) -> None:
        self._endpoints = endpoints
        self._threads = AppThreads(threads)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        endpoints, method, path = self._endpoints, scope["method"], scope["path"]
        limit, timeout = endpoints.max_body_bytes(), endpoints.body_read_timeout()
        declared = _content_length(scope)
        timed_out, oversized = False, declared is not None and declared > limit
        body = b""  # a declared length over the limit is refused without its body
        if not oversized:
            try:
                async with asyncio.timeout(timeout):  # no task per request, unlike wait_for
                    body, oversized = await _read(receive, limit + 1, declared)
            except TimeoutError:
                timed_out = True
        if oversized:  # read and drop the rest (to a bound), so the client is not cut off before the 413
            try:
                async with asyncio.timeout(timeout):
                    await _discard(receive, limit * DRAIN_FACTOR - len(body))
            except TimeoutError:
                pass
        if timed_out:
            answer = await self._threads.run(endpoints.timed_out, method, path, timeout, started)
        elif oversized:
            answer = await self._threads.run(endpoints.too_large, method, path, started)
        else:
            answer = await endpoints.answer_async(method, path, body, self._threads.run)
        await _send(send, answer)


async def _send(send: Send, answer: Answer) -> None:
    headers = [(b"content-type", answer.content_type.encode("latin-1")),
               (b"content-length", str(len(answer.body)).encode())]
    if closes_connections():  # this worker is being replaced: its clients move to another (``draining``)
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


class AppThreads:
    """A worker's app threads, for what may block. A call goes over on a queue and its result comes
    back with one ``call_soon_threadsafe``: ``run_in_executor`` wraps a concurrent future in an
    asyncio one and chains the two, which cost ~30 µs more a request (docs/operators.md, "Performance").
    They live as long as the worker: an evaluator child started from one is killed when its thread ends."""

    def __init__(self, count: int) -> None:
        self._calls: queue.SimpleQueue[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any],
                                             Callable[..., Any], tuple[Any, ...]]] = queue.SimpleQueue()
        for number in range(max(1, count)):
            threading.Thread(target=self._serve, name=f"vgate-app-{number}", daemon=True).start()

    def run(self, function: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """``function(*args)`` on an app thread, as a future of the running loop."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._calls.put((loop, future, function, args))
        return future

    def _serve(self) -> None:
        while True:
            loop, future, function, args = self._calls.get()
            try:
                outcome: tuple[Any, BaseException | None] = (function(*args), None)
            except BaseException as error:  # noqa: BLE001 - handed to the awaiting request, as an executor would
                outcome = (None, error)
            try:
                loop.call_soon_threadsafe(_settle, future, *outcome)
            except RuntimeError:
                pass  # the loop closed meanwhile: nobody awaits the answer any more


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled: the client went away
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


async def _discard(receive: Receive, budget: int) -> None:
    """Read the rest of a body, at most ``budget`` more bytes, and drop it."""
    while budget > 0:
        message = await receive()
        if message["type"] != "http.request":
            return
        budget -= len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _read(receive: Receive, most: int, declared: int | None) -> tuple[bytes, bool]:
    """The body's first ``most`` bytes at most, and whether more was sent than that.

    A body is whole once its ``declared`` length (Content-Length; None when chunked) is in, without
    waiting for the server's end-of-body message: granian hands a body that came in one piece with
    ``more_body`` true and the end in a second message, and each message it hands over crosses its
    Rust runtime, its blocking thread and a wake-up of this loop (a /validate costs 0.91-0.98x the
    CPU without that second message in three runs, docs/operators.md, "Performance"). HTTP/1.1 frames
    the body by that length, so the connection stays open for the next request."""
    parts: list[bytes] = []
    size = 0
    while size < most and size != declared:
        message = await receive()
        if message["type"] != "http.request":
            break  # http.disconnect: the client went away
        chunk = message.get("body", b"")
        parts.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(parts)[:most], size >= most


def _content_length(scope: Scope) -> int | None:
    """The body's length as declared; None when it is not, or when the body is chunked: chunked wins
    over a Content-Length sent beside it (RFC 9112, 6.3), so that length says nothing of the body."""
    declared = None
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                return None
    return declared
