"""The cluster state at scale, through the real API server: how long a worker takes to list and
watch N namespaces, and how much memory its store holds.

Needs the e2e control plane (`e2e/cluster up`). Creates --namespaces annotated namespaces (kept
between runs, named bench-ns-<n>), then, in a fresh child process each round, starts a
ClusterState with the admin kubeconfig and reports the time until synced, the objects held, the
store's size (tracemalloc, the projections alone) and the process's peak RSS, next to the same
child's RSS before it started (the baseline of the same run). Rounds are repeated; medians and
spreads are printed.

    python bench/cluster_state.py --namespaces 5000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, resource, sys, time, tracemalloc
sys.path.insert(0, sys.argv[1])
from webhook.cluster.api import ApiServer
from webhook.cluster.state import ClusterState
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
started = time.perf_counter()
state = ClusterState(lambda: ApiServer.from_kubeconfig(sys.argv[2]))
state.start()
while not state.synced():
    time.sleep(0.005)
synced = time.perf_counter() - started
held, _ = tracemalloc.get_traced_memory()
state.stop()
print(json.dumps({"seconds": synced, "objects": state.freshness(time.monotonic())["Namespace"]["objects"],
                  "traced_mib": held / 2**20, "rss_before_mib": before / 1024,
                  "rss_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def ensure_namespaces(count: int) -> None:
    from e2e import cluster

    existing = cluster.kubectl("get", "namespaces", "-o", "name").stdout.split()
    missing = [n for n in range(count) if f"namespace/bench-ns-{n}" not in existing]
    for start in range(0, len(missing), 500):
        items = [{"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": f"bench-ns-{n}", "labels": {"bench": "cluster-state", "team": f"t{n % 40}"},
                               "annotations": {"scheduling.volcano.sh/queue-name": "batch"}}}
                 for n in missing[start:start + 500]]
        cluster.kubectl("apply", "-f", "-", input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespaces", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from e2e import cluster

    ensure_namespaces(args.namespaces)
    runs = []
    for _ in range(args.rounds):
        done = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(cluster.KUBECONFIG)], capture_output=True,
                              text=True, timeout=600, check=True)
        runs.append(json.loads(done.stdout))
    for key in ("seconds", "objects", "traced_mib", "rss_before_mib", "rss_peak_mib"):
        values = [run[key] for run in runs]
        print(f"{key:15} median {statistics.median(values):10.2f}   min {min(values):10.2f}   max {max(values):10.2f}")
    growth = [run["rss_peak_mib"] - run["rss_before_mib"] for run in runs]
    print(f"{'rss_growth_mib':15} median {statistics.median(growth):10.2f}   (peak RSS over the child's own start)")


if __name__ == "__main__":
    main()
