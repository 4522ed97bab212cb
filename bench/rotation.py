"""Requests lost when the serving certificate is renewed under load, per renewal.

A renewed pair makes the master replace its granian workers one by one (TLS is set up when a worker
starts). A stopping worker closes its idle keep-alive connections at once, and a request that a
client wrote in that instant meets a closed connection: the API server's webhook client does not
resend a POST it has written (Go's transport), so under ``failurePolicy: Fail`` the write it was
admitting is refused. This bench counts such losses: it starts `vgate serve` (granian, --workers,
certificates watched every 0.3 s), keeps --clients keep-alive connections posting the realistic
pod to /validate (each client honours ``Connection: close`` and reconnects, as Go's does), renews
the certificate --renewals times (same CA, as cert-manager does), waits each time until every old
worker has stopped, and reports the requests sent and lost per renewal, and the same count over an
equal time without a renewal (the baseline: it should be zero).

    python bench/rotation.py --renewals 10 --clients 4
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench")]

from load import admission_review, realistic_pod, start_server  # noqa: E402


class Clients:
    """``count`` threads posting ``body`` back to back on keep-alive connections, counting failures."""

    def __init__(self, port: int, ca: str, body: bytes, count: int) -> None:
        self.port, self.body = port, body
        self.context = ssl.create_default_context(cafile=ca)
        self.sent = self.lost = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._post_until_stopped) for _ in range(count)]

    def __enter__(self) -> Clients:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return self.sent, self.lost

    def _post_until_stopped(self) -> None:
        connection = self._connect()
        while not self._stop.is_set():
            try:
                connection.request("POST", "/validate", self.body, {"Content-Type": "application/json"})
                answer = connection.getresponse()
                answer.read()
                failed = answer.status != 200 and f"HTTP {answer.status}"
            except (OSError, http.client.HTTPException) as error:  # a closed connection, as the API server sees it
                failed = f"{type(error).__name__}: {error}"
                connection.close()
                connection = self._connect()
            with self._lock:
                self.sent += 1
                if failed:
                    self.lost += 1
                    self.errors.append(failed)
        connection.close()

    def _connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=10)


def stopped_old_workers(log: Path) -> int:
    return log.read_text(errors="replace").count("Stopped old worker")


def replace_workers(server: subprocess.Popen, log: Path, certs: Path, workers: int) -> float:
    """Renew the pair under the same CA, as cert-manager does (`vgate certs` keeps its CA), and wait
    until every old worker has stopped; the seconds that took."""
    before, started = stopped_old_workers(log), time.monotonic()
    subprocess.run([sys.executable, "-m", "webhook", "certs", "--out", str(certs)], check=True,
                   capture_output=True, cwd=ROOT)
    while stopped_old_workers(log) < before + workers:
        if server.poll() is not None or time.monotonic() - started > 120:
            raise SystemExit(f"the workers were not replaced:\n{log.read_text()[-2000:]}")
        time.sleep(0.05)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--renewals", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4, help="keep-alive connections posting back to back")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="vgate-rotation-") as scratch:
        log = Path(scratch) / "server.log"
        server, port, ca, workdir = start_server(args.workers, 2, extra=("--reload-interval", "0.3"), output=log)
        certs = Path(workdir.name) / "certs"
        try:
            # The pair `serve` made for itself has no CA kept beside it: the first `vgate certs` makes
            # one (certs.ca/), and every renewal after it keeps it, as the clients' trust needs.
            replace_workers(server, log, certs, args.workers)
            with Clients(port, ca, admission_review(realistic_pod()), args.clients) as clients:
                time.sleep(2)  # every client connected and warm
                renewal_seconds, lost, sent = [], [], []
                for _ in range(args.renewals):
                    sent0, lost0 = clients.counts()
                    renewal_seconds.append(replace_workers(server, log, certs, args.workers))
                    sent1, lost1 = clients.counts()
                    sent.append(sent1 - sent0)
                    lost.append(lost1 - lost0)
                    time.sleep(1)
                quiet_sent0, quiet_lost0 = clients.counts()
                time.sleep(sum(renewal_seconds))  # as long as all renewals took, with none
                quiet_sent1, quiet_lost1 = clients.counts()
                errors = sorted(set(clients.errors))
        finally:
            server.terminate()
            server.wait(30)
            workdir.cleanup()
    figures = {
        "renewals": args.renewals, "clients": args.clients, "workers": args.workers,
        "seconds_per_renewal": [round(s, 2) for s in renewal_seconds],
        "sent_per_renewal": sent, "lost_per_renewal": lost, "lost": sum(lost), "sent": sum(sent),
        "without_renewal": {"seconds": round(sum(renewal_seconds), 1), "sent": quiet_sent1 - quiet_sent0,
                            "lost": quiet_lost1 - quiet_lost0},
        "errors": errors[:5],
    }
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
