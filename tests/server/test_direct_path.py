"""The endpoint table served by the ASGI path (the default) and through the Flask adapter
(`--server granian-flask`, kept for comparison) answers alike: the same status and body for every
kind of request, and the same decision records."""

from __future__ import annotations

import orjson

from helpers import pod, review

SENSITIVE = {"vgate.io/data-classification": "sensitive"}
REQUESTS = [
    ("POST", "/mutate", orjson.dumps(review(pod("web", "ml-training"), uid="m1"))),
    ("POST", "/validate", orjson.dumps(review(pod("web", "ml-training"), uid="v1"))),
    ("POST", "/validate", orjson.dumps(review(pod("leak", "ml-training", labels=SENSITIVE), uid="v2"))),
    ("POST", "/validate", b"{broken"),                                    # 400, recorded as refused
    ("POST", "/mutate", orjson.dumps({"kind": "NotAReview"})),            # 400
    ("POST", "/validate", b"{" + b" " * (4 * 1024 * 1024) + b"}"),       # 413
    ("GET", "/healthz", None),
    ("GET", "/readyz", None),
    ("GET", "/mutate", None),                                             # 405
    ("GET", "/nowhere", None),                                            # 404
]


def answers(server) -> list[tuple[int, object]]:
    found = []
    for method, path, body in REQUESTS:
        response = server.session.request(method, server.url + path, data=body, timeout=30,
                                          headers={"Content-Type": "application/json"})
        body = response.json()
        if path == "/readyz":  # each server's own config file, and when it loaded its policies
            body["config"] = body["config"].rsplit("/", 1)[-1]
            body.get("lastReload", {}).pop("at", None)
        found.append((response.status_code, body))
    return found


def records(server) -> list[tuple[object, ...]]:
    return [(r["endpoint"], r.get("uid"), r["decision"], r.get("allowed"), r.get("httpStatus"), r.get("error"))
            for r in server.decisions()]


def test_the_serving_path_and_the_flask_adapter_answer_and_record_alike(start_server):
    direct = start_server(workers=1)
    flask = start_server(workers=1, extra_args=("--server", "granian-flask"))
    assert answers(direct) == answers(flask)
    assert records(direct) == records(flask)
    assert [status for status, _ in answers(direct)] == [200, 200, 200, 400, 400, 413, 200, 200, 405, 404]
