"""What forwarding the decision log to the audit system (issue 37) costs an admission.

Starts `vgate serve` twice with the shipped config and policies: without forwarding (the baseline)
and with audit.forward to a real rsyslog (RELP, imrelp writing every message to a file, as the
tests run it), and drives POST /validate on each with ApacheBench, interleaved round by round.
Reports each one's p50, p99 and server CPU per request (its whole process tree: workers, evaluator
children and the forwarder thread), the medians of the rounds with their spread, and the ratios
to the baseline of the same run; and rsyslog's own CPU per record. Before reporting, every
record the forwarding server wrote must be in rsyslog's file (else it says what is missing).

    apt-get install apache2-utils rsyslog rsyslog-relp
    python bench/forwarding.py --requests 3000 --concurrency 4 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from e2e.collectors import Rsyslog  # noqa: E402
from webhook.audit.delivery import fully_delivered  # noqa: E402

from load import admission_review, measure, realistic_pod, start_server, tree_cpu_seconds  # noqa: E402


def records(audit: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in audit.glob("decisions-*.jsonl"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    body = admission_review(realistic_pod())
    scratch = tempfile.TemporaryDirectory(prefix="vgate-forward-bench-")
    collector = Rsyslog(Path(scratch.name) / "collector", "relp").start()
    servers = {"off": start_server(args.workers, 1),
               "on": start_server(args.workers, 1, forward_url=collector.url)}
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
    collector_cpu = 0.0
    try:
        for _ in range(args.rounds):
            for name, (process, port, _, _) in servers.items():
                assert collector.process is not None
                before = tree_cpu_seconds(collector.process.pid)
                rounds[name].append(measure(f"https://127.0.0.1:{port}/validate", body, args.requests,
                                            args.concurrency, process.pid))
                if name == "on":
                    collector_cpu += tree_cpu_seconds(collector.process.pid) - before
        audit = Path(servers["on"][3].name) / "audit"
        deadline = time.monotonic() + 120
        while not fully_delivered(audit, collector.url) and time.monotonic() < deadline:
            time.sleep(0.5)
        held = len(collector.lines())
        written = records(audit)
        if held < written:
            raise SystemExit(f"not reporting: the collector holds {held} records of the {written} vgate wrote")
    finally:
        for process, _, _, _ in servers.values():
            process.terminate()
            process.wait(timeout=30)
        collector.kill()
    print(f"POST /validate, {args.requests} requests x {args.rounds} rounds, concurrency {args.concurrency}, "
          f"{args.workers} workers; forwarding to rsyslog over RELP ({held} records delivered, all of them)")
    medians = {}
    for name, runs in rounds.items():
        medians[name] = {key: statistics.median(run[key] for run in runs) for key in ("p50_ms", "p99_ms", "cpu_us")}
        spread = {key: f"{min(run[key] for run in runs):.2f}-{max(run[key] for run in runs):.2f}"
                  for key in ("p50_ms", "p99_ms", "cpu_us")}
        print(f"  forwarding {name:3}: p50 {medians[name]['p50_ms']:.2f} ms ({spread['p50_ms']}), "
              f"p99 {medians[name]['p99_ms']:.2f} ms ({spread['p99_ms']}), "
              f"CPU {medians[name]['cpu_us']:.0f} us/request ({spread['cpu_us']})")
    on, off = medians["on"], medians["off"]
    print(f"  on / off: p50 {on['p50_ms'] / off['p50_ms']:.2f}x, p99 {on['p99_ms'] / off['p99_ms']:.2f}x, "
          f"CPU per request {on['cpu_us'] / off['cpu_us']:.2f}x")
    print(f"  rsyslog: {collector_cpu / (args.requests * args.rounds) * 1e6:.0f} us CPU per record")


if __name__ == "__main__":
    main()
