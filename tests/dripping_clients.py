"""Hostile slow clients and a legitimate caller, on real sockets, for a bounded time.

Used by tests/server/test_slow_clients.py (a few seconds, tens of connections) and by
bench/slow_clients.py (60 s, 500 connections). Three kinds of dripping connection, each sending
one byte every ``interval`` seconds and reconnecting when the server closes it:

- ``handshake``: a TLS ClientHello, byte by byte (the handshake never completes);
- ``headers``: a completed handshake, then request headers byte by byte;
- ``body``: headers declaring a 64 KiB body, then the body byte by byte.

Meanwhile ``legitimate`` posts an AdmissionReview to /validate over keep-alive connections, a
fresh one every ten requests and after every failure (so handshakes are tested under attack too),
and records each latency or failure.
"""

from __future__ import annotations

import asyncio
import http.client
import ssl
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("handshake", "headers", "body")


@dataclass
class DripStats:
    opened: int = 0
    closed_by_server: int = 0
    open_now: int = 0
    longest_open_s: float = 0.0


@dataclass
class CallerStats:
    latencies_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.latencies_ms) or [0.0]
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return {"ok": len(self.latencies_ms), "failed": len(self.failures),
                "p50_ms": statistics.median(ordered), "p99_ms": p99, "max_ms": ordered[-1]}


def _client_hello(host: str) -> bytes:
    """The bytes of a real TLS ClientHello, produced by an in-memory TLS client."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname=host)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


async def _drip(kind: str, host: str, port: int, context: ssl.SSLContext, interval: float, until: float,
                stats: DripStats) -> None:
    hello = _client_hello(host)
    head = f"POST /validate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    while time.monotonic() < until:
        opened = time.monotonic()
        try:
            if kind == "handshake":
                reader, writer = await asyncio.open_connection(host, port)
                payload = hello
            else:
                reader, writer = await asyncio.open_connection(host, port, ssl=context, server_hostname=host)
                payload = (head + "\r\n").encode() if kind == "headers" else b"{" * 65536
                if kind == "body":
                    writer.write((head + "Content-Length: 65536\r\n\r\n").encode())
        except OSError:
            await asyncio.sleep(interval)
            continue
        stats.opened += 1
        stats.open_now += 1
        try:
            for i in range(len(payload)):
                if time.monotonic() >= until:
                    break
                writer.write(payload[i:i + 1])
                await writer.drain()
                try:  # anything from the server (an answer, EOF) ends this connection's drip
                    await asyncio.wait_for(reader.read(1), interval)
                    stats.closed_by_server += 1
                    break
                except asyncio.TimeoutError:
                    pass
        except (OSError, ssl.SSLError):
            stats.closed_by_server += 1
        finally:
            stats.open_now -= 1
            stats.longest_open_s = max(stats.longest_open_s, time.monotonic() - opened)
            writer.close()


async def _drip_all(count: int, host: str, port: int, ca: Path, interval: float, seconds: float,
                    stats: DripStats) -> None:
    context = ssl.create_default_context(cafile=str(ca))
    until = time.monotonic() + seconds
    tasks = []
    for i in range(count):
        tasks.append(asyncio.create_task(_drip(KINDS[i % len(KINDS)], host, port, context, interval, until, stats)))
        await asyncio.sleep(0.002)  # ramp up, as a real attacker's connections arrive
    await asyncio.gather(*tasks, return_exceptions=True)


def drip(count: int, host: str, port: int, ca: Path, interval: float, seconds: float) -> tuple[threading.Thread,
                                                                                               DripStats]:
    """Start ``count`` dripping connections (a third of each kind) in a thread of their own."""
    stats = DripStats()
    thread = threading.Thread(target=lambda: asyncio.run(_drip_all(count, host, port, ca, interval, seconds, stats)),
                              daemon=True)
    thread.start()
    return thread, stats


def legitimate(host: str, port: int, ca: Path, body: bytes, seconds: float, timeout: float = 5.0,
               pause: float = 0.05) -> CallerStats:
    """POST ``body`` to /validate again and again for ``seconds``; every answer must be a 200 within ``timeout``."""
    stats = CallerStats()
    context = ssl.create_default_context(cafile=str(ca))
    connection: http.client.HTTPSConnection | None = None
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if connection is not None and len(stats.latencies_ms) % 10 == 0:
            connection.close()
            connection = None
        if connection is None:
            connection = http.client.HTTPSConnection(host, port, context=context, timeout=timeout)
        started = time.monotonic()
        try:
            connection.request("POST", "/validate", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise OSError(f"HTTP {response.status}")
            stats.latencies_ms.append((time.monotonic() - started) * 1000)
        except (OSError, http.client.HTTPException) as error:
            stats.failures.append(f"{time.monotonic() - started:.1f}s: {type(error).__name__}: {error}")
            connection.close()
            connection = None
        time.sleep(pause)
    if connection is not None:
        connection.close()
    return stats
