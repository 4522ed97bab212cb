"""A stand-in OPA server for tests: OPA's Data API, evaluated with regorus on the same files.

The real OPA (built from its Go module) judges the samples in test_opa_backend.py; this stand-in
injects the failures a real one will not produce on demand:
``PUT /v1/data/<path>`` stores data, ``POST /v1/data/<path>`` evaluates ``data.<path>`` with the
posted ``input`` and answers ``{"result": ...}``, as OPA does. ``mode`` injects OPA's failures:
``down`` (refuses connections), ``slow`` (answers after ``delay``), ``error`` (HTTP 500),
``malformed`` (not JSON), ``wrong`` (a result that breaks vgate's decision contract).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import regorus


class FakeOpa:
    def __init__(self, policy_dir: Path) -> None:
        self.policy_files = sorted(p for p in policy_dir.rglob("*.rego") if not p.name.endswith("_test.rego"))
        self.data: dict[str, Any] = {}
        self.mode = "ok"
        self.delay = 0.0
        self.queries: list[str] = []
        self._lock = threading.Lock()
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def evaluate(self, path: str, input_document: Any) -> Any:
        engine = regorus.Engine()  # built per query: regorus engines are bound to their thread
        for file in self.policy_files:
            engine.add_policy(str(file), file.read_text())
        with self._lock:
            engine.add_data_json(json.dumps(self.data))
        engine.set_input_json(json.dumps(input_document))
        return json.loads(engine.eval_rule_as_json("data." + path.replace("/", ".")))

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        opa = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> Any:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")

            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_PUT(self) -> None:  # http.server's naming
                path = self.path.split("?")[0].removeprefix("/v1/data/").strip("/").split("/")
                with opa._lock:
                    node = opa.data
                    for key in path[:-1]:
                        node = node.setdefault(key, {})
                    node[path[-1]] = self._body()
                self.send_response(204)
                self.end_headers()

            def do_POST(self) -> None:
                path = self.path.split("?")[0].removeprefix("/v1/data/").strip("/")
                opa.queries.append(path)
                body = self._body()
                if opa.mode == "slow":
                    time.sleep(opa.delay)
                if opa.mode == "error":
                    return self._send(500, b'{"code": "internal_error", "message": "boom"}')
                if opa.mode == "malformed":
                    return self._send(200, b"<html>proxy error</html>")
                if opa.mode == "wrong":
                    return self._send(200, b'{"result": {"deny": ["not an object"]}}')
                result = opa.evaluate(path, body["input"])
                self._send(200, json.dumps({} if result == "<undefined>" else {"result": result}).encode())

        return Handler
