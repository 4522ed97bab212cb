"""What durable, hash-chained decision logging costs /validate throughput, and CPU per decision.

Runs the same gateway code in process with the decision log off and on (each record fsync'd
before the answer, group-committed across threads), from --threads threads, interleaved in
rounds; reports medians and the throughput ratio (the aim: logging costs under 20%), and the CPU
per validation (this process, every thread, user and system) with the log off and on: the
difference is what one decision record costs, and at 1 million decisions an hour (278/s) the share
of one core the decision log takes.

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

MILLION_AN_HOUR = 1e6 / 3600  # decisions per second


def throughput(gateway: Gateway, body: bytes, requests: int, threads: int) -> tuple[float, float]:
    """Validations per second, and CPU seconds per validation."""
    per_thread = requests // threads

    def work() -> None:
        for _ in range(per_thread):
            gateway.validate(body)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    started, cpu = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done = per_thread * threads
    return done / (time.perf_counter() - started), (time.process_time() - cpu) / done


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
        cpu: dict[str, list[float]] = {"off": [], "on": []}
        throughput(off, body, 200, args.threads)
        throughput(on, body, 200, args.threads)
        for _ in range(args.rounds):
            for name, gateway in (("off", off), ("on", on)):
                rate, seconds = throughput(gateway, body, args.requests, args.threads)
                rates[name].append(rate)
                cpu[name].append(seconds * 1e6)
        good, findings = verify_segments(Path(scratch) / "audit")
        off_rate, on_rate = statistics.median(rates["off"]), statistics.median(rates["on"])
        record = [on - off for on, off in zip(cpu["on"], cpu["off"], strict=True)]  # round by round
        print(f"{args.threads} threads, {args.requests} validations x {args.rounds} rounds, one process")
        for name, rate in (("off", off_rate), ("on ", on_rate)):
            print(f"decision log {name} {rate:7.0f} validations/s, CPU {spread(cpu[name.strip()])} µs per validation")
        print(f"logging costs {(1 - on_rate / off_rate) * 100:.1f}% of throughput; "
              f"{good} records written and verified, {len(findings)} problems")
        core_share = statistics.median(record) * 1e-6 * MILLION_AN_HOUR  # CPU seconds per second
        print(f"one decision record costs {spread(record)} µs of CPU (on less off, per round); at 1,000,000 "
              f"decisions an hour: {core_share * 100:.1f}% of one core")


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"


if __name__ == "__main__":
    main()
