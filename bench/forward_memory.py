"""Whether the forwarder's memory grows with the backlog (issue 37): a backlog of --small and of
--large decision records (chained as the decision log writes them) delivered to a real rsyslog over
RELP, each in a fresh process; reports the process's peak resident memory while it delivers, for
each size, and their ratio (an outbox read in bounded batches: about 1x).

    python bench/forward_memory.py --small 1000 --large 200000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from e2e.collectors import Rsyslog  # noqa: E402


def write_backlog(audit: Path, count: int) -> None:
    """``count`` chained records of one writer, as the decision log holds them (written at once)."""
    audit.mkdir(parents=True)
    prev, lines = "0" * 64, []
    for n in range(count):
        line = orjson.dumps({"time": f"2026-12-04T10:{n // 60 % 60:02d}:{n % 60:02d}.000000+00:00",
                             "replica": "bench", "endpoint": "validate", "uid": f"u{n}", "decision": "allowed",
                             "kind": "v1/Pod", "namespace": "ml-training", "name": f"pod-{n}", "prev": prev})
        prev = hashlib.sha256(line).hexdigest()
        lines.append(line)
    (audit / "decisions-bench-1-20261204T10.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def _high_water_kib() -> int:
    """This process's peak resident memory (VmHWM: its own, unlike ru_maxrss, which a child started
    by exec inherits from the parent that wrote the backlog)."""
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


def deliver(audit: str, url: str) -> None:
    """In this (fresh) process: deliver the whole backlog; print the peak RSS before and after, in KiB."""
    from webhook.core.config import ForwardSettings
    from webhook.forward.forwarder import Forwarder

    before = _high_water_kib()
    forwarder = Forwarder(ForwardSettings(url, None, None, None, 8192), audit)
    started = time.perf_counter()
    sent = forwarder.deliver()
    seconds = time.perf_counter() - started
    forwarder.close()
    print(json.dumps({"sent": sent, "before_kib": before, "peak_kib": _high_water_kib(),
                      "seconds": seconds}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=200000)
    parser.add_argument("--deliver", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.deliver:
        deliver(*args.deliver)
        return
    results = {}
    with tempfile.TemporaryDirectory(prefix="vgate-forward-memory-") as scratch:
        collector = Rsyslog(Path(scratch) / "collector", "relp").start()
        try:
            for count in (args.small, args.large):
                audit = Path(scratch) / f"audit-{count}"
                write_backlog(audit, count)
                run = subprocess.run([sys.executable, __file__, "--deliver", str(audit), collector.url],
                                     capture_output=True, text=True, check=True, cwd=ROOT)
                results[count] = json.loads(run.stdout.strip().splitlines()[-1])
            held = len(collector.lines())
        finally:
            collector.kill()
    if held != args.small + args.large:
        raise SystemExit(f"not reporting: the collector holds {held} of {args.small + args.large} records")
    for count, result in results.items():
        grown = result["peak_kib"] - result["before_kib"]
        print(f"backlog {count:>7} records: peak RSS {result['peak_kib'] / 1024:.1f} MiB (+{grown / 1024:.1f} MiB "
              f"while delivering), {count / result['seconds']:.0f} records/s")
    small, large = (results[c]["peak_kib"] for c in (args.small, args.large))
    print(f"peak RSS, {args.large} / {args.small} records: {large / small:.2f}x")


if __name__ == "__main__":
    main()
