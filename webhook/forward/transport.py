"""The connection to the collector: RELP (plain or TLS) or syslog over TLS (RFC 5425).

A link sends a batch of messages and returns once the collector has them, as far as its protocol
can tell:

- RELP acknowledges each message (``rsp 200``) after the collector has taken it: what is
  acknowledged is delivered, and the cursor may move past it at once (``settle_seconds`` 0);
- syslog over TLS has no acknowledgement. ``send`` returns once the collector's TCP has
  acknowledged every byte (the socket's send queue, ``SIOCOUTQ``, is empty). What can still be lost
  is what the collector's TCP took and the collector never wrote: bytes in its socket buffer or
  its memory queue when it dies. vgate narrows that to the last ``settle_seconds``: a batch counts
  as delivered only once the connection is still open that long after the collector's TCP took it;
  if it breaks first, the batch is sent again on the next connection (a recognisable duplicate).

Every read and write has a deadline, so a collector that holds the connection without reading
never blocks the forwarder for longer than it (and never the admission path, which never waits
for the forwarder).
"""

from __future__ import annotations

import errno
import fcntl
import select
import socket
import ssl
import struct
import termios
import time
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from ..core.config import ForwardSettings
from ..core.errors import CollectorError

TIMEOUT_SECONDS = 10.0
SYSLOG_SETTLE_SECONDS = 2.0
RELP_WINDOW = 128  # messages sent before their acknowledgements are read
_MAX_RESPONSE_BYTES = 64 << 10


class Link(Protocol):
    settle_seconds: float

    def send(self, messages: list[bytes]) -> None: ...

    def alive(self) -> bool: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Target:
    """Where the collector is, and how to talk to it."""

    scheme: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.scheme.endswith("tls")


def target_of(url: str) -> Target:
    parts = urlsplit(url)
    if parts.scheme not in ("relp", "relp+tls", "syslog+tls") or not parts.hostname or not parts.port:
        raise ValueError(f"{url}: not relp://, relp+tls:// or syslog+tls://host:port")
    return Target(parts.scheme, parts.hostname, parts.port)


def connect(settings: ForwardSettings, timeout: float = TIMEOUT_SECONDS) -> Link:
    """A new link to the collector ``settings.url`` names; OSError (ssl.SSLError included) if it cannot be made."""
    target = target_of(settings.url)
    raw = socket.create_connection((target.host, target.port), timeout=timeout)
    sock: socket.socket = raw
    try:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # batches go whole; the last one need not wait
        if target.tls:
            context = ssl.create_default_context(cafile=settings.ca_file)
            if settings.cert_file:
                context.load_cert_chain(settings.cert_file, settings.key_file)
            sock = context.wrap_socket(raw, server_hostname=target.host)
        sock.settimeout(timeout)
        if target.scheme.startswith("relp"):
            return RelpLink(sock)
        return SyslogTlsLink(sock)
    except BaseException:
        raw.close()
        raise


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the peer closed or sent something (a syslog collector never does: either is the end)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    if isinstance(sock, ssl.SSLSocket) and sock.pending() == 0:
        timeout = sock.gettimeout()
        try:
            sock.setblocking(False)
            sock.recv(1)  # a collector that sends data is not one this link speaks to
            return True
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        except OSError:
            return True
        finally:
            sock.settimeout(timeout)  # the link's own deadline, as connect set it
    return True


class SyslogTlsLink:
    """RFC 5425: each message framed as ``MSG-LEN SP SYSLOG-MSG``, over TLS."""

    settle_seconds = SYSLOG_SETTLE_SECONDS

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def send(self, messages: list[bytes]) -> None:
        if _closed_by_peer(self._sock):
            raise CollectorError(errno.ECONNRESET, "the collector closed the connection")
        self._sock.sendall(b"".join(b"%d %s" % (len(message), message) for message in messages))
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while _unacknowledged(self._sock) > 0:  # wait for the collector's TCP to take every byte
            if time.monotonic() > deadline:
                raise CollectorError(errno.ETIMEDOUT, "the collector stopped reading")
            if _closed_by_peer(self._sock):
                raise CollectorError(errno.ECONNRESET, "the collector closed the connection")
            time.sleep(0.005)

    def alive(self) -> bool:
        return not _closed_by_peer(self._sock)

    def close(self) -> None:
        self._sock.close()


def _quick_ack(sock: socket.socket) -> None:
    """Acknowledge what arrives at once (Linux TCP_QUICKACK, which lasts until the next delayed ACK).

    The collector answers each message in a small write of its own; with Nagle's algorithm on its
    side and delayed ACKs on ours, each of those waited for the other (40 ms at a time): RELP
    delivered 2,700 records a second, nearly all of it waiting in recv."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
    except OSError:
        pass  # not a TCP socket (never here), or a kernel without it: slower, not wrong


def _unacknowledged(sock: socket.socket) -> int:
    """Bytes in the socket's send queue the peer's TCP has not acknowledged (Linux ``SIOCOUTQ``)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]


class RelpLink:
    """RELP (librelp's protocol, rsyslog's imrelp): ``TXNR SP COMMAND SP DATALEN [SP DATA] LF``,
    each ``syslog`` command answered by ``TXNR rsp LEN 200 OK``."""

    settle_seconds = 0.0

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""
        self._txnr = 0
        status, _ = self._command(b"open", b"relp_version=0\nrelp_software=vgate\ncommands=syslog")
        if status != 200:
            raise CollectorError(errno.EPROTO, f"the collector refused the RELP session ({status})")

    def _next(self) -> int:
        self._txnr = self._txnr % 999_999_999 + 1
        return self._txnr

    def _frame(self, command: bytes, data: bytes) -> tuple[int, bytes]:
        txnr = self._next()
        body = b" " + data if data else b""
        return txnr, b"%d %s %d%s\n" % (txnr, command, len(data), body)

    def _command(self, command: bytes, data: bytes) -> tuple[int, bytes]:
        txnr, frame = self._frame(command, data)
        self._sock.sendall(frame)
        return self._response(txnr)

    def send(self, messages: list[bytes]) -> None:
        for start in range(0, len(messages), RELP_WINDOW):
            frames = [self._frame(b"syslog", message) for message in messages[start:start + RELP_WINDOW]]
            self._sock.sendall(b"".join(frame for _, frame in frames))
            for txnr, _ in frames:
                status, text = self._response(txnr)
                if status != 200:
                    raise CollectorError(errno.EPROTO, f"the collector refused a message: {status} "
                                                       f"{text[:200].decode(errors='replace')}")

    def _response(self, txnr: int) -> tuple[int, bytes]:
        """The status and text of the response to ``txnr``; CollectorError on anything else."""
        while True:
            number, command, data = self._read_frame()
            if command == b"serverclose":
                raise CollectorError(errno.ECONNRESET, "the collector closed the RELP session")
            if command != b"rsp" or number != txnr:
                raise CollectorError(errno.EPROTO, f"expected the response to {txnr}, got {number} "
                                                   f"{command[:20].decode(errors='replace')}")
            head = data.split(b"\n", 1)[0]
            if len(head) < 3 or not head[:3].isdigit():
                raise CollectorError(errno.EPROTO, "a RELP response without a status")
            return int(head[:3]), head[3:].strip()

    def _read_frame(self) -> tuple[int, bytes, bytes]:
        while True:
            fields = self._buffer.split(b" ", 3)
            if len(fields) >= 3 and fields[0].isdigit():
                length_text = fields[2].split(b"\n", 1)[0]
                if length_text.isdigit():
                    length = int(length_text)
                    if length > _MAX_RESPONSE_BYTES:
                        raise CollectorError(errno.EPROTO, "a RELP frame larger than any response")
                    start = len(fields[0]) + len(fields[1]) + len(length_text) + 2 + (1 if length else 0)
                    if len(self._buffer) >= start + length + 1:
                        data = self._buffer[start:start + length]
                        if self._buffer[start + length:start + length + 1] != b"\n":
                            raise CollectorError(errno.EPROTO, "a RELP frame without its trailer")
                        self._buffer = self._buffer[start + length + 1:]
                        return int(fields[0]), fields[1], data
            elif len(self._buffer) > 64 or (self._buffer and not self._buffer[:1].isdigit()):
                raise CollectorError(errno.EPROTO, "the collector answered something that is not RELP")
            if len(self._buffer) > _MAX_RESPONSE_BYTES + 64:
                raise CollectorError(errno.EPROTO, "a RELP frame larger than any response")
            _quick_ack(self._sock)
            chunk = self._sock.recv(65536)
            if not chunk:
                raise CollectorError(errno.ECONNRESET, "the collector closed the connection")
            self._buffer += chunk

    def alive(self) -> bool:
        return True  # every message is acknowledged: a broken session shows in send

    def close(self) -> None:
        try:
            self._sock.settimeout(1.0)
            txnr, frame = self._frame(b"close", b"")
            self._sock.sendall(frame)
        except OSError:
            pass
        finally:
            self._sock.close()
