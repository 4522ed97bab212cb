"""The probe port (`vgate serve --metrics-bind`): metrics and readiness without the admission endpoints."""

from __future__ import annotations

import json
import os
import time

import requests

from webhook.server.probe_port import _aggregate

from helpers import RESTRICTED_SPEC, free_port, pod, review


def test_probes_and_metrics_are_served_apart_from_the_admission_port(start_server):
    port = free_port()
    server = start_server(workers=2, extra_args=("--metrics-bind", f"127.0.0.1:{port}"))
    assert server.post("/validate", review(pod(**RESTRICTED_SPEC))).json()["response"]["allowed"] is True
    probes = f"http://127.0.0.1:{port}"
    ready = requests.get(probes + "/readyz", timeout=5)
    deadline = time.monotonic() + 20
    while ready.status_code != 200 and time.monotonic() < deadline:  # both workers report within seconds
        time.sleep(0.3)
        ready = requests.get(probes + "/readyz", timeout=5)
    assert ready.status_code == 200 and len(ready.json()["policyRevision"]) == 64, ready.text
    assert requests.get(probes + "/healthz", timeout=5).json() == {"status": "ok"}
    metrics = requests.get(probes + "/metrics", timeout=5).text
    assert 'vgate_admission_requests_total{decision="allowed",dry_run="false",endpoint="validate"' in metrics
    refused = requests.post(probes + "/validate", data=json.dumps(review(pod())), timeout=5)
    assert refused.status_code == 405 and refused.json()["status"] == 405
    assert requests.get(probes + "/validate", timeout=5).status_code == 404
    for path in ("/metrics", "/readyz"):  # the admission port answers the API server alone
        answer = server.session.get(server.url + path)
        assert answer.status_code == 404 and answer.json()["status"] == 404, path
    assert server.session.get(server.url + "/healthz").json() == {"status": "ok"}


def test_a_probe_port_in_use_is_one_line_not_a_traceback(start_server):
    import socket
    import subprocess

    from helpers import VGATE

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*VGATE, "serve", "--bind", "127.0.0.1:0", "--workers", "1",
                               "--metrics-bind", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"Error: --metrics-bind 127.0.0.1:{port}: cannot listen there: " \
                                                   "Address already in use"


def test_ready_only_while_every_live_worker_recently_said_so(tmp_path):
    def report(pid: int, code: int, age: float = 0.0, revision: str = "r1") -> None:
        body = {"status": "ready", "policyRevision": revision} if code == 200 else {
            "error": "decision log unavailable", "status": code}
        (tmp_path / f"{pid}.json").write_text(json.dumps({"code": code, "body": body, "written": time.time() - age}))

    assert _aggregate(tmp_path)[0] == 503  # nobody reported yet
    report(os.getpid(), 200)
    assert _aggregate(tmp_path) == (200, {"status": "ready", "policyRevision": "r1", "policyRevisions": ["r1"]})
    report(os.getppid(), 503)
    assert _aggregate(tmp_path) == (503, {"error": "decision log unavailable", "status": 503})
    report(os.getppid(), 200, age=60)
    assert _aggregate(tmp_path)[1]["error"] == "a worker has not reported for over 30 s"
    report(os.getppid(), 200)
    dead = 4_000_000  # above Linux's pid_max: no such process
    report(dead, 503)
    assert _aggregate(tmp_path)[0] == 200 and not (tmp_path / f"{dead}.json").exists()
    report(os.getppid(), 200, revision="r2")  # one worker has reloaded, the other not yet: both named
    assert _aggregate(tmp_path)[1]["policyRevisions"] == ["r1", "r2"]


def test_each_probe_answer_leaves_in_one_write(tmp_path, monkeypatch):
    """The status line and the body go out together: a master ending between two writes (its SIGTERM's
    last moments) left a prober a 503 whose body never came (http.client.IncompleteRead), not a whole
    answer or a closed connection."""
    import socket

    from webhook.server.probe_port import serve_probes

    port = free_port()
    writes: list[int] = []
    for name in ("send", "sendall"):
        original = getattr(socket.socket, name)

        def counted(sock, data, *args, _original=original):
            if sock.getsockname()[1] == port:  # the probe port's side of a connection, not the client's
                writes.append(len(data))
            return _original(sock, data, *args)
        monkeypatch.setattr(socket.socket, name, counted)
    status = tmp_path / "status"
    status.mkdir()
    server = serve_probes(f"127.0.0.1:{port}", status)
    try:
        for path, code in (("/readyz", 503), ("/healthz", 200), ("/nowhere", 404)):
            writes.clear()
            answer = requests.get(f"http://127.0.0.1:{port}{path}", timeout=5)
            assert answer.status_code == code and answer.json()["status"] in (code, "ok"), answer.text
            assert len(writes) == 1 and writes[0] > len(answer.content), (path, writes)
    finally:
        server.shutdown()
        server.server_close()
