"""Slow-client resistance: 500 dripping connections against `vgate serve`, legitimate /validate beside them.

For each server (granian, the chosen stack; gunicorn gthread for comparison) this starts `vgate
serve` with 2 workers on loopback, opens --connections connections that each drip a TLS
handshake, request headers or a body one byte per second (a third of each; they reconnect when
closed), and meanwhile posts the realistic sensitive pod to /validate from one client for
--seconds, on keep-alive connections renewed every ten requests. It reports the legitimate
requests' p50/p99/max latency and failures (5 s client timeout), and how the server treated the
dripping connections. The bar (issue 12): no failure and p99 < 1 s for 60 s with 500 connections.

    python bench/slow_clients.py --connections 500 --seconds 60
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

from dripping_clients import drip, legitimate  # noqa: E402
from load import admission_review, realistic_pod, start_server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=500, help="dripping connections")
    parser.add_argument("--seconds", type=float, default=60, help="how long legitimate requests are measured")
    parser.add_argument("--servers", nargs="+", default=["granian", "gunicorn"], choices=["granian", "gunicorn"])
    parser.add_argument("--threads", type=int, default=2, help="threads per worker")
    args = parser.parse_args()

    body = admission_review(realistic_pod())
    results = {}
    for kind in args.servers:
        server, port, ca, workdir = start_server(2, args.threads, server_kind=kind)
        try:
            ramp = args.connections * 0.002 + 2
            attack, dripping = drip(args.connections, "127.0.0.1", port, Path(ca), 1.0, args.seconds + ramp + 1)
            time.sleep(ramp)
            caller = legitimate("127.0.0.1", port, Path(ca), body, args.seconds)
            attack.join()
        finally:
            server.terminate()
            server.wait(timeout=60)
            workdir.cleanup()
        results[kind] = {"legitimate": caller.summary(), "first_failures": caller.failures[:3],
                         "dripping": vars(dripping)}
        s = caller.summary()
        print(f"{kind:8s} {args.connections} dripping, {args.threads} threads/worker: legitimate /validate "
              f"{s['ok']} ok, {s['failed']} failed, p50 {s['p50_ms']:.1f} ms, p99 {s['p99_ms']:.1f} ms, "
              f"max {s['max_ms']:.1f} ms; dripping connections opened {dripping.opened}, "
              f"closed by the server {dripping.closed_by_server}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
