"""Placement at scale, through the real API server and Volcano's real scheduler.

Needs the e2e control plane (`e2e/cluster up`). Two measurements:

1. **The cluster state at 5,000 nodes and 100,000 pods.** Creates --nodes Nodes (bench-node-<n>,
   three zones, not managed by kwok) and --pods Pods bound to them in the namespace bench-pods
   (labelled vgate.io/exempt=true, so no webhook judges them; they tolerate every taint so the node
   lifecycle controller never evicts them), kept between runs. Then, in a fresh child process each
   round, a worker's ClusterState (every kind) lists and watches them: seconds until synced, objects
   per kind, the stores' size (tracemalloc) and the child's peak RSS over its own start.

2. **What the binding webhook adds.** Interleaved rounds, with and without vgate's binding webhook
   (bind.vgate.io removed from, then put back into, the ValidatingWebhookConfiguration), while vgate's
   cache holds the pods above: (a) --binds direct Bindings of sensitive pods (POST pods/<name>/binding,
   as a scheduler binds) timed at the client, p50/p99; (b) --scheduled sensitive pods created for
   Volcano's scheduler, timed from creation until the API server shows them bound, p50/p99. Medians of
   the rounds with their spread, and vgate's own latencyMs of the bindings it judged.

    python bench/placement.py --nodes 5000 --pods 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

NAMESPACE = "bench-pods"
ZONES = ("bench-z0", "bench-z1", "bench-z2")
SEV = "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled"

CHILD = r"""
import json, sys, time, tracemalloc
sys.path.insert(0, sys.argv[1])
from webhook.cluster.api import ApiServer
from webhook.cluster.state import ClusterState
def rss_mib():  # the process's resident memory now (VmRSS), from /proc
    line = next(l for l in open("/proc/self/status") if l.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024
before = rss_mib()
tracemalloc.start()
started = time.perf_counter()
state = ClusterState(lambda: ApiServer.from_kubeconfig(sys.argv[2]))
state.start()
while not state.synced():
    time.sleep(0.01)
synced = time.perf_counter() - started
held, _ = tracemalloc.get_traced_memory()
tracemalloc.stop()
fresh = state.freshness(time.monotonic())
state.stop()
import orjson
shaping = time.perf_counter()
inventory = orjson.dumps(state.inventory())  # what the evaluator is given again when a node's labels change
shaped = time.perf_counter() - shaping
print(json.dumps({"seconds": synced, "nodes": fresh["Node"]["objects"], "pods": fresh["Pod"]["objects"],
                  "traced_mib": held / 2**20, "rss_growth_mib": rss_mib() - before,
                  "inventory_mib": len(inventory) / 2**20, "inventory_ms": shaped * 1000}))
"""


def api() -> Any:
    from e2e import cluster
    from webhook.cluster.api import ApiServer

    return ApiServer.from_kubeconfig(cluster.KUBECONFIG)


def post_all(path_of: Any, objects: list[dict[str, Any]], workers: int = 12) -> None:
    """Create ``objects`` (POST to ``path_of(obj)``), ``workers`` at a time; 409 (exists) is fine."""
    with api() as server, concurrent.futures.ThreadPoolExecutor(workers) as pool:
        def post(obj: dict[str, Any]) -> None:
            response = server.session.post(server.url + path_of(obj), json=obj, timeout=60)
            if response.status_code not in (201, 409):
                raise RuntimeError(f"{response.status_code}: {response.text[:300]}")
        list(pool.map(post, objects))


def count(path: str) -> int:
    with api() as server:
        page = server.get(path, {"limit": 1})
        return int(page["metadata"].get("remainingItemCount", 0)) + len(page["items"])


def ensure_scale(nodes: int, pods: int) -> None:
    from e2e import cluster

    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    cluster.kubectl("label", "namespace", NAMESPACE, "vgate.io/exempt=true", "--overwrite")
    have = count("/api/v1/nodes")
    wanted = [{"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": f"bench-node-{n}", "labels": {"topology.kubernetes.io/zone": ZONES[n % 3], SEV: "true",
                                             "kubernetes.io/hostname": f"bench-node-{n}", "bench": "placement"}},
        "spec": {"taints": [{"key": "bench", "value": "placement", "effect": "NoSchedule"}]}} for n in range(nodes)]
    if have < nodes:
        post_all(lambda obj: "/api/v1/nodes", wanted)
    have = count(f"/api/v1/namespaces/{NAMESPACE}/pods")
    if have >= pods:
        return
    made = []
    for n in range(have, pods):
        made.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"bench-pod-{n}", "namespace": NAMESPACE,
            "labels": {"app": f"job-{n // 8}", "volcano.sh/job-name": f"job-{n // 8}", "volcano.sh/task-spec": "worker",
                       "vgate.io/data-classification": "sensitive" if n % 5 == 0 else "internal"},
            "annotations": {"scheduling.k8s.io/group-name": f"job-{n // 8}-pg",
                            "scheduling.volcano.sh/queue-name": "batch"}},
            "spec": {"nodeName": f"bench-node-{n % nodes}", "schedulerName": "bench-none",
                     "nodeSelector": {"topology.kubernetes.io/zone": ZONES[(n % nodes) % 3]},
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "main", "image": "registry.example.com/app:1"}]}})
    started = time.monotonic()
    post_all(lambda obj: f"/api/v1/namespaces/{NAMESPACE}/pods", made)
    print(f"created {len(made)} pods in {time.monotonic() - started:.0f} s", file=sys.stderr)


def cache_rounds(rounds: int) -> list[dict[str, float]]:
    from e2e import cluster

    runs = []
    for _ in range(rounds):
        done = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(cluster.KUBECONFIG)], capture_output=True,
                              text=True, timeout=1800, check=True)
        runs.append(json.loads(done.stdout))
    return runs


def set_binding_webhook(on: bool) -> None:
    """Put vgate's binding webhook into, or take it out of, its ValidatingWebhookConfiguration."""
    from e2e import cluster

    [configuration] = [c for c in cluster.vgate_webhook_configurations()
                       if c["kind"] == "ValidatingWebhookConfiguration"]
    if not on:
        configuration = copy.deepcopy(configuration)
        configuration["webhooks"] = [w for w in configuration["webhooks"] if w["name"] != "bind.vgate.io"]
    cluster.kubectl("replace", "-f", "-", input_text=json.dumps(configuration))
    time.sleep(2)  # the API server's webhook configuration informer picks it up


BIND_ZONE = "bench-bind"
BIND_NODES = [f"bench-bind-{n}" for n in range(4)]


def ensure_bind_nodes() -> None:
    """Kwok nodes (Ready, running what is bound to them) of a zone of their own, encrypted and large:
    the binds of every round fit, whatever the e2e suite left on zone-a."""
    from test_placement import node

    from e2e import cluster

    for name in BIND_NODES:
        made = node(name, BIND_ZONE)
        made["status"]["capacity"] = made["status"]["allocatable"] = {"cpu": "4000", "memory": "16Ti", "pods": "4000"}
        cluster.apply([made])
    cluster.kubectl("wait", "--for=condition=Ready", "--timeout=120s", *[f"node/{n}" for n in BIND_NODES])


def held_pods(count_: int) -> list[str]:
    """Sensitive pods in ml-training Volcano will not place (their PodGroup wants 99 members)."""
    from test_placement import sensitive_pod

    group = f"bench-held-{uuid.uuid4().hex[:6]}"
    post_all(lambda obj: "/apis/scheduling.volcano.sh/v1beta1/namespaces/ml-training/podgroups", [
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": group},
         "spec": {"minMember": 99, "queue": "training"}}])
    names = [f"{group}-{i}" for i in range(count_)]
    post_all(lambda obj: "/api/v1/namespaces/ml-training/pods",
             [{**sensitive_pod(name, BIND_ZONE, group), "metadata": {
                 **sensitive_pod(name, BIND_ZONE, group)["metadata"], "namespace": "ml-training"}} for name in names],
             workers=4)
    time.sleep(1)  # vgate's watch has them
    return names


def timed_binds(names: list[str]) -> list[float]:
    latencies = []
    with api() as server:
        for i, name in enumerate(names):
            body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": "ml-training"},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": BIND_NODES[i % len(BIND_NODES)]}}
            started = time.perf_counter()
            response = server.session.post(f"{server.url}/api/v1/namespaces/ml-training/pods/{name}/binding",
                                            json=body, timeout=30)
            latencies.append((time.perf_counter() - started) * 1000)
            if response.status_code != 201:
                raise RuntimeError(f"binding {name}: {response.status_code} {response.text[:300]}")
        for name in names:  # their room is the next round's
            server.delete(f"/api/v1/namespaces/ml-training/pods/{name}")
    return latencies


def scheduled(count_: int) -> list[float]:
    """Sensitive pods for Volcano's scheduler: ms from the create call to the API server showing them bound."""
    from test_placement import sensitive_pod

    names = [f"bench-sched-{uuid.uuid4().hex[:8]}" for _ in range(count_)]
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    with api() as server:
        for name in names:
            obj = sensitive_pod(name, BIND_ZONE)
            obj["metadata"]["namespace"] = "ml-training"
            created[name] = time.monotonic()
            response = server.session.post(f"{server.url}/api/v1/namespaces/ml-training/pods", json=obj, timeout=30)
            if response.status_code != 201:
                raise RuntimeError(f"{name}: {response.status_code} {response.text[:300]}")
        deadline = time.monotonic() + 120
        while len(bound) < len(names) and time.monotonic() < deadline:
            for name in names:
                if name not in bound:
                    pod = server.get(f"/api/v1/namespaces/ml-training/pods/{name}")
                    if pod["spec"].get("nodeName"):
                        bound[name] = time.monotonic()
            time.sleep(0.05)
        for name in names:
            server.delete(f"/api/v1/namespaces/ml-training/pods/{name}")
    return [(bound[name] - created[name]) * 1000 for name in names if name in bound]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def line(label: str, values: list[float]) -> str:
    return f"{label:34} median {statistics.median(values):9.2f}   min {min(values):9.2f}   max {max(values):9.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--binds", type=int, default=100)
    parser.add_argument("--scheduled", type=int, default=20)
    parser.add_argument("--cache-rounds", type=int, default=None, help="rounds of the cache measurement (0: skip)")
    args = parser.parse_args()
    from e2e.kube import decisions

    ensure_scale(args.nodes, args.pods)
    ensure_bind_nodes()
    cache = args.rounds if args.cache_rounds is None else args.cache_rounds
    runs = cache_rounds(cache) if cache else []
    print(f"cluster state of one worker, {cache} rounds (fresh process each):")
    figures = ("seconds", "nodes", "pods", "traced_mib", "rss_growth_mib", "inventory_mib", "inventory_ms")
    for key in figures if runs else ():
        print(line(key, [run[key] for run in runs]))
    keys = ("bind_p50", "bind_p99", "sched_p50", "sched_p99")
    results: dict[str, dict[str, list[float]]] = {mode: {key: [] for key in keys} for mode in ("without", "with")}
    try:
        for _ in range(args.rounds):
            for mode in ("without", "with"):  # interleaved: each round measures both, in the same conditions
                set_binding_webhook(mode == "with")
                binds = timed_binds(held_pods(args.binds))
                results[mode]["bind_p50"].append(percentile(binds, 0.5))
                results[mode]["bind_p99"].append(percentile(binds, 0.99))
                if args.scheduled:
                    placed = scheduled(args.scheduled)
                    if not placed:
                        raise SystemExit(f"none of {args.scheduled} pods was placed by Volcano within 120 s")
                    results[mode]["sched_p50"].append(percentile(placed, 0.5))
                    results[mode]["sched_p99"].append(percentile(placed, 0.99))
    finally:
        set_binding_webhook(True)
    print("\nbindings through the API server (ms), with vgate's cache holding the pods above:")
    for key in ("bind_p50", "bind_p99", "sched_p50", "sched_p99")[:4 if args.scheduled else 2]:
        for mode in ("without", "with"):
            print(line(f"{key} {mode} the binding webhook", results[mode][key]))
        added = [w - o for w, o in zip(results["with"][key], results["without"][key], strict=False)]
        print(line(f"{key} added (same round)", added))
    judged = [r["latencyMs"] for r in decisions() if r.get("kind") == "v1/Binding" and r.get("latencyMs") is not None]
    if judged:
        print(line("vgate's own latencyMs per binding", judged[-args.rounds * (args.binds + args.scheduled):]))


if __name__ == "__main__":
    main()
