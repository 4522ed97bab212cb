"""What durable, hash-chained decision logging costs /validate throughput, and CPU per decision.

Runs the same gateway code in process with the decision log off and on (each record fsync'd
before the answer, group-committed across threads), from --threads threads, interleaved in
rounds; reports medians and the throughput ratio (the aim: logging costs under 20%), and the CPU
per validation (this process, every thread, user and system) with the log off and on: the
difference is what one decision record costs, and at 1 million decisions an hour (278/s) the share
of one core the decision log takes.

    python bench/audit_cost.py --requests 2000 --threads 8 --rounds 3

At load, what the log's sync costs the server: two `vgate serve`s (bench/load.py's, 2 workers),
one with its scratch folder, and so its decision log, in the temporary folder (a disk here), the other
on tmpfs (/dev/shm), where fdatasync returns at once; ApacheBench sends each the sensitive pod's
/validate in paired rounds, in alternating order, and the figures are each round's tmpfs/disk ratio
(median, quartiles): what the whole server spends per request, by role, beside requests a second.

    python bench/audit_cost.py --at-load --rounds 40 --requests 1000 --concurrency 4
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

from load import (  # noqa: E402
    RATIO_KEYS,
    admission_review,
    paired_rounds,
    ratio_line,
    realistic_pod,
    start_server,
    stop_servers,
)

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
    parser.add_argument("--at-load", action="store_true", help="the sync's cost at load over HTTPS: the decision "
                        "log on the temporary folder's disk against tmpfs (--requests per server and round)")
    parser.add_argument("--concurrency", type=int, default=4, help="with --at-load: ab's connections in flight")
    parser.add_argument("--tmpfs", default="/dev/shm", help="with --at-load: a tmpfs folder for the second server")
    args = parser.parse_args()
    if args.at_load:
        at_load(args.rounds, args.requests, args.concurrency, args.tmpfs)
        return
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


def at_load(rounds: int, requests: int, concurrency: int, tmpfs: str) -> None:
    """The tmpfs server's figures over the disk server's, round by round (see the module's docstring)."""
    kinds = {"disk": filesystem_of(tempfile.gettempdir()), "tmpfs": filesystem_of(tmpfs)}
    if kinds["tmpfs"] != "tmpfs" or kinds["disk"] == "tmpfs":
        raise SystemExit(f"--at-load needs the temporary folder on a disk and {tmpfs} on tmpfs: they are {kinds}")
    body = admission_review(realistic_pod())
    servers = {"disk": start_server(2, 2), "tmpfs": start_server(2, 2, scratch_root=tmpfs)}
    try:
        runs = paired_rounds(servers, "/validate", body, rounds, requests, concurrency)
        print(f"/validate of the sensitive pod, {requests} requests x {rounds} paired rounds, concurrency "
              f"{concurrency}, 2 workers each; decision log on {kinds['disk']} ({tempfile.gettempdir()}) and on "
              f"tmpfs ({tmpfs})")
        for key in RATIO_KEYS:
            print(ratio_line(key, runs, "disk", "tmpfs"))
    finally:
        stop_servers(servers.values())


def filesystem_of(path: str) -> str:
    """The type of the filesystem that holds ``path`` (the longest mount point above it)."""
    target, best, kind = str(Path(path).resolve()), "", "unknown"
    for line in Path("/proc/mounts").read_text().splitlines():
        point, fstype = line.split()[1:3]
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
            best, kind = point, fstype
    return kind


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"


if __name__ == "__main__":
    main()
