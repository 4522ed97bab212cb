"""A node's placement facts through the real control plane, with NodeRestriction on as kubeadm runs
it: the node's own identity (``system:node:<name>``, group ``system:nodes``, a client certificate of
the cluster's CA, authorized by the Node authorizer) may set topology.kubernetes.io/zone on its Node,
and vgate refuses it (issue 33: one compromised kubelet could move itself into another datacenter's
zone); an admin's same change is allowed and recorded; the node's other labels never reach vgate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_placement import sensitive_pod

from e2e import cluster
from e2e.kube import Kube, decisions

from test_admission import TRAINING, running_on_a_node, unique

NODE = "zone-b-sev-1"
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def as_node(control_plane: Kube) -> Iterator[Kube]:
    """The node's own identity; the node's zone label restored by the admin afterwards."""
    yield Kube(cluster.identity_kubeconfig(f"node-{NODE}", f"system:node:{NODE}", ("system:nodes",)))
    assert control_plane.run("label", "node", NODE, f"{ZONE}=zone-b", "--overwrite").ok


def node_records() -> list[dict]:
    return [r for r in decisions() if r.get("kind") == "v1/Node" and r.get("name") == NODE]


def test_a_node_moving_itself_into_another_zone_is_refused(control_plane: Kube, as_node: Kube) -> None:
    before = len(node_records())
    refused = as_node.run("label", "node", NODE, f"{ZONE}=zone-a", "--overwrite")
    assert not refused.ok and "[node-facts-admin-only]" in refused.stderr, refused.stderr
    assert "system:node:zone-b-sev-1 may not change the node's own topology.kubernetes.io/zone label" in refused.stderr
    assert ((control_plane.get("node", NODE) or {})["metadata"]["labels"])[ZONE] == "zone-b"
    [record] = node_records()[before:]
    assert (record["user"], record["allowed"], record["operation"]) == (f"system:node:{NODE}", False, "UPDATE")


def test_a_nodes_other_labels_never_reach_vgate_and_another_node_is_not_its_own(control_plane: Kube,
                                                                                as_node: Kube) -> None:
    before = len(node_records())
    assert as_node.run("label", "node", NODE, "vgate.io/probe=1", "--overwrite").ok  # matchConditions: not sent
    assert as_node.run("label", "node", NODE, "vgate.io/probe-").ok
    assert len(node_records()) == before
    other = as_node.run("label", "node", "zone-a-sev-1", f"{ZONE}=zone-b", "--overwrite")
    assert not other.ok and "node-facts-admin-only" not in other.stderr  # NodeRestriction's own refusal


def test_an_admins_move_is_allowed_and_recorded(control_plane: Kube, as_node: Kube) -> None:
    before = len(node_records())
    moved = control_plane.run("label", "node", NODE, f"{ZONE}=zone-a", "--overwrite")
    assert moved.ok, moved.stderr
    [record] = node_records()[before:]
    assert (record["user"], record["allowed"]) == ("kubernetes-admin", True)


def test_after_the_refused_move_a_sensitive_pod_of_zone_a_never_lands_on_that_node(control_plane: Kube,
                                                                                  as_node: Kube) -> None:
    """The mission's failure: the node's own relabel into zone-a refused, Volcano's scheduler places a
    sensitive pod pinned to zone-a on a zone-a node, and its binding records the zone it is in."""
    assert not as_node.run("label", "node", NODE, f"{ZONE}=zone-a", "--overwrite").ok
    name = unique("pinned")
    created = control_plane.create(sensitive_pod(name, "zone-a"), namespace=TRAINING)
    assert created.ok, created.stderr
    placed = running_on_a_node(control_plane, TRAINING, name)
    assert placed and placed["spec"]["nodeName"] != NODE
    node = control_plane.get("node", placed["spec"]["nodeName"]) or {}
    assert node["metadata"]["labels"][ZONE] == "zone-a"
    control_plane.run("delete", "pod", name, "-n", TRAINING, "--wait=false")
