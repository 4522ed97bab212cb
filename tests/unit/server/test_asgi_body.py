"""How the serving path reads a body (webhook/server/asgi.py), message by message, without I/O.

The messages are granian's, as its ASGI interface hands them (2.8.9, printed by a probe app): a body
that came in one piece arrives with ``more_body`` true and its end in a second, empty message; a
Content-Length sent beside ``Transfer-Encoding: chunked`` is not in the scope. Over HTTPS the same
reads are exercised in tests/server/test_webhook_https.py; what they cannot show is how many messages
were asked for, which cost a /validate 1.02-1.10x the CPU (docs/operators.md, "Performance")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from webhook.server.asgi import _content_length, _read


class Granian:
    """``receive`` handing ``chunks`` as granian does, then the end; asking past the end fails."""

    def __init__(self, *chunks: bytes) -> None:
        self.messages: list[dict[str, Any]] = [{"type": "http.request", "body": chunk, "more_body": True}
                                               for chunk in chunks]
        self.messages.append({"type": "http.request", "body": b"", "more_body": False})
        self.asked = 0

    async def receive(self) -> dict[str, Any]:
        if self.asked == len(self.messages):
            raise AssertionError("asked for a message after the end of the body")
        self.asked += 1
        return self.messages[self.asked - 1]


def read(granian: Granian, most: int, declared: int | None) -> tuple[bytes, bool]:
    return asyncio.run(_read(granian.receive, most, declared))


def test_a_body_in_one_piece_is_whole_at_its_declared_length_without_asking_for_the_end():
    granian = Granian(b'{"kind": "AdmissionReview"}')
    assert read(granian, 100, 27) == (b'{"kind": "AdmissionReview"}', False)
    assert granian.asked == 1


def test_a_body_in_pieces_is_read_until_its_declared_length_is_in():
    granian = Granian(b'{"kind"', b': "Admission', b'Review"}')
    assert read(granian, 100, 27) == (b'{"kind": "AdmissionReview"}', False)
    assert granian.asked == 3


def test_an_empty_declared_body_asks_for_nothing():
    granian = Granian()
    assert read(granian, 100, 0) == (b"", False)
    assert granian.asked == 0


def test_a_chunked_body_is_read_to_its_end():
    granian = Granian(b'{"kind"', b': "AdmissionReview"}')
    assert read(granian, 100, None) == (b'{"kind": "AdmissionReview"}', False)
    assert granian.asked == 3


def test_a_body_over_the_bound_stops_there():
    granian = Granian(b"x" * 8, b"x" * 8)
    assert read(granian, 11, None) == (b"x" * 11, True)
    assert granian.asked == 2


@pytest.mark.parametrize("headers,expected", [
    ([(b"content-length", b"27")], 27),
    ([(b"host", b"vgate")], None),
    ([(b"content-length", b"twenty")], None),
    # Chunked wins (RFC 9112, 6.3): the length beside it says nothing of the body, in either order.
    ([(b"content-length", b"5"), (b"transfer-encoding", b"chunked")], None),
    ([(b"transfer-encoding", b"chunked"), (b"content-length", b"5")], None),
], ids=["declared", "none", "not-a-number", "with-chunked", "after-chunked"])
def test_the_declared_length(headers, expected):
    assert _content_length({"headers": headers}) == expected
