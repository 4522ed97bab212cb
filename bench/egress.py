"""What computing a sensitive pod's effective egress costs in a crowded namespace (issue 33).

A tenant chooses how many NetworkPolicies and pods its namespace holds; judging one pod must stay
well inside the webhook's timeout however many there are. Times ``egress_of`` (the pure core, in
process, CPU time) for one sensitive pod in a namespace of --policies NetworkPolicies and --pods
pods, against the same pod in a namespace of one deny-all policy (the baseline, same run), in
interleaved rounds. The policies are the tenant's worst case: every one selects every pod for egress
(``podSelector: {}``) and allows a podSelector peer matching a tenth of the pods, each of which is
then judged in turn (relays), and one ipBlock inside the internal ranges. With --admin N, N
AdminNetworkPolicies select every pod too (an Allow of a tenth of the pods, a Pass of an internal
range, a Deny of another), above them (the admin tiers computed over regions of destinations).

    python bench/egress.py --policies 1000 --pods 10000 --rounds 5 [--admin 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webhook.core.egress import AllowedPeer, Cluster, egress_of, internal_networks

NAMESPACE = "ml-training"


def admin_policies(count: int) -> list[dict[str, Any]]:
    """Admin policies selecting every pod, each with an Allow of pods, a Pass and a Deny of a range."""
    return [{"metadata": {"name": f"admin-{i}"}, "spec": {"priority": i % 1000, "subject": {"namespaces": {}},
                                                         "egress": [
        {"action": "Allow", "to": [{"pods": {"namespaceSelector": {}, "podSelector": {
            "matchLabels": {"app": f"app-{i % 10}"}}}}]},
        {"action": "Pass", "to": [{"networks": [f"10.{i % 250}.0.0/16"]}]},
        {"action": "Deny", "to": [{"networks": [f"192.{i % 250}.0.0/16"]}]}]}} for i in range(count)]


def crowded(policies: int, pods: int, distinct: bool = False, admin: int = 0) -> tuple[Cluster, dict[str, Any]]:
    made = [{"metadata": {"name": f"pod-{i}", "namespace": NAMESPACE,
                          "labels": {"app": f"app-{i % 10}", **({"pod": str(i)} if distinct else {})}}}
            for i in range(pods)]
    rules = [{"metadata": {"name": f"policy-{i}", "namespace": NAMESPACE},
              "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [
                  {"to": [{"podSelector": {"matchLabels": {"app": f"app-{i % 10}"}}}]},
                  {"to": [{"ipBlock": {"cidr": f"10.{i % 250}.0.0/16"}}], "ports": [{"port": 443}]}]}}
             for i in range(policies)]
    cluster = Cluster(rules, {NAMESPACE: {"kubernetes.io/metadata.name": NAMESPACE}}, made,
                      internal_networks(["10.0.0.0/8"]), (AllowedPeer("kube-system", {}),), admin_policies(admin),
                      (), internal_networks(["10.244.0.0/16"]))
    return cluster, made[0]


def cpu_ms(build: Any) -> tuple[float, float, bool]:
    """CPU ms of a first judgement on a fresh cluster (indexing included: after every change of the
    cluster state) and of a second one on the same cluster (its caches warm)."""
    started = time.process_time()
    cluster, pod = build()
    verdict = egress_of(pod, cluster)
    cold = time.process_time()
    egress_of({"metadata": {**pod["metadata"], "name": "another"}}, cluster)
    return (cold - started) * 1000, (time.process_time() - cold) * 1000, verdict.confined


def crowd_parser(description: str | None) -> argparse.ArgumentParser:
    """The options of the egress benches (this one and egress_writes.py): how crowded the namespace
    is, how its pods are labelled, how many interleaved rounds."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--distinct-labels", action="store_true",
                        help="every pod its own label set (the tenant's worst case for the class index)")
    parser.add_argument("--admin", type=int, default=0, help="AdminNetworkPolicies selecting every pod")
    return parser


def main() -> None:
    args = crowd_parser(__doc__).parse_args()

    def lone() -> tuple[Cluster, dict[str, Any]]:
        pod = {"metadata": {"name": "pod-0", "namespace": NAMESPACE, "labels": {"app": "app-0"}}}
        return Cluster([{"metadata": {"name": "deny", "namespace": NAMESPACE}, "spec": {
            "podSelector": {}, "policyTypes": ["Egress"]}}], {NAMESPACE: {}}, [pod]), pod

    times: dict[str, list[tuple[float, float]]] = {"baseline": [], "crowded": []}
    confined = True
    for _ in range(args.rounds):  # interleaved: drift in the machine's speed hits both alike
        times["baseline"].append(cpu_ms(lone)[:2])
        cold, warm, confined = cpu_ms(lambda: crowded(args.policies, args.pods, args.distinct_labels, args.admin))
        times["crowded"].append((cold, warm))
    labels = " with distinct labels" if args.distinct_labels else ""
    admin = f", {args.admin} AdminNetworkPolicies" if args.admin else ""
    print(f"{args.policies} NetworkPolicies{admin}, {args.pods} pods{labels}, {args.rounds} interleaved rounds "
          f"(CPU ms, medians; each round in brackets); confined: {confined}")
    for case in ("baseline", "crowded"):
        for index, what in ((0, "fresh cluster"), (1, "warm caches")):
            runs = [run[index] for run in times[case]]
            base = statistics.median(run[index] for run in times["baseline"])
            print(f"{case:8s} {what}: {statistics.median(runs):9.3f} ms ({'/'.join(f'{t:.3f}' for t in runs)}), "
                  f"{statistics.median(runs) / base:.0f}x the baseline's")


if __name__ == "__main__":
    main()
