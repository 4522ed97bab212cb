"""The real control plane for the end-to-end tests: started once per session, stopped after.

`e2e/cluster up` builds what is missing (cached in .e2e/) and starts etcd, kube-apiserver,
kube-controller-manager, Volcano, kwok and vgate. VGATE_E2E_REUSE=1 keeps a cluster already up
(for a developer iterating on one test); CI always starts a fresh one. VGATE_E2E_PODS=1 runs vgate
as the chart's pods instead of a process (CI runs the suite both ways).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import cluster
from e2e.kube import Kube

# The tenants the shipped config names: their namespaces and the Volcano queues vgate assigns there.
QUEUES = ["training", "inference", "batch"]
TENANT_NAMESPACES = ["ml-training", "ml-inference"]


def queue(name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": True}}


@pytest.fixture(scope="session")
def control_plane() -> Iterator[Kube]:
    pods = os.environ.get("VGATE_E2E_PODS") == "1"  # vgate as the chart's pods (`e2e/cluster up --pods`)
    reuse = os.environ.get("VGATE_E2E_REUSE") == "1" and cluster.status() == 0 and cluster.pods_mode() == pods
    if not reuse:
        cluster.up(pods=pods)
    kube = Kube()
    for name in QUEUES:
        result = kube.apply(queue(name))
        assert result.ok, result.stderr
    for name in TENANT_NAMESPACES:
        if not kube.get("namespace", name):
            kube.namespace(name)
        result = kube.apply(cluster.deny_egress_policy(name))
        assert result.ok, result.stderr
    yield kube
    if not reuse:
        cluster.down()


@pytest.fixture
def kube(control_plane: Kube) -> Kube:
    return control_plane
