"""This tree's CPU per request against another revision's, at load, in the same run.

Issue 39's CPU aims are ratios to the code it was filed on (31131f3): this machine's speed drifts
between runs by more than the aims, so both trees are measured in one run, round by round. The
baseline revision's `webhook/` and `policies/` are exported once (`git archive`) into
`.bench/trees/<commit>`; each tree is served by bench/load.py's `vgate serve` (2 workers, 2 threads)
with its own shipped config and policies, on this environment's Python and packages. ApacheBench sends
the sensitive pod's /validate (or /mutate) to each server in turn, in alternating order; the figures
are each round's ratio to the baseline (median, quartiles), with CPU from every thread's schedstat
(nanoseconds: a round of 300 evaluations is only ~23 of /proc's 10 ms ticks of a child).

--control adds a copy of this tree as a third server: what an identical tree reads against the
baseline, and against this one, is the run's own noise, to judge the other figures by.

    apt-get install apache2-utils
    python bench/against.py --baseline 31131f3 --rounds 100 --requests 300 --control
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from load import (  # noqa: E402
    RATIO_KEYS,
    Server,
    admission_review,
    paired_rounds,
    ratio_line,
    realistic_pod,
    start_server,
    stop_servers,
)

TREES = ROOT / ".bench" / "trees"  # ignored: exported revisions, kept for the next run
SERVED = ("webhook", "policies")  # what a server of another tree runs on


def exported(revision: str) -> tuple[str, Path]:
    """``revision``'s commit and the folder its served files are exported to (once)."""
    found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
                           capture_output=True, text=True)
    if found.returncode != 0:
        raise SystemExit(f"--baseline {revision}: no such commit in {ROOT}")
    commit = found.stdout.strip()
    tree = TREES / commit
    if not tree.is_dir():
        TREES.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".export-", dir=TREES))
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, *SERVED],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        partial.rename(tree)  # whole or not at all: an interrupted export is never taken for a tree
    return commit, tree


def copy_of_this_tree(into: Path) -> Path:
    """This checkout's served files as they are now (uncommitted changes too), for the control."""
    for name in SERVED:
        shutil.copytree(ROOT / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="31131f3", help="the revision to compare with (default: the code "
                        "issue 39 was filed on)")
    parser.add_argument("--endpoint", default="/validate", choices=("/validate", "/mutate"))
    parser.add_argument("--rounds", type=int, default=100, help="paired rounds")
    parser.add_argument("--requests", type=int, default=300, help="requests per server and round")
    parser.add_argument("--concurrency", type=int, default=4, help="keep-alive connections in flight")
    parser.add_argument("--control", action="store_true", help="also serve an identical copy of this tree")
    args = parser.parse_args()

    if not shutil.which("ab"):
        raise SystemExit("ab not found: apt-get install apache2-utils")
    commit, baseline = exported(args.baseline)
    body = admission_review(realistic_pod())
    with tempfile.TemporaryDirectory(prefix="vgate-control-") as scratch:
        trees: dict[str, Path | None] = {"baseline": baseline, "this": None}
        if args.control:
            trees["control"] = copy_of_this_tree(Path(scratch))
        servers: dict[str, Server] = {}
        try:
            for name, tree in trees.items():
                servers[name] = start_server(2, 2, tree=tree)
            runs = paired_rounds(servers, args.endpoint, body, args.rounds, args.requests, args.concurrency,
                                 precise=True)
        finally:
            stop_servers(servers.values())
    print(f"{args.endpoint} of the sensitive pod, {args.requests} requests x {args.rounds} paired rounds, "
          f"concurrency {args.concurrency}, 2 workers each; baseline {commit[:12]}, this tree {ROOT}"
          + (", control a copy of this tree" if args.control else ""))
    pairs = [("baseline", "this")] + ([("baseline", "control"), ("this", "control")] if args.control else [])
    for over, name in pairs:
        for key in RATIO_KEYS:
            print(ratio_line(key, runs, over, name))


if __name__ == "__main__":
    main()
