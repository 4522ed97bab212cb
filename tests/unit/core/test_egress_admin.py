"""Effective egress with sig-network's admin tiers (webhook/core/egress.py): AdminNetworkPolicies
above NetworkPolicies, the BaselineAdminNetworkPolicy below, as network-policy-api v0.1.5's
``apis/v1alpha1`` defines them; and address ranges that reach pods. Each case is a shape an admin
could write, or a tenant could add beside it."""

from __future__ import annotations

import random
from typing import Any

import pytest

from webhook.core.egress import AllowedPeer, Cluster, egress_of, internal_networks

INTERNAL = internal_networks(["10.0.0.0/8", "fd00::/8"])
POD_NETWORK = internal_networks(["10.244.0.0/16"])
DNS = AllowedPeer("kube-system", {"matchLabels": {"k8s-app": "kube-dns"}})
NAMESPACES = {"ml-training": {"kubernetes.io/metadata.name": "ml-training", "tier": "sensitive"},
              "web": {"kubernetes.io/metadata.name": "web"},
              "kube-system": {"kubernetes.io/metadata.name": "kube-system"}}
EVERY_ADDRESS = ["0.0.0.0/0", "::/0"]
BESIDE_THE_POD_NETWORK = ["0.0.0.0/5", "8.0.0.0/7", "11.0.0.0/8", "12.0.0.0/6", "16.0.0.0/4", "32.0.0.0/3",
                          "64.0.0.0/2", "128.0.0.0/1", "::/0"]  # every address but 10.0.0.0/8


def pod(name: str, namespace: str = "ml-training", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels}}


SENSITIVE = pod("train-0", app="train")
DNS_POD = pod("coredns-1", "kube-system", **{"k8s-app": "kube-dns"})
WEB = pod("web-1", "web", app="web")  # an ordinary pod no policy confines: a relay


def admin(name: str, priority: int, *rules: dict[str, Any], subject: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
            "metadata": {"name": name},
            "spec": {"priority": priority, "egress": list(rules),
                     "subject": subject or {"namespaces": {"matchLabels": {"tier": "sensitive"}}}}}


def baseline(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "BaselineAdminNetworkPolicy",
            "metadata": {"name": "default"},
            "spec": {"egress": list(rules), "subject": {"namespaces": {"matchLabels": {"tier": "sensitive"}}}}}


def rule(action: str, *to: dict[str, Any], name: str = "", ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"action": action, "to": list(to)}
    if name:
        found["name"] = name
    if ports:
        found["ports"] = ports
    return found


def networks(*cidrs: str) -> dict[str, Any]:
    return {"networks": list(cidrs)}


TO_DNS = {"pods": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                   "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}}
EVERY_NAMESPACE = {"namespaces": {}}


def network_policy(name: str, egress: list[dict[str, Any]], namespace: str = "ml-training") -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name,
                                                                                         "namespace": namespace},
            "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": egress}}


DENY = network_policy("deny-egress", [])
ALLOW_ALL = network_policy("allow-all", [{}])


def judged(*policies: dict[str, Any], pods: tuple[dict[str, Any], ...] = (WEB,), pod_networks: Any = None):
    kinds = {kind: [p for p in policies if p["kind"] == kind]
             for kind in ("NetworkPolicy", "AdminNetworkPolicy", "BaselineAdminNetworkPolicy")}
    cluster = Cluster(kinds["NetworkPolicy"], NAMESPACES, [SENSITIVE, DNS_POD, *pods], INTERNAL, (DNS,),
                      kinds["AdminNetworkPolicy"], kinds["BaselineAdminNetworkPolicy"], pod_networks)
    verdict = egress_of(SENSITIVE, cluster)
    assert cluster.confined(("ml-training", frozenset(SENSITIVE["metadata"]["labels"].items()))) == verdict.confined
    return verdict


def test_an_admin_allow_opens_a_way_out_that_no_network_policy_can_close():
    verdict = judged(DENY, admin("internet", 10, rule("Allow", networks("0.0.0.0/0"), name="egress-all")))
    assert not verdict.confined and verdict.reasons[0].startswith(
        "AdminNetworkPolicy internet egress[0] (egress-all) Allow reaches 0.0.0.0/5 outside the internal ranges")
    assert "AdminNetworkPolicy internet" in verdict.policies and "ml-training/deny-egress" in verdict.policies


def test_an_admin_deny_of_every_address_and_namespace_confines_whatever_tenants_allow():
    deny_all = admin("confine", 10, rule("Allow", TO_DNS), rule("Deny", networks(*EVERY_ADDRESS)),
                     rule("Deny", EVERY_NAMESPACE))
    assert judged(ALLOW_ALL, deny_all).confined
    assert judged(deny_all).confined  # no NetworkPolicy at all: the admin's rules decide everything


def test_denying_addresses_denies_pods_only_where_it_covers_the_whole_pod_network():
    deny_addresses = admin("no-internet", 10, rule("Deny", networks(*EVERY_ADDRESS)))
    # 0.0.0.0/0 and ::/0 cover every pod's address: the pod network configured, or (not configured)
    # the internal ranges, where pods may be
    assert judged(ALLOW_ALL, deny_addresses, pod_networks=POD_NETWORK).confined
    assert judged(ALLOW_ALL, deny_addresses).confined
    # a range beside the pod network denies no pod: the tenant's allow-all still reaches the relay
    beside = admin("no-internet", 10, rule("Deny", networks(*BESIDE_THE_POD_NETWORK)))
    verdict = judged(ALLOW_ALL, beside, pod_networks=POD_NETWORK)
    assert not verdict.confined and "reaches pod web/web-1" in verdict.reasons[0]


def test_priority_decides_between_admin_policies_lower_first():
    deny = admin("deny", 10, rule("Deny", networks(*EVERY_ADDRESS)), rule("Deny", EVERY_NAMESPACE))
    allow = admin("allow", 20, rule("Allow", networks("0.0.0.0/0")))
    assert judged(deny, allow).confined
    later_deny = admin("deny", 30, rule("Deny", networks(*EVERY_ADDRESS)), rule("Deny", EVERY_NAMESPACE))
    verdict = judged(later_deny, allow)
    assert not verdict.confined and verdict.reasons[0].startswith("AdminNetworkPolicy allow egress[0] Allow")


def test_within_one_policy_the_first_rule_written_decides():
    assert not judged(admin("order", 10, rule("Allow", networks("8.8.8.0/24")),
                            rule("Deny", networks(*EVERY_ADDRESS)), rule("Deny", EVERY_NAMESPACE))).confined
    assert judged(admin("order", 10, rule("Deny", networks(*EVERY_ADDRESS)),
                        rule("Allow", networks("8.8.8.0/24")), rule("Deny", EVERY_NAMESPACE))).confined


def test_pass_hands_the_traffic_to_the_network_policies():
    passing = admin("delegate", 10, rule("Pass", networks(*EVERY_ADDRESS)), rule("Pass", EVERY_NAMESPACE))
    deny_after = admin("deny-after", 20, rule("Deny", networks(*EVERY_ADDRESS)), rule("Deny", EVERY_NAMESPACE))
    assert judged(DENY, passing, deny_after).confined  # the tenant's deny decides: nothing reachable
    verdict = judged(ALLOW_ALL, passing, deny_after)  # the later admin deny is skipped
    assert not verdict.confined and "NetworkPolicy ml-training/allow-all egress[0] (no `to`)" in verdict.reasons[0]


def test_ports_narrow_a_deny_so_it_removes_nothing():
    https_only = admin("no-https", 10, rule("Deny", networks(*EVERY_ADDRESS), ports=[
        {"portNumber": {"protocol": "TCP", "port": 443}}]), rule("Deny", EVERY_NAMESPACE))
    verdict = judged(https_only)
    assert not verdict.confined and "no NetworkPolicy of ml-training selects these pods" in verdict.reasons[0]


def test_an_admin_allow_to_an_unconfined_pod_is_a_relay():
    verdict = judged(DENY, admin("to-web", 10, rule("Allow", {"pods": {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "web"}}, "podSelector": {}}})))
    assert not verdict.confined and verdict.reasons[0].startswith(
        "AdminNetworkPolicy to-web egress[0] Allow reaches pod web/web-1, whose egress leads outside")


def test_the_baseline_decides_only_where_no_network_policy_selects_the_pod():
    closed = baseline(rule("Allow", TO_DNS), rule("Deny", networks(*EVERY_ADDRESS)), rule("Deny", EVERY_NAMESPACE))
    assert judged(closed).confined
    verdict = judged(ALLOW_ALL, closed)  # a NetworkPolicy selects it: the baseline is never consulted
    assert not verdict.confined and "allow-all" in verdict.reasons[0]
    assert judged(baseline(rule("Deny", networks(*EVERY_ADDRESS)))).confined  # every address: every pod too
    half = baseline(rule("Deny", networks(*BESIDE_THE_POD_NETWORK)))  # every address outside, no pod
    verdict = judged(half, pod_networks=POD_NETWORK)
    assert not verdict.confined and "what is left reaches pod web/web-1" in verdict.reasons[0]


def test_the_baseline_allows_what_it_allows_first():
    verdict = judged(baseline(rule("Allow", networks("1.1.1.1/32")), rule("Deny", networks(*EVERY_ADDRESS)),
                              rule("Deny", EVERY_NAMESPACE)))
    assert not verdict.confined and verdict.reasons[0].startswith(
        "BaselineAdminNetworkPolicy default egress[0] Allow reaches 1.1.1.1/32 outside")


def test_node_peers_are_inside():
    assert judged(admin("nodes", 10, rule("Allow", {"nodes": {}}), rule("Deny", networks(*EVERY_ADDRESS)),
                        rule("Deny", EVERY_NAMESPACE))).confined


def test_a_subject_elsewhere_changes_nothing():
    other = admin("web-only", 10, rule("Allow", networks("0.0.0.0/0")),
                  subject={"pods": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "web"}},
                                    "podSelector": {}}})
    assert judged(DENY, other, pods=()).confined


@pytest.mark.parametrize("block, confined", [
    ({"cidr": "10.0.0.0/8"}, False),  # covers the pod network: reaches every pod, the relay among them
    ({"cidr": "10.0.0.0/8", "except": ["10.244.0.0/16"]}, True),
    ({"cidr": "10.1.0.0/16"}, True),
])
def test_an_address_range_covering_the_pod_network_reaches_every_pod(block, confined):
    verdict = judged(network_policy("internal", [{"to": [{"ipBlock": block}]}]), pod_networks=POD_NETWORK)
    assert verdict.confined is confined
    if not confined:
        assert "(ipBlock 10.0.0.0/8, the pod network) reaches pod web/web-1" in verdict.reasons[0]


def test_without_a_pod_network_every_internal_range_may_hold_pods():
    assert not judged(network_policy("internal", [{"to": [{"ipBlock": {"cidr": "10.1.0.0/16"}}]}])).confined


@pytest.mark.parametrize("seed", range(40))
def test_every_classs_verdict_at_once_is_the_search_from_it_with_admin_tiers(seed):
    """As test_egress.py's property, with random admin and baseline policies beside the NetworkPolicies."""
    chance = random.Random(seed)
    apps = ["a", "b", "c"]
    pods = [pod(f"p{i}", chance.choice(["ml-training", "web"]), app=chance.choice(apps)) for i in range(10)]
    peers = [networks("0.0.0.0/0"), networks("10.1.0.0/16"), networks(*EVERY_ADDRESS), EVERY_NAMESPACE,
             {"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "a"}}}}, TO_DNS]
    subjects = [{"namespaces": {}}, {"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "b"}}}}]

    def rules(actions: list[str]) -> list[dict[str, Any]]:
        return [rule(chance.choice(actions), chance.choice(peers)) for _ in range(chance.randint(1, 3))]
    admins = [admin(f"anp{i}", chance.randint(0, 3), *rules(["Allow", "Deny", "Pass"]),
                    subject=chance.choice(subjects)) for i in range(chance.randint(0, 3))]
    baselines = [{**baseline(*rules(["Allow", "Deny"])), "spec": {"egress": rules(["Allow", "Deny"]),
                                                                   "subject": chance.choice(subjects)}}] \
        if chance.random() < 0.5 else []
    policies = [network_policy(f"np{i}", [{"to": [{"podSelector": {"matchLabels": {"app": chance.choice(apps)}}}]}],
                               chance.choice(["ml-training", "web"])) for i in range(chance.randint(0, 2))]
    cluster = Cluster(policies, NAMESPACES, pods, INTERNAL, (DNS,), admins, baselines,
                      chance.choice([None, POD_NETWORK]))
    for each in pods:
        pod_class = (each["metadata"]["namespace"], frozenset(each["metadata"]["labels"].items()))
        assert cluster.confined(pod_class) == egress_of(each, cluster).confined, (seed, each)
