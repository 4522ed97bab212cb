"""Effective egress (webhook/core/egress.py) as Kubernetes' NetworkPolicy defines it: each case is
a shape a tenant who can write pods and NetworkPolicies in its own namespace would try."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.egress import AllowedPeer, Cluster, egress_of, internal_networks

INTERNAL = internal_networks(["10.0.0.0/8", "fd00::/8"])
DNS = AllowedPeer("kube-system", {"matchLabels": {"k8s-app": "kube-dns"}})
NAMESPACES = {"ml-training": {"kubernetes.io/metadata.name": "ml-training", "tier": "research"},
              "web": {"kubernetes.io/metadata.name": "web"},
              "kube-system": {"kubernetes.io/metadata.name": "kube-system"}}


def pod(name: str, namespace: str = "ml-training", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels}}


SENSITIVE = pod("train-0", app="train")
DNS_POD = pod("coredns-1", "kube-system", **{"k8s-app": "kube-dns"})


def policy(name: str, egress: list[dict[str, Any]] | None, namespace: str = "ml-training",
           selector: dict[str, Any] | None = None, types: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": selector if selector is not None else {}}
    if types is not None:
        spec["policyTypes"] = types
    if egress is not None:
        spec["egress"] = egress
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


DENY = policy("deny-egress", None, types=["Egress"])
TO_DNS = policy("dns", [{"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                                 "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                         "ports": [{"protocol": "UDP", "port": 53}]}], types=["Egress"])


def judged(*policies: dict[str, Any], pods: tuple[dict[str, Any], ...] = (), target: dict[str, Any] = SENSITIVE):
    cluster = Cluster(list(policies), NAMESPACES, [SENSITIVE, DNS_POD, *pods], INTERNAL, (DNS,))
    return egress_of(target, cluster)


def test_no_policy_selecting_the_pod_means_everything_is_reachable():
    verdict = judged()
    assert not verdict.confined and "no NetworkPolicy selects pod ml-training/train-0 for egress" in verdict.reasons[0]


def test_a_policy_for_ingress_only_does_not_restrict_egress():
    assert not judged(policy("ingress", None, types=["Ingress"])).confined
    # policyTypes not given: Ingress, and Egress only when it has an egress section
    assert not judged(policy("implicit", None)).confined
    assert judged(policy("implicit-egress", [])).confined


def test_deny_all_and_dns_only_are_confined_and_name_their_policies():
    verdict = judged(DENY, TO_DNS)
    assert verdict.confined and verdict.policies == ("ml-training/deny-egress", "ml-training/dns")


def test_policies_add_up_an_allow_all_beside_a_deny_opens_egress():
    """The issue's bypass: podSelector {}, policyTypes [Egress], to 0.0.0.0/0, beside a deny policy."""
    verdict = judged(DENY, policy("open", [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}], types=["Egress"]))
    assert not verdict.confined
    assert "NetworkPolicy ml-training/open egress[0] allows 0.0.0.0/0" in verdict.reasons[0]


@pytest.mark.parametrize("peer", [
    {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}},
    {"ipBlock": {"cidr": "::/0"}},
    {"ipBlock": {"cidr": "10.0.0.0/7"}},  # one bit wider than the internal range
    {"ipBlock": {"cidr": "fc00::/7", "except": ["fd00::/8"]}},
], ids=["all-but-internal", "ipv6-all", "wider-than-internal", "ipv6-except-internal"])
def test_address_blocks_beyond_the_internal_ranges_are_outside(peer):
    assert not judged(DENY, policy("block", [{"to": [peer]}], types=["Egress"])).confined


@pytest.mark.parametrize("peer", [
    {"ipBlock": {"cidr": "10.1.0.0/16"}},
    {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.9.0.0/16"]}},
    {"ipBlock": {"cidr": "fd12::/16"}},
    {"ipBlock": {"cidr": "11.0.0.0/8", "except": ["11.0.0.0/8"]}},  # everything excepted: nothing
], ids=["internal", "internal-less-some", "ipv6-internal", "all-excepted"])
def test_address_blocks_inside_the_internal_ranges_are_confined(peer):
    assert judged(DENY, policy("block", [{"to": [peer]}], types=["Egress"])).confined


def test_an_empty_to_or_a_rule_with_ports_only_reaches_everything():
    assert not judged(policy("ports", [{"ports": [{"port": 443}]}], types=["Egress"])).confined
    assert not judged(policy("empty-to", [{"to": []}], types=["Egress"])).confined


def test_a_relay_pod_that_reaches_outside_unconfines_whoever_reaches_it():
    relay = pod("relay", app="relay")
    to_relay = policy("to-relay", [{"to": [{"podSelector": {"matchLabels": {"app": "relay"}}}]}],
                      selector={"matchLabels": {"app": "train"}}, types=["Egress"])
    verdict = judged(to_relay, pods=(relay,))
    assert not verdict.confined and verdict.reasons == (
        "NetworkPolicy ml-training/to-relay egress[0] reaches pod ml-training/relay, whose egress leads outside: "
        "no NetworkPolicy selects pod ml-training/relay for egress: it may reach any address",)
    relay_out = policy("relay-out", [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}],
                       selector={"matchLabels": {"app": "relay"}}, types=["Egress"])
    assert judged(to_relay, relay_out, pods=(relay,)).confined  # the relay itself stays inside


def test_pods_reaching_each_other_in_a_cycle_stay_inside():
    peer = pod("peer", app="peer")
    there = policy("there", [{"to": [{"podSelector": {"matchLabels": {"app": "peer"}}}]}],
                   selector={"matchLabels": {"app": "train"}}, types=["Egress"])
    back = policy("back", [{"to": [{"podSelector": {"matchLabels": {"app": "train"}}}]}],
                  selector={"matchLabels": {"app": "peer"}}, types=["Egress"])
    assert judged(there, back, pods=(peer,)).confined


def test_a_namespace_selector_reaches_every_pod_of_the_namespaces_it_selects():
    outsider = pod("web-1", "web", app="web")
    anywhere = policy("any-namespace", [{"to": [{"namespaceSelector": {}}]}], types=["Egress"])
    verdict = judged(DENY, anywhere, pods=(outsider,))
    assert not verdict.confined and any("web/web-1" in reason for reason in verdict.reasons)
    # namespaceSelector and podSelector in one peer: pods both select (kube-dns alone, allowed)
    assert judged(TO_DNS, pods=(outsider,)).confined


def test_a_pod_selector_alone_selects_pods_of_the_policys_own_namespace_only():
    elsewhere = pod("twin", "web", app="relay")
    to_relay = policy("to-relay", [{"to": [{"podSelector": {"matchLabels": {"app": "relay"}}}]}], types=["Egress"])
    assert judged(to_relay, pods=(elsewhere,)).confined  # no such pod in ml-training: nothing reachable


def test_a_policy_of_another_namespace_never_selects_the_pod():
    assert not judged(policy("web-deny", None, namespace="web", types=["Egress"])).confined


def test_match_expressions_select_as_kubernetes_does():
    selector = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["train", "infer"]}]}
    assert judged(policy("deny-expr", None, selector=selector, types=["Egress"])).confined
    other = {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["train"]}]}
    assert not judged(policy("deny-others", None, selector=other, types=["Egress"])).confined


@pytest.mark.parametrize("seed", range(40))
def test_every_classs_verdict_at_once_is_the_search_from_it(seed):
    """Cluster.confined (one pass over the rule sets, what judging a write uses for every sensitive pod)
    gives each class egress_of's verdict (the search from that class), on random namespaces of pods and
    policies with pod, namespace and ipBlock peers: the two ways of computing it cannot drift apart."""
    import random
    chance = random.Random(seed)
    apps = ["a", "b", "c", "d"]
    pods = [pod(f"p{i}", chance.choice(["ml-training", "web"]), app=chance.choice(apps),
                **({"egress": "deny"} if chance.random() < 0.5 else {})) for i in range(12)]
    policies = []
    for index in range(chance.randint(0, 6)):
        peers: list[dict[str, Any]] = []
        for _ in range(chance.randint(0, 2)):
            peers.append(chance.choice([
                {"podSelector": {"matchLabels": {"app": chance.choice(apps)}}},
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "web"}}},
                {"ipBlock": {"cidr": chance.choice(["10.1.0.0/16", "0.0.0.0/0"])}}]))
        selector = chance.choice([{}, {"matchLabels": {"egress": "deny"}},
                                  {"matchLabels": {"app": chance.choice(apps)}}])
        policies.append(policy(f"pol{index}", [{"to": peers}] if peers else None,
                               chance.choice(["ml-training", "web"]), selector, ["Egress"]))
    cluster = Cluster(policies, NAMESPACES, pods, INTERNAL, (DNS,))
    unheld = [pod("new", "ml-training", app=app, egress="deny", fresh="1") for app in apps]  # a class no pod has
    for each in [*unheld, *pods]:
        pod_class = (each["metadata"]["namespace"], frozenset(each["metadata"]["labels"].items()))
        assert cluster.confined(pod_class) == egress_of(each, cluster).confined, (seed, each)
