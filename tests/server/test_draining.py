"""A worker being replaced (a renewed certificate) lets its clients move off it before it stops.

A stopping granian worker closes its idle keep-alive connections at once, and a request a client
wrote in that instant is lost (the API server does not resend a written POST). The master marks the
old worker first; the marked worker closes each connection right after its answer.
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import threading
import time
from pathlib import Path

from helpers import VGATE, evaluator_children, eventually, pod, review


def runtime_dir(server) -> Path:
    """The runtime folder of ``server`` (where its master marks workers), from the environment of an
    evaluator child: workers are forked, so their /proc environ is the master's before it set the folder."""
    child = evaluator_children(server.process.pid)[0]
    environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
    value = next(v for v in environ if v.startswith(b"VGATE_RUNTIME_DIR="))
    return Path(value.split(b"=", 1)[1].decode())


def workers(server) -> list[int]:
    children = subprocess.run(["pgrep", "-P", str(server.process.pid)], capture_output=True, text=True).stdout
    return [int(pid) for pid in children.split()]


def connect(server) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=str(server.ca))
    return http.client.HTTPSConnection("localhost", server.port, context=context, timeout=10)


def test_a_worker_marked_for_replacement_closes_each_connection_after_its_answer(start_server):
    server = start_server(workers=1)
    (worker,) = workers(server)
    marks = runtime_dir(server) / "draining"
    marks.mkdir(exist_ok=True)
    (marks / str(worker + 1)).touch()  # another process's mark changes nothing here
    time.sleep(0.5)  # five looks
    connection = connect(server)
    for _ in range(3):
        connection.request("GET", "/healthz")
        answer = connection.getresponse()
        answer.read()
        assert answer.getheader("connection") is None and not answer.will_close  # keep-alive
    (marks / str(worker)).touch()

    def closes() -> bool:
        connection.request("POST", "/validate", json.dumps(review(pod())), {"Content-Type": "application/json"})
        answer = connection.getresponse()
        answer.read()
        assert answer.status == 200
        return answer.getheader("connection") == "close" and answer.will_close

    assert eventually(closes, timeout=5)
    assert connection.sock is None  # http.client closed it, as the server said; the next request reconnects
    connection.close()


def test_a_renewal_while_clients_post_back_to_back_loses_no_request(start_server):
    """Each old worker is marked while it still serves, then stops; no request is lost meanwhile.

    Losing one is a race (the old code lost one in two of three renewals of bench/rotation.py), so
    the marks are checked as well: each old worker's, seen while it was alive.
    """
    server = start_server(workers=2, extra_args=("--reload-interval", "0.3"))
    old_workers, marks = set(workers(server)), runtime_dir(server) / "draining"
    body = json.dumps(review(pod())).encode()
    stop = threading.Event()
    sent, lost, marked_alive = [0], [], set()

    def post_until_stopped() -> None:
        connection = connect(server)
        while not stop.is_set():
            try:
                connection.request("POST", "/validate", body, {"Content-Type": "application/json"})
                answer = connection.getresponse()
                answer.read()
                if answer.status != 200:
                    lost.append(f"HTTP {answer.status}")
            except (OSError, http.client.HTTPException) as error:  # what the API server would see as EOF
                lost.append(f"{type(error).__name__}: {error}")
                connection.close()
            sent[0] += 1
        connection.close()

    def watch_marks() -> None:
        while not stop.is_set():
            for mark in marks.glob("*") if marks.is_dir() else ():
                if Path(f"/proc/{mark.name}").exists():
                    marked_alive.add(int(mark.name))
            time.sleep(0.02)

    threads = [threading.Thread(target=post_until_stopped) for _ in range(4)] + [threading.Thread(target=watch_marks)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1)
        subprocess.run([*VGATE, "certs", "--out", str(server.workdir / "certs")], check=True, capture_output=True)
        assert eventually(lambda: server.output().count("Stopped old worker") >= 2, timeout=60), server.output()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert sent[0] > 100 and lost == [], (sent[0], lost[:3])
    assert marked_alive == old_workers, "each old worker is marked while it still serves"
    assert not old_workers & set(workers(server)) and not list(marks.glob("*")), "then stopped, its mark removed"
