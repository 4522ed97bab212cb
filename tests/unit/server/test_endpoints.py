"""The endpoint table without I/O (webhook/server/endpoints.py): its one error mapping, and its
refusals recorded, with a stand-in gateway (the real one is exercised over HTTPS in tests/server)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson

from webhook.core.errors import RequestError
from webhook.server.endpoints import Endpoints


class StandIn:
    """A gateway whose /validate fails unexpectedly and whose /mutate refuses bad input."""

    config = SimpleNamespace(server=SimpleNamespace(max_body_bytes=10, body_read_timeout_seconds=1.0))

    def __init__(self) -> None:
        self.refused: list[tuple[str, int]] = []

    def mutate(self, body: bytes) -> dict[str, Any]:
        raise RequestError(400, "malformed JSON:\n  line 1")

    def validate(self, body: bytes) -> dict[str, Any]:
        raise KeyError("a bug")

    def refuse(self, endpoint: str, error: RequestError, started: float | None = None) -> None:
        self.refused.append((endpoint, error.status))


def table() -> tuple[Endpoints, StandIn]:
    gateway = StandIn()
    metrics = SimpleNamespace(exposition=lambda: (b"# metrics\n", "text/plain; version=0.0.4"))
    return Endpoints(SimpleNamespace(current=gateway), metrics, probes=True), gateway  # type: ignore[arg-type]


def test_every_error_is_one_line_of_json_with_its_status():
    endpoints, _ = table()
    cases = {("POST", "/mutate"): 400, ("POST", "/validate"): 500, ("GET", "/validate"): 405, ("PUT", "/x"): 404}
    for (method, path), status in cases.items():
        answer = endpoints.answer(method, path, b"{}")
        document = orjson.loads(answer.body)
        assert (answer.status, document["status"], answer.content_type) == (status, status, "application/json")
        assert "\n" not in answer.body.decode() and "Traceback" not in document["error"]
    assert orjson.loads(endpoints.answer("POST", "/validate", b"{}").body)["error"] == \
        "internal error; see the vgate log"


def test_refusals_are_recorded_for_admission_endpoints_only():
    endpoints, gateway = table()
    assert endpoints.too_large("POST", "/validate").status == 413
    assert endpoints.timed_out("POST", "/mutate", 1.0).status == 408
    assert endpoints.too_large("GET", "/healthz").status == 200  # not an admission request: its body is ignored
    assert gateway.refused == [("validate", 413), ("mutate", 408)]


def test_probes_are_in_the_table_unless_they_have_a_port_of_their_own():
    endpoints, _ = table()
    assert endpoints.answer("GET", "/metrics", b"").content_type.startswith("text/plain")
    metrics = SimpleNamespace(exposition=lambda: (b"", "text/plain"))
    alone = Endpoints(SimpleNamespace(current=StandIn()), metrics, probes=False)  # type: ignore[arg-type]
    assert alone.answer("GET", "/metrics", b"").status == 404 and alone.answer("GET", "/healthz", b"").status == 200
