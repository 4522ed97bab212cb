"""Report generation at scale: one hour of --records decisions, built in bounded memory.

Writes an hour of hash-chained decision records (the log's own format, without fsync, to be
quick), then builds that hour's report in a child process and reports its wall time, its CPU
(user and system) per decision and its peak RSS. The aim: 1,000,000 decisions in under a minute
and under 300 MiB.

    python bench/report_scale.py --records 1000000
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
HOUR = datetime(2026, 12, 2, 10, tzinfo=timezone.utc)


def write_hour(audit: Path, records: int, writers: int = 2) -> None:
    audit.mkdir(parents=True)
    for writer in range(writers):
        prev = "0" * 64
        with open(audit / f"decisions-bench-{writer}-{HOUR:%Y%m%dT%H}.jsonl", "wb") as segment:
            for n in range(writer, records, writers):
                denied = n % 20 == 0
                record = {
                    "time": f"2026-12-02T10:{(n * 60 // records):02d}:00.000000+00:00",
                    "replica": f"bench-{writer}",
                    "endpoint": "validate",
                    "uid": f"uid-{n}",
                    "user": f"user-{n % 50}",
                    "groups": ["team"],
                    "operation": "CREATE",
                    "kind": "v1/Pod",
                    "resource": "pods",
                    "namespace": f"ns-{n % 40}",
                    "name": f"pod-{n}",
                    "dryRun": n % 100 == 0,
                    "decision": "denied" if denied else "allowed",
                    "allowed": not denied,
                    "message": "vgate denied Pod" if denied else None,
                    "policyRevision": "a" * 64,
                    "latencyMs": 1.2,
                    "rules": [{"id": "security-host-ports", "action": "deny", "message": "opens host ports [80]"}]
                    if denied
                    else [],
                    "prev": prev,
                }
                line = orjson.dumps(record)
                prev = hashlib.sha256(line).hexdigest()
                segment.write(line + b"\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        audit, reports = Path(scratch) / "audit", Path(scratch) / "reports"
        started = time.perf_counter()
        write_hour(audit, args.records)
        print(
            f"wrote {args.records} records ({sum(p.stat().st_size for p in audit.iterdir()) / 2**20:.0f} MiB) "
            f"in {time.perf_counter() - started:.1f} s"
        )
        build = (
            "import sys; from pathlib import Path; from datetime import datetime, timezone\n"
            "from webhook.reports.keys import ensure_key; from webhook.reports.build import build_report\n"
            f"key = Path({str(scratch)!r}) / 'k.key'; ensure_key(key)\n"
            f"build_report(datetime(2026, 12, 2, 10, tzinfo=timezone.utc), {str(audit)!r}, {str(reports)!r}, "
            f"{str(ROOT / 'policies')!r}, key)\n"
        )
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", build], check=True, cwd=ROOT)
        elapsed = time.perf_counter() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
        out = reports / "2026/12/02/10"
        sizes = ", ".join(f"{p.name} {p.stat().st_size / 2**20:.1f} MiB" for p in sorted(out.iterdir()))
        print(f"report of {args.records} decisions built in {elapsed:.1f} s, peak RSS {peak:.0f} MiB, "
              f"CPU {cpu:.1f} s ({cpu * 1e6 / args.records:.1f} µs per decision)")
        print(f"files: {sizes}")


if __name__ == "__main__":
    main()
