"""What the background audit costs (issue 35): a scan at scale, and admission beside a running scan.

Scale: ``webhook.background.scan.scan`` (the judging `vgate audit scan` does once the cluster is
listed) over --pods synthetic pods in 100 namespaces on --nodes nodes (a few label sets, as
controllers make them), against the same scan of --baseline pods, in interleaved rounds: wall and
CPU seconds, CPU per object, and the process's peak memory (bounded: the objects as listed, one
finding each).

Admission (--admission): `vgate serve` (2 workers, the shipped config and policies, bench/load.py's
server and ApacheBench client) takes /validate of a realistic sensitive pod, in interleaved rounds
alone and with a scan of --pods pods running beside it as its own process (as the chart runs it: a
Deployment of its own, here at nice 19 on the same 2 cores); p50, p99 and the server's CPU per
request, medians with each round.

    python bench/scan.py --pods 100000 --rounds 3
    python bench/scan.py --admission --pods 20000 --rounds 5 --requests 2000
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from webhook.background.scan import SCANNED, scan  # noqa: E402
from webhook.files.config_file import load_config  # noqa: E402
from webhook.policy.regorus_engine import RegorusEngine  # noqa: E402
from webhook.policy.sources import load_policy_set  # noqa: E402

NAMESPACES = 100
CREATED_BY_CONTROLLER = [{"manager": "kube-controller-manager", "operation": "Update",
                          "fieldsV1": {"f:spec": {"f:containers": {}, "f:schedulerName": {}}}}]


def cluster(pods: int, nodes: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pods as the API server lists them (a controller's labels, bound to a node), and the state."""
    made = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"worker-{i}", "namespace": f"team-{i % NAMESPACES}",
                          "labels": {"app": f"app-{i % 20}", "pod-template-hash": f"h{i % 40}"},
                          "ownerReferences": [{"kind": "ReplicaSet", "name": f"app-{i % 20}-h{i % 40}"}],
                          "managedFields": CREATED_BY_CONTROLLER},  # nodeName: the binding's
             "spec": {"schedulerName": "volcano", "nodeName": f"node-{i % nodes}", "priorityClassName": "vgate-normal",
                      "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                      "containers": [{"name": "main", "image": "registry.example.com/app:1",
                                      "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                    "limits": {"memory": "1Gi"}},
                                      "securityContext": {"allowPrivilegeEscalation": False,
                                                          "capabilities": {"drop": ["ALL"]}}}]},
             "status": {"phase": "Running"}} for i in range(pods)]
    state = [{"apiVersion": "v1", "kind": "Namespace",
              "metadata": {"name": f"team-{n}", "labels": {"kubernetes.io/metadata.name": f"team-{n}"},
                           "annotations": {"scheduling.volcano.sh/queue-name": "default"}}}
             for n in range(NAMESPACES)]
    state += [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{n}", "labels": {
        "topology.kubernetes.io/zone": f"zone-{n % 3}"}}} for n in range(nodes)]
    return made, state + made


def timed_scan(pods: int, nodes: int) -> dict[str, float]:
    config = load_config()
    engine = RegorusEngine(load_policy_set(ROOT / "policies"), config.document)
    made, state = cluster(pods, nodes)
    [pod_kind] = [kind for kind in SCANNED if kind.kind == "Pod"]
    wall, cpu = time.monotonic(), time.process_time()
    result = scan({pod_kind: made}, state, config, engine, (), datetime.now(timezone.utc))
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    assert len(result.findings) == pods and not result.denied, result.summary()
    return {"wall_s": wall, "cpu_s": cpu, "cpu_us_per_object": cpu / pods * 1e6}


def scale(args: argparse.Namespace) -> None:
    rounds: dict[str, list[dict[str, float]]] = {"baseline": [], "scale": []}
    for _ in range(args.rounds):  # interleaved: drift in the machine's speed hits both alike
        rounds["baseline"].append(timed_scan(args.baseline, max(1, args.nodes * args.baseline // args.pods)))
        rounds["scale"].append(timed_scan(args.pods, args.nodes))
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"scan of {args.pods} pods on {args.nodes} nodes against {args.baseline} pods, {args.rounds} interleaved "
          f"rounds (medians, each round in brackets); peak memory of this process {peak_mib:.0f} MiB")
    base = statistics.median(r["cpu_us_per_object"] for r in rounds["baseline"])
    for name, runs in rounds.items():
        line = ", ".join(f"{key} {statistics.median(r[key] for r in runs):.1f} "
                         f"({'/'.join(f'{r[key]:.1f}' for r in runs)})" for key in runs[0])
        ratio = statistics.median(r["cpu_us_per_object"] for r in runs) / base
        print(f"{name:8s} {line}; CPU per object {ratio:.2f}x the baseline's")


def admission(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from load import admission_review, measure, realistic_pod, start_server

    body = admission_review(realistic_pod())
    server, port, _, workdir = start_server(2, 2)
    url = f"https://127.0.0.1:{port}/validate"
    try:
        measure(url, body, 300, args.concurrency, server.pid)  # warm every worker
        rounds: dict[str, list[dict[str, float]]] = {"alone": [], "beside a scan": []}
        for _ in range(args.rounds):
            rounds["alone"].append(measure(url, body, args.requests, args.concurrency, server.pid))
            scanner = subprocess.Popen(["nice", "-n", "19", sys.executable, __file__, "--loop", "--pods",
                                        str(args.pods), "--nodes", str(args.nodes)], stdout=subprocess.DEVNULL)
            try:
                time.sleep(3)  # its engine loaded and judging
                rounds["beside a scan"].append(measure(url, body, args.requests, args.concurrency, server.pid))
            finally:
                scanner.kill()
                scanner.wait()
        print(f"/validate of a {len(body)}-byte sensitive pod, {args.requests} requests a round at concurrency "
              f"{args.concurrency}, 2 workers; {args.rounds} interleaved rounds (medians, each round in brackets); "
              f"the scan: {args.pods} pods at nice 19 on the same 2 cores")
        alone = {key: statistics.median(r[key] for r in rounds["alone"]) for key in ("p50_ms", "p99_ms", "cpu_us")}
        for name, runs in rounds.items():
            cells = []
            for key in ("p50_ms", "p99_ms", "cpu_us"):
                median = statistics.median(r[key] for r in runs)
                cells.append(f"{key} {median:.2f} ({'/'.join(f'{r[key]:.2f}' for r in runs)}) "
                             f"{median / alone[key]:.2f}x")
            print(f"{name:14s} " + ", ".join(cells))
    finally:
        server.kill()
        workdir.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--baseline", type=int, default=1_000, help="pods of the baseline scan")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--admission", action="store_true", help="admission latency beside a running scan")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--loop", action="store_true", help=argparse.SUPPRESS)  # the scanner of --admission
    args = parser.parse_args()
    if args.loop:
        while True:
            timed_scan(args.pods, args.nodes)
    (admission if args.admission else scale)(args)


if __name__ == "__main__":
    main()
