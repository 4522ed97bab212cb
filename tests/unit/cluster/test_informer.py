"""The informer and the cluster state against a scripted API server: paging, watch events, a 410
Gone relist, projections that ignore status, the pod-group index, and what a binding is given."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import requests

from webhook.cluster import informer as informer_module
from webhook.cluster.informer import Informer
from webhook.cluster.state import ADMIN_POLICIES, NODES, PODS, ClusterState

from helpers import pod


def node(name: str, zone: str, heartbeat: str = "t0", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone, **labels},
                         "resourceVersion": "1"},
            "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": heartbeat}]}}


def member(name: str, group: str, node_name: str | None = None) -> dict[str, Any]:
    made = pod(name, "ml-training", annotations={"scheduling.k8s.io/group-name": group},
               **({"nodeName": node_name} if node_name else {}))
    return {**made, "status": {"phase": "Running" if node_name else "Pending"}}


class ScriptedApi:
    """Answers list calls with ``pages`` (one list per relist), watch calls with ``watches`` (one
    event list per watch), then blocks until the informer stops."""

    def __init__(self, pages: list[list[dict[str, Any]]], watches: list[list[dict[str, Any]]]) -> None:
        self.pages, self.watches = pages, watches
        self.lists = 0
        self.done = threading.Event()

    def __enter__(self) -> ScriptedApi:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def get(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        """A list in pages of one object, with continue tokens, as the API server pages with limit."""
        if "continue" not in params:
            self.remaining = list(self.pages[min(self.lists, len(self.pages) - 1)])
            self.lists += 1
        page, self.remaining = self.remaining[:1], self.remaining[1:]
        return {"items": page, "metadata": {"resourceVersion": "10", **({"continue": "c"} if self.remaining else {})}}

    def watch(self, path: str, version: str, seconds: int) -> Iterator[dict[str, Any]]:
        if not self.watches:
            self.done.set()
            threading.Event().wait(30)
            return
        yield from self.watches.pop(0)


def run(informer: Informer, api: ScriptedApi) -> None:
    informer.start()
    assert api.done.wait(5)
    informer.stop()


def test_status_only_changes_keep_the_version_and_label_changes_bump_it():
    api = ScriptedApi([[node("n1", "zone-a"), node("n2", "zone-b")]], [[
        {"type": "MODIFIED", "object": node("n1", "zone-a", heartbeat="t1")},
        {"type": "MODIFIED", "object": node("n2", "zone-c")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
    ]])
    informer = Informer(lambda: api, NODES)  # type: ignore[arg-type,return-value]
    run(informer, api)
    assert informer.synced.is_set() and set(informer.store) == {("", "n1"), ("", "n2")}
    assert informer.changes == 2  # the list, and n2's zone: n1's heartbeat changed nothing kept
    assert informer.get("", "n2")["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-c"
    assert "status" not in informer.get("", "n1")


def test_gone_relists_and_drops_what_was_deleted_in_the_gap():
    api = ScriptedApi([[node("n1", "zone-a"), node("n2", "zone-b")], [node("n2", "zone-b")]],
                      [[{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}]])
    informer = Informer(lambda: api, NODES, backoff_seconds=0.01)  # type: ignore[arg-type,return-value]
    run(informer, api)
    assert api.lists == 2 and set(informer.store) == {("", "n2")}


def test_the_pod_group_index_follows_modifications_and_deletions():
    api = ScriptedApi([[member("a", "g1"), member("b", "g1")]], [[
        {"type": "MODIFIED", "object": member("b", "g2")},
        {"type": "DELETED", "object": member("a", "g1")},
        {"type": "ADDED", "object": member("c", "g2", "n1")},
    ]])
    informer = Informer(lambda: api, PODS)  # type: ignore[arg-type,return-value]
    run(informer, api)
    assert informer.indexed == {("ml-training", "g2"): {"b", "c"}}


def state_of(*objects: dict[str, Any]) -> ClusterState:
    return ClusterState.of_objects(objects)


def test_a_binding_is_given_its_pod_node_and_placed_members_with_their_zones():
    state = state_of(node("n1", "zone-a"), node("n2", "zone-b"), member("p0", "g", "n1"), member("p1", "g"),
                     member("p2", "g"), member("other", "h", "n2"))
    context = state.binding_context("ml-training", "p1", "n2", "topology.kubernetes.io/zone")
    assert isinstance(context, dict)
    assert context["node"]["metadata"]["name"] == "n2" and context["pod"]["metadata"]["name"] == "p1"
    assert context["members"] == [{"pod": "p0", "node": "n1", "zone": "zone-a"}]
    state.note_bound("ml-training", "p1", "n2")  # allowed by this worker, not yet seen by the watch
    context = state.binding_context("ml-training", "p2", "n1", "topology.kubernetes.io/zone")
    assert isinstance(context, dict)
    assert {m["pod"]: m["zone"] for m in context["members"]} == {"p0": "zone-a", "p1": "zone-b"}


def test_a_binding_is_given_one_member_per_zone_not_every_member_of_a_large_gang():
    """Issue 39: each binding of a 1,000-pod gang carried the 999 others to the rules (O(n²))."""
    members = [member(f"p{i:04d}", "g", "n1" if i % 2 else "n3") for i in range(1000)]
    state = state_of(node("n1", "zone-a"), node("n2", "zone-b"), node("n3", "zone-a"), *members,
                     member("late", "g"), member("q", "g", "n2"))
    context = state.binding_context("ml-training", "late", "n2", "topology.kubernetes.io/zone")
    assert isinstance(context, dict)
    assert context["members"] == [{"pod": "p0000", "node": "n3", "zone": "zone-a"},
                                  {"pod": "q", "node": "n2", "zone": "zone-b"}]


def test_a_binding_of_an_unknown_pod_or_node_gets_a_reason_not_a_context():
    state = state_of(node("n1", "zone-a"), member("p0", "g"))
    zone = "topology.kubernetes.io/zone"
    assert state.binding_context("ml-training", "ghost", "n1", zone) == \
        "pod ml-training/ghost is not in vgate's cluster state yet (created moments ago?)"
    assert state.binding_context("ml-training", "p0", "n9", zone) == \
        "node n9 is not in vgate's cluster state yet (added moments ago?)"


def test_pods_and_pod_groups_are_not_given_to_policies_as_inventory():
    state = state_of(node("n1", "zone-a"), member("p0", "g"))
    version = state.version()
    state.informers["Pod"].put(member("p1", "g"))
    assert state.version() == version  # a pod's change does not resend the inventory
    assert set(state.inventory()["cluster"]["v1"]) == {"Node"} and state.inventory()["namespace"] == {}


def test_pods_churning_in_label_sets_already_there_leave_effective_egress_indexed_as_it_was():
    """Pods come and go all day; the label sets they come in rarely. Effective egress is indexed again
    only when a label set appears or goes (or a policy, a namespace's labels, a Service changes)."""
    state = state_of({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}},
                     pod("web-0", "web", labels={"app": "web"}))
    pods = state.informers["Pod"]
    first = state.network()
    pods.put(pod("web-1", "web", labels={"app": "web"}))
    pods.put({**pod("web-1", "web", labels={"app": "web"}), "spec": {"nodeName": "n1"}})  # bound
    pods.remove(pod("web-0", "web", labels={"app": "web"}))
    assert state.network() is first
    pods.put(pod("relay", "web", labels={"app": "cache"}))  # a label set no pod had
    second = state.network()
    assert second is not first and {p["metadata"]["name"] for p in second.pods} == {"web-1", "relay"}
    pods.remove(pod("relay", "web", labels={"app": "cache"}))  # the last of its set
    assert state.network() is not second


def test_a_pod_group_the_watch_has_not_delivered_is_asked_of_the_api_server_once():
    """`kubectl apply -f gang.yaml` creates a PodGroup and its members together: a member's PodGroup may
    not be watched yet, so it is read with one GET (404 or an error: not known, per server.failureMode)."""
    asked: list[str] = []

    class Api:
        def get(self, path: str, params: Any = None, timeout: float = 30) -> dict[str, Any]:
            asked.append(path)
            if path.endswith("/missing"):
                raise RuntimeError("404 Not Found")
            return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {
                "name": "gang", "namespace": "ml-training", "labels": {"topology.kubernetes.io/zone": "zone-a"},
                "managedFields": [{}]}, "spec": {"minMember": 2}, "status": {"phase": "Pending"}}

    state = ClusterState(lambda: Api())  # type: ignore[arg-type,return-value]
    found = state.pod_group("ml-training", "gang")
    assert found and found["metadata"]["labels"] == {"topology.kubernetes.io/zone": "zone-a"} and "status" not in found
    assert state.pod_group("ml-training", "missing") is None
    assert asked == ["/apis/scheduling.volcano.sh/v1beta1/namespaces/ml-training/podgroups/gang",
                     "/apis/scheduling.volcano.sh/v1beta1/namespaces/ml-training/podgroups/missing"]


class NotServedApi(ScriptedApi):
    """An API server without the kind's CRD: every list is 404, until ``served`` lists ``pages``."""

    def __init__(self, pages: list[list[dict[str, Any]]]) -> None:
        super().__init__(pages, [])
        self.served = False

    def get(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        if not self.served:
            response = requests.Response()
            response.status_code = 404
            raise requests.HTTPError("404 Not Found", response=response)
        return super().get(path, params)


def test_a_kind_whose_crd_is_not_installed_is_known_to_have_none_and_is_listed_once_it_is(monkeypatch):
    monkeypatch.setattr(informer_module, "NOT_SERVED_RETRY_SECONDS", 0.05)
    anp = {"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
           "metadata": {"name": "confine", "resourceVersion": "3"},
           "spec": {"priority": 10, "subject": {"namespaces": {}}, "egress": [], "ingress": []}}
    api = NotServedApi([[anp]])
    informer = Informer(lambda: api, ADMIN_POLICIES)  # type: ignore[arg-type,return-value]
    informer.start()
    assert informer.synced.wait(5) and informer.store == {} and informer.error is None
    api.served = True  # the CRD installed: listed at the next try
    assert api.done.wait(5)
    informer.stop()
    assert informer.get("", "confine") == {**anp, "metadata": {"name": "confine"}, "spec": {
        "priority": 10, "subject": {"namespaces": {}}, "egress": []}}
    # a kind that is not optional and answers 404 is an error, never "none exist"
    plain = Informer(lambda: NotServedApi([]), NODES, backoff_seconds=0.01)  # type: ignore[arg-type,return-value]
    plain.start()
    threading.Event().wait(0.2)
    plain.stop()
    assert not plain.synced.is_set() and "404" in (plain.error or "")
