"""What durable, hash-chained decision logging costs /validate throughput.

Runs the same gateway code in process with the decision log off and on (each record fsync'd
before the answer, group-committed across threads), from --threads threads, interleaved in
rounds; reports medians and the throughput ratio (the aim: logging costs under 20%).

    python bench/audit_cost.py --requests 2000 --threads 8 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from webhook.audit.log import DecisionLog  # noqa: E402
from webhook.audit.verify import verify_segments  # noqa: E402
from webhook.server.gateway import Gateway  # noqa: E402
from webhook.server.metrics import Metrics  # noqa: E402
from webhook.server.wiring import Settings, load_gateway  # noqa: E402

from load import admission_review, realistic_pod  # noqa: E402


def throughput(gateway: Gateway, body: bytes, requests: int, threads: int) -> float:
    per_thread = requests // threads

    def work() -> None:
        for _ in range(per_thread):
            gateway.validate(body)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return per_thread * threads / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    body = admission_review(realistic_pod())
    with tempfile.TemporaryDirectory() as scratch:
        off = load_gateway(Settings(None, str(ROOT / "policies")), Metrics(), audit=False)
        on = load_gateway(Settings(None, str(ROOT / "policies")), Metrics(), audit=False)
        on.decisions = DecisionLog(Path(scratch) / "audit", replica="bench")
        rates: dict[str, list[float]] = {"off": [], "on": []}
        throughput(off, body, 200, args.threads)
        throughput(on, body, 200, args.threads)
        for _ in range(args.rounds):
            rates["off"].append(throughput(off, body, args.requests, args.threads))
            rates["on"].append(throughput(on, body, args.requests, args.threads))
        good, findings = verify_segments(Path(scratch) / "audit")
        off_rate, on_rate = statistics.median(rates["off"]), statistics.median(rates["on"])
        print(f"{args.threads} threads, {args.requests} validations x {args.rounds} rounds, one process")
        print(f"decision log off {off_rate:7.0f} validations/s")
        print(f"decision log on  {on_rate:7.0f} validations/s  (fsync'd, group-committed, hash-chained)")
        print(f"logging costs {(1 - on_rate / off_rate) * 100:.1f}% of throughput; "
              f"{good} records written and verified, {len(findings)} problems")


if __name__ == "__main__":
    main()
