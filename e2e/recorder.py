"""A webhook that allows everything and keeps what the real API server sent it.

Registered twice around vgate, for namespaces labelled ``e2e.vgate.io/record=true``: a mutating
webhook whose configuration name sorts before ``vgate`` (so it receives the object exactly as
vgate's /mutate first does: after decoding, defaulting and the built-in plugins) and a validating
one (which receives the final object, as vgate's /validate does). The chain model's predictions
are compared with these.
"""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from e2e import pki

LABEL = "e2e.vgate.io/record"


class Recorder:
    def __init__(self, authority: pki.Authority, workdir: Path) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []  # (path, AdmissionReview request)
        cert, key = authority.issue(workdir, "recorder", "127.0.0.1", hosts=("127.0.0.1",))
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                # The API server appends ?timeout=Ns to the configured path.
                recorder.requests.append((urlsplit(self.path).path, review["request"]))
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": {"uid": review["request"]["uid"], "allowed": True}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def configurations(self, ca_bundle: str) -> list[dict[str, Any]]:
        common = {"admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Ignore",
                  "timeoutSeconds": 5, "namespaceSelector": {"matchLabels": {LABEL: "true"}},
                  "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE"],
                             "resources": ["*"], "scope": "Namespaced"}]}
        return [
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
             "metadata": {"name": "0-e2e-recorder"},
             "webhooks": [{**common, "name": "delivered.e2e.vgate.io", "reinvocationPolicy": "Never",
                           "clientConfig": {"url": self.url + "/delivered", "caBundle": ca_bundle}}]},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
             "metadata": {"name": "zz-e2e-recorder"},
             "webhooks": [{**common, "name": "final.e2e.vgate.io",
                           "clientConfig": {"url": self.url + "/final", "caBundle": ca_bundle}}]},
        ]

    def received(self, path: str, kind: str, name: str) -> dict[str, Any] | None:
        """The object the API server sent to ``path`` for ``kind``/``name`` (the first such request)."""
        for where, request in self.requests:
            if where == path and request["kind"]["kind"] == kind and request["name"] == name:
                obj: dict[str, Any] = request["object"]
                return obj
        return None

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
