"""What judging one write costs in a crowded namespace, end to end through egress_facts (issue 33).

``bench/egress.py`` times the pure reachability search; this times what the gateway adds to a
request (``core.egress_judge.egress_facts``): the cluster state indexed (once per change of the
state), the cluster as it would be after the write rebuilt, and every admitted sensitive pod class
searched before and after. In a namespace of --policies NetworkPolicies (each selecting every pod
and allowing a podSelector peer, the tenant's worst case: bench/egress.py) and --pods pods, a tenth
of them sensitive, in interleaved rounds, CPU ms per write:

- baseline: an ordinary pod labelled as pods already running are (nothing to rebuild: the common case)
- sensitive pod: a new sensitive pod, its own egress searched
- new pod class: a pod with labels no pod has yet (the cluster after it rebuilt, every sensitive class
  searched again)
- NetworkPolicy: a new policy (the same)
- AdminNetworkPolicy (with --admin N, N of them selecting every pod, bench/egress.py): a new one

The state index is built once before the rounds (the server rebuilds it once per change of its
watched kinds, not per request); each case is then timed as the gateway runs it.

With --validate, what it adds to the whole of /validate's decision for an ordinary pod (validate()
with the shipped policies and the real engine), against the same request judged without a cluster
view (the baseline), interleaved: the request path's share.

    python bench/egress_writes.py --policies 1000 --pods 10000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
from egress import admin_policies, crowd_parser  # bench/egress.py, beside this file

from webhook.core.admission import AdmissionRequest, decode_review
from webhook.core.egress import NetworkObjects
from webhook.core.egress_judge import egress_facts
from webhook.files.config_file import load_config
from webhook.offline.admit import review_for

NAMESPACE = "ml-training"
SENSITIVE = {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}


def pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "registry.example.com/app:1"}]}}


def crowded(policies: int, pods: int, distinct: bool, admin: int = 0) -> NetworkObjects:
    made = [pod(f"pod-{i}", {"app": f"app-{i % 10}", **(SENSITIVE if i % 10 == 0 else {}),
                             **({"pod": str(i)} if distinct else {})}) for i in range(pods)]
    rules = [{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": f"policy-{i}", "namespace": NAMESPACE},
              "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [
                  {"to": [{"podSelector": {"matchLabels": {"app": f"app-{i % 10}"}}}]},
                  {"to": [{"ipBlock": {"cidr": f"10.{i % 250}.0.0/16"}}], "ports": [{"port": 443}]}]}}
             for i in range(policies)]
    admins = [{"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy", **found}
              for found in admin_policies(admin)]
    return NetworkObjects((1,), rules, {NAMESPACE: {"kubernetes.io/metadata.name": NAMESPACE}}, made, [], admins)


def request(obj: dict[str, Any]) -> AdmissionRequest:
    review = review_for(obj, namespace=NAMESPACE)
    return decode_review(orjson.dumps(review), 64)


def refused(facts: Any) -> bool:
    """Whether the rule would refuse on these facts: a pod not confined, a pod un-confined, one exposed."""
    facts = facts or {}
    return bool(facts.get("unconfines") or facts.get("exposes")
                or any(not found["confined"] for found in facts.get("pods", [])))


def cpu_ms(run: Callable[[], object]) -> float:
    started = time.process_time()
    run()
    return (time.process_time() - started) * 1000


def main() -> None:
    parser = crowd_parser(__doc__)
    parser.add_argument("--validate", action="store_true", help="time the whole of validate() for an ordinary pod")
    args = parser.parse_args()
    if args.validate:
        return validate_share(args)
    config = load_config()
    # internal ranges as a platform configures them: the policies' 10.x blocks are inside, one of
    # them (10.244.0.0/16) the pod network
    placement = config.placement.__class__(**{**config.placement.__dict__, "egress": config.placement.egress.__class__(
        ("10.0.0.0/8",), config.placement.egress.allowed_peers, ("10.244.0.0/16",))})
    network = crowded(args.policies, args.pods, args.distinct_labels, args.admin)
    index_started = time.process_time()
    egress_facts(request(pod("warm", SENSITIVE)), [pod("warm", SENSITIVE)], network, placement)
    index_ms = (time.process_time() - index_started) * 1000
    cases: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
        "baseline": (pod("same", dict(network.pods[3]["metadata"]["labels"])), []),
        "sensitive pod": (pod("vault", SENSITIVE), [pod("vault", SENSITIVE)]),
        "new pod class": (pod("fresh", {"app": "fresh"}), []),
        "NetworkPolicy": ({**network.policies[0], "metadata": {"name": "another", "namespace": NAMESPACE}}, []),
    }
    if network.admin:
        cases["AdminNetworkPolicy"] = ({**network.admin[0], "metadata": {"name": "another"}}, [])
    requests = {name: (request(obj), judged or [obj]) for name, (obj, judged) in cases.items()}
    times: dict[str, list[float]] = {name: [] for name in cases}
    found: dict[str, object] = {}
    def judge(name: str) -> None:
        req, judged = requests[name]
        found[name] = egress_facts(req, judged, network, placement)

    for _ in range(args.rounds):  # interleaved: drift in the machine's speed hits every case alike
        for name in requests:
            times[name].append(cpu_ms(lambda: judge(name)))  # noqa: B023 - called at once, in this iteration
    base = statistics.median(times["baseline"])
    labels = ", each its own labels" if args.distinct_labels else ""
    admin = f", {args.admin} AdminNetworkPolicies" if args.admin else ""
    print(f"{args.policies} NetworkPolicies{admin}, {args.pods} pods ({args.pods // 10} sensitive{labels}), "
          f"{args.rounds} interleaved rounds, CPU ms per write (median, each round in brackets); the state "
          f"indexed once: {index_ms:.1f} ms")
    for name, runs in times.items():
        ratio = statistics.median(runs) / base if base else float("inf")
        print(f"{name:18s} {statistics.median(runs):9.3f} ms ({'/'.join(f'{t:.3f}' for t in runs)}), "
              f"{ratio:.0f}x the baseline's; refused: {refused(found[name])}")


def validate_share(args: argparse.Namespace) -> None:
    """CPU per validate() of an ordinary pod labelled like pods already running, with the crowded
    namespace as its cluster view and without one, interleaved, 200 requests a round."""
    from datetime import datetime, timezone

    from webhook.core.kind_handler import KindContext
    from webhook.core.validation import validate
    from webhook.policy.regorus_engine import RegorusEngine
    from webhook.policy.sources import load_policy_set

    config = load_config()
    engine = RegorusEngine(load_policy_set(Path(__file__).resolve().parent.parent / "policies"), config.document)
    network = crowded(args.policies, args.pods, False)
    req = request(pod("same", dict(network.pods[3]["metadata"]["labels"])))
    now = datetime.now(timezone.utc)
    contexts = {"no cluster view": KindContext(), "crowded view": KindContext(network=network)}
    validate(req, engine, config, (), now, contexts["crowded view"])  # the index, built once
    times: dict[str, list[float]] = {name: [] for name in contexts}
    for _ in range(args.rounds):
        for name, context in contexts.items():
            started = time.process_time()
            for _ in range(200):
                validate(req, engine, config, (), now, context)
            times[name].append((time.process_time() - started) / 200 * 1e6)
    base = statistics.median(times["no cluster view"])
    print(f"validate() of an ordinary pod, {args.policies} NetworkPolicies and {args.pods} pods in its view, "
          f"{args.rounds} interleaved rounds of 200, CPU us per request (median, each round in brackets)")
    for name, runs in times.items():
        print(f"{name:16s} {statistics.median(runs):8.1f} us ({'/'.join(f'{t:.0f}' for t in runs)}), "
              f"{statistics.median(runs) / base:.3f}x the baseline's")


if __name__ == "__main__":
    main()
