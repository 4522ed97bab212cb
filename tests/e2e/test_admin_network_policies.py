"""sig-network's admin tiers through the real control plane: AdminNetworkPolicies above the
tenants' NetworkPolicies, the BaselineAdminNetworkPolicy below, and address ranges reaching pods.

The e2e cluster serves network-policy-api v0.1.5's CRDs (experimental channel, from its Go module);
vgate watches both kinds with the chart's RBAC. An admin's Allow opens what every NetworkPolicy
closes, an admin's Deny closes what a tenant's policy opens, a Pass hands the traffic to the
tenant's policies, and the baseline decides where no NetworkPolicy selects a pod: each is judged on
the write that changes it, beside a running sensitive pod (issue 33).
"""

# ruff: noqa: F811 - the tenant and running fixtures are test_effective_egress.py's, imported and asked for

from __future__ import annotations

from typing import Any

import pytest
from test_effective_egress import BARE, DNS, NAMESPACE, network_policy, refused, running, tenant, vgate_eval  # noqa: F401 - fixtures
from test_placement import sensitive_pod

from e2e import cluster
from e2e.kube import Kube, decisions_for
from e2e.waiting import eventually

from test_admission import running_on_a_node, unique

VERSION = "policy.networking.k8s.io/v1alpha1"
EVERY_ADDRESS = {"networks": ["0.0.0.0/0", "::/0"]}
EVERY_NAMESPACE: dict[str, Any] = {"namespaces": {}}
TO_DNS = {"pods": {"namespaceSelector": DNS["namespaceSelector"], "podSelector": DNS["podSelector"]}}


def rule(action: str, *to: dict[str, Any]) -> dict[str, Any]:
    return {"action": action, "to": list(to)}


def subject(namespace: str) -> dict[str, Any]:
    return {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}


def admin_policy(name: str, priority: int, namespace: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": VERSION, "kind": "AdminNetworkPolicy", "metadata": {"name": name},
            "spec": {"priority": priority, "subject": subject(namespace), "egress": list(rules)}}


def baseline_policy(namespace: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": VERSION, "kind": "BaselineAdminNetworkPolicy", "metadata": {"name": "default"},
            "spec": {"subject": subject(namespace), "egress": list(rules)}}


def test_an_admins_allow_to_the_internet_beside_a_running_sensitive_pod_is_refused(control_plane: Kube, tenant: Kube,
                                                                                   running: str) -> None:
    name = unique("internet")
    message = refused(control_plane.create(admin_policy(name, 10, NAMESPACE, rule("Allow", EVERY_ADDRESS))))
    assert f"AdminNetworkPolicy {name} would open a way outside the cluster for sensitive pods " \
           f"{NAMESPACE}/{running}: AdminNetworkPolicy {name} egress[0] Allow reaches 0.0.0.0/5 outside" in message
    assert control_plane.get("adminnetworkpolicy", name) is None


def test_an_admins_deny_makes_a_tenants_allow_all_harmless_and_stays_while_it_does(control_plane: Kube,
                                                                                  tenant: Kube, running: str) -> None:
    """Without the admin policy the tenant's allow-all is refused (test_effective_egress.py); with it,
    DNS passed to the tenant's policies and everything else denied, it opens nothing; deleting the
    admin policy under it would, and is refused until the allow-all is gone."""
    confine = admin_policy("e2e-confine", 20, NAMESPACE, rule("Pass", TO_DNS), rule("Deny", EVERY_ADDRESS),
                           rule("Deny", EVERY_NAMESPACE))
    allow_all = network_policy(unique("allow-all"), [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}])
    assert control_plane.create(confine).ok
    try:
        created = tenant.create(allow_all)
        assert created.ok, created.stderr
        message = refused(control_plane.run("delete", "adminnetworkpolicy", "e2e-confine"))
        assert f"sensitive pods {NAMESPACE}/{running}" in message
        assert f"NetworkPolicy {NAMESPACE}/{allow_all['metadata']['name']} egress[0]" in message
        assert tenant.run("delete", "networkpolicy", allow_all["metadata"]["name"], "-n", NAMESPACE).ok
        assert control_plane.run("delete", "adminnetworkpolicy", "e2e-confine").ok
        refused(tenant.create(allow_all))  # the admin's deny gone: refused again, as before it
    finally:
        control_plane.run("delete", "networkpolicy", allow_all["metadata"]["name"], "-n", NAMESPACE)
        control_plane.run("delete", "adminnetworkpolicy", "e2e-confine")


def test_a_pass_hands_the_decision_to_the_tenants_policies(control_plane: Kube, tenant: Kube, running: str) -> None:
    """A Pass above a later admin Deny: the tenant's allow-all decides, so it is refused."""
    passing = admin_policy("e2e-pass", 5, NAMESPACE, rule("Pass", EVERY_ADDRESS), rule("Pass", EVERY_NAMESPACE))
    deny = admin_policy("e2e-deny-after", 50, NAMESPACE, rule("Deny", EVERY_ADDRESS), rule("Deny", EVERY_NAMESPACE))
    assert control_plane.create(passing, deny).ok
    try:
        message = refused(tenant.create(network_policy(unique("allow-all"), [{}])))
        assert f"sensitive pods {NAMESPACE}/{running}" in message and "(no `to`)" in message
    finally:
        control_plane.run("delete", "adminnetworkpolicy", "e2e-pass", "e2e-deny-after")


def test_a_baseline_confines_a_namespace_without_network_policies(control_plane: Kube, tenant: Kube) -> None:
    name = unique("vault")
    refused(tenant.create(sensitive_pod(name, "zone-a"), namespace=BARE, dry_run=True))  # no policy: refused
    banp = baseline_policy(BARE, rule("Allow", TO_DNS), rule("Deny", EVERY_ADDRESS), rule("Deny", EVERY_NAMESPACE))
    assert control_plane.create(banp).ok
    try:
        created = tenant.create(sensitive_pod(name, "zone-a"), namespace=BARE)
        assert created.ok, created.stderr
        [record] = [r for r in decisions_for(BARE, name, "validate") if r["operation"] == "CREATE" and r["allowed"]]
        assert record["egress"]["pods"] == [{"pod": f"{BARE}/{name}", "confined": True, "reasons": [],
                                             "policies": ["BaselineAdminNetworkPolicy default"]}]
        assert running_on_a_node(control_plane, BARE, name)
        done = vgate_eval(sensitive_pod(unique("vault"), "zone-a"), BARE)  # reading the cluster: the same
        assert done.returncode == 0 and "network-egress-confined" not in done.stdout, (done.stdout, done.stderr)
        # a tenant's policy selecting the pod takes it out of the baseline's hands
        message = refused(tenant.create(network_policy(unique("allow-all"), [{}], namespace=BARE)))
        assert f"sensitive pods {BARE}/{name}" in message
        message = refused(control_plane.run("delete", "baselineadminnetworkpolicy", "default"))
        assert f"BaselineAdminNetworkPolicy default would open a way outside the cluster for sensitive pods " \
               f"{BARE}/{name}" in message
    finally:
        control_plane.run("delete", "pod", name, "-n", BARE, "--wait=true", "--grace-period=0", "--force")
        assert eventually(lambda: control_plane.run("delete", "baselineadminnetworkpolicy", "default").ok,
                          timeout=30), "the baseline's delete still refused once the sensitive pod is gone"


@pytest.mark.parametrize("cidr, admitted", [(cluster.POD_CIDR, False), ("127.16.5.0/24", False),
                                            ("10.0.0.0/8", True)], ids=["pod-network", "part-of-it", "internal"])
def test_an_address_range_reaching_the_pod_network_reaches_every_pod(tenant: Kube, running: str, cidr: str,
                                                                     admitted: bool) -> None:
    """The pod network is inside (internalCIDRs), but a pod no policy confines has an address in it:
    an ipBlock covering it is a relay, whichever pod gets which address."""
    web = sensitive_pod(unique("web"), "zone-a")
    web["metadata"]["labels"] = {"app": "web"}  # an ordinary pod: its egress is not restricted
    assert tenant.create(web, namespace=NAMESPACE).ok
    result = tenant.create(network_policy(unique("range"), [{"to": [{"ipBlock": {"cidr": cidr}}]}],
                                          {"vgate.io/egress": "deny"}))
    if admitted:
        assert result.ok, result.stderr
        return
    message = refused(result)
    assert f"(ipBlock {cidr}, the pod network) reaches pod {NAMESPACE}/" in message, message
