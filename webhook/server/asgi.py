"""The Flask app behind an event loop: a body is read in full, bounded in size and time, before a thread sees it.

Thread-per-request servers hand a connection to a thread as soon as its headers arrive, so a
client that drips its body one byte a second holds a thread; a few such clients hold them all
(measured in docs/operators.md, "Serving"). Here the event loop of granian's ASGI worker reads every
body, for thousands of connections at once; only a complete body (or a refusal) reaches the
unchanged Flask app, run on a few app threads per worker (``--threads``): one decodes and records
while another waits for its evaluation or its fsync.

``direct`` answers what it can without the WSGI app (the admission endpoints, /healthz, /readyz: a body
read in full, a method and path it serves), on the same app threads: no environ is built and no
Flask request runs on the admission path. What it leaves (None), and every body refused or cut
short, goes to the WSGI app, which answers and records it as before.

Bodies are bounded as the app bounds them: a Content-Length over the limit is passed on without
its body, and any other body is read to the limit plus one byte at most (the app answers 413 to
both); the rest of an oversized body is read and dropped up to ``DRAIN_FACTOR`` times the limit.
A body that does not arrive within ``read_timeout`` seconds is passed on cut short, marked
``vgate.body_timeout``: the app answers 408 and records it.
"""

from __future__ import annotations

import asyncio
import io
import queue
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Direct = Callable[[str, str, bytes], "tuple[int, bytes] | None"]  # (method, path, body) -> (status, JSON)
JSON_HEADERS = [(b"content-type", b"application/json")]

BODY_TIMEOUT_KEY = "vgate.body_timeout"
# A refused body up to this many times the limit is read and dropped before the 413 is sent: a
# client still sending when the connection closes sees a reset instead of the answer. Larger
# ones are not worth reading; their connection is closed.
DRAIN_FACTOR = 4


class WsgiBehindLoop:
    """An ASGI application serving ``wsgi_app`` with bodies read on the event loop."""

    def __init__(self, wsgi_app: WsgiApp, max_body: Callable[[], int], read_timeout: Callable[[], float],
                 threads: int = 1, direct: Direct | None = None) -> None:
        self._app = wsgi_app
        self._direct = direct
        self._max_body = max_body
        self._read_timeout = read_timeout
        self._threads = AppThreads(threads)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        limit, timeout = self._max_body(), self._read_timeout()
        declared = _content_length(scope)
        declared_over = declared if declared is not None and declared > limit else None
        timed_out, oversized = False, declared_over is not None
        body = b""  # a declared length over the limit is refused by the app without its body
        if not oversized:
            try:
                async with asyncio.timeout(timeout):  # no task per request, unlike wait_for
                    body, oversized = await _read(receive, limit + 1)
            except TimeoutError:
                timed_out = True
        if oversized:  # read and drop the rest (to a bound), so the client is not cut off before the 413
            try:
                async with asyncio.timeout(timeout):
                    await _discard(receive, limit * DRAIN_FACTOR - len(body))
            except TimeoutError:
                pass
        if self._direct is not None and not (timed_out or oversized):
            answered = await self._threads.run(self._direct, scope["method"], scope["path"], body)
            if answered is not None:
                await send({"type": "http.response.start", "status": answered[0],
                            "headers": [*JSON_HEADERS, (b"content-length", str(len(answered[1])).encode())]})
                await send({"type": "http.response.body", "body": answered[1]})
                return
        environ = _environ(scope, body, declared_over)
        if timed_out:
            environ[BODY_TIMEOUT_KEY] = timeout
        status, headers, payload = await self._threads.run(self._call, environ)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    def _call(self, environ: dict[str, Any]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Run the WSGI app to completion in this worker's app thread."""
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            started[:] = [status, headers]

        chunks = self._app(environ, start_response)
        try:
            payload = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        status, headers = started
        encoded = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
        return int(status.split(" ", 1)[0]), encoded, payload


class AppThreads:
    """A worker's app threads. A call goes over on a queue and its result comes back with one
    ``call_soon_threadsafe``: ``run_in_executor`` wraps a concurrent future in an asyncio one and
    chains the two, which cost ~30 µs more a request (docs/operators.md, "Performance")."""

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


async def _read(receive: Receive, most: int) -> tuple[bytes, bool]:
    """The body's first ``most`` bytes at most, and whether more was sent than that."""
    parts: list[bytes] = []
    size = 0
    while size < most:
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
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _environ(scope: Scope, body: bytes, oversized_length: int | None) -> dict[str, Any]:
    """A WSGI environ for the request (PEP 3333), its body already read.

    The body is presented with the length read (a body cut at the limit plus one byte is one byte
    too long, and the app refuses it); a declared length over the limit is passed on as declared,
    with no body behind it.
    """
    server = scope.get("server") or ("localhost", 443)
    client = scope.get("client") or ("", 0)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": scope.get("root_path", "").encode("utf-8").decode("latin-1"),
        "PATH_INFO": scope["path"].encode("utf-8").decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "REMOTE_ADDR": str(client[0]),
        "REMOTE_PORT": str(client[1]),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "https"),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        if name in ("CONTENT_LENGTH", "TRANSFER_ENCODING"):
            continue
        key = name if name == "CONTENT_TYPE" else f"HTTP_{name}"
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    environ["CONTENT_LENGTH"] = str(len(body) if oversized_length is None else oversized_length)
    return environ
