"""What a write does to sensitive pods' effective egress (webhook/core/egress_judge.py), judged by the
shipped rule network-egress-confined through validate() with the real regorus engine: each case is a
write a tenant who can create pods, Services and NetworkPolicies in its own namespace would try."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

import orjson
import pytest

from webhook.core.admission import decode_review
from webhook.core.egress import NetworkObjects
from webhook.core.kind_handler import KindContext
from webhook.core.validation import Validation, validate

from helpers import RESTRICTED_SPEC, review

NOW = datetime(2026, 12, 4, tzinfo=timezone.utc)
RULE = "network-egress-confined"
SENSITIVE = {"vgate.io/data-classification": "sensitive", "vgate.io/egress": "deny"}
NAMESPACES = {"ml-training": {"kubernetes.io/metadata.name": "ml-training"},
              "kube-system": {"kubernetes.io/metadata.name": "kube-system"}}


def pod(name: str, labels: dict[str, str], namespace: str = "ml-training") -> dict[str, Any]:
    spec = copy.deepcopy(RESTRICTED_SPEC)
    spec["nodeSelector"] = {"topology.kubernetes.io/zone": "zone-a",
                            "node-restriction.kubernetes.io/cpu-security.sev.snp.enabled": "true"}
    spec["containers"][0]["image"] = "registry.example.com/app@sha256:" + "9f86d081" * 8
    spec["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "4Gi"},
                                          "requests": {"cpu": "1", "memory": "4Gi"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": spec}


def policy(name: str, egress: list[dict[str, Any]], selector: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": "ml-training"},
            "spec": {"podSelector": selector or {}, "policyTypes": ["Egress"], "egress": egress}}


DENY = policy("deny-egress", [{"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name":
                                                                              "kube-system"}},
                                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]}],
              {"matchLabels": {"vgate.io/egress": "deny"}})
ALLOW_ALL = policy("allow-all", [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}])
RUNNING = pod("train-0", SENSITIVE)


def network(policies: list[dict[str, Any]], pods: list[dict[str, Any]],
            services: list[dict[str, Any]] | None = None) -> NetworkObjects:
    return NetworkObjects((), policies, NAMESPACES, pods, services or [])


def judged(obj: dict[str, Any], net: NetworkObjects | str | None, engine: Any, config: Any,
           **options: Any) -> Validation:
    namespace = (obj.get("metadata") or {}).get("namespace", "")
    body = review(obj, **options)
    body["request"]["namespace"] = namespace
    request = decode_review(orjson.dumps(body), 100)
    return validate(request, engine, config, (), NOW, KindContext(network=net))


def messages(result: Validation) -> list[str]:
    return [o.message for o in result.rules("deny") if o.rule == RULE]


def test_a_sensitive_pod_no_policy_selects_is_refused(engine, config):
    result = judged(pod("new", SENSITIVE), network([], []), engine, config)
    assert messages(result) == ["sensitive pod ml-training/new of Pod new would reach outside the cluster: no "
                                "NetworkPolicy selects pod ml-training/new for egress: it may reach any address"]
    assert result.egress == {"pods": [{"pod": "ml-training/new", "confined": False, "policies": [],
                                       "reasons": [messages(result)[0].split("cluster: ", 1)[1]]}]}


def test_a_sensitive_pod_reaching_only_the_dns_is_admitted_and_its_policies_recorded(engine, config):
    result = judged(pod("new", SENSITIVE), network([DENY], []), engine, config)
    assert result.decision.allowed, result.decision.message
    assert result.egress == {"pods": [{"pod": "ml-training/new", "confined": True, "reasons": [],
                                       "policies": ["ml-training/deny-egress"]}]}


def test_an_allow_all_policy_beside_admitted_sensitive_pods_is_refused_naming_them(engine, config):
    result = judged(ALLOW_ALL, network([DENY], [RUNNING]), engine, config)
    assert messages(result) == ["NetworkPolicy allow-all would open a way outside the cluster for sensitive pods "
                                "ml-training/train-0: NetworkPolicy ml-training/allow-all egress[0] allows 0.0.0.0/0, "
                                "which reaches 0.0.0.0/0 outside the internal ranges"]
    assert judged(ALLOW_ALL, network([DENY], []), engine, config).decision.allowed  # no sensitive pod: no harm


@pytest.mark.parametrize("cidr", ["::/0", "0.0.0.0/0 except 10.0.0.0/8"])
def test_egress_to_the_internet_any_way_written_is_refused(cidr, engine, config):
    block = {"cidr": cidr.split()[0], **({"except": [cidr.split()[-1]]} if "except" in cidr else {})}
    opened = policy("open", [{"to": [{"ipBlock": block}]}], {"matchLabels": {"vgate.io/egress": "deny"}})
    assert messages(judged(opened, network([DENY], [RUNNING]), engine, config)), cidr


def test_deleting_the_deny_policy_is_refused_while_sensitive_pods_exist(engine, config):
    deleted = review(DENY, operation="DELETE", old_object=DENY)
    deleted["request"]["object"] = None
    deleted["request"]["namespace"] = "ml-training"
    request = decode_review(orjson.dumps(deleted), 100)
    refused = validate(request, engine, config, (), NOW, KindContext(network=network([DENY], [RUNNING])))
    assert "no NetworkPolicy selects pod ml-training/train-0" in refused.decision.message
    allowed = validate(request, engine, config, (), NOW, KindContext(network=network([DENY], [])))
    assert allowed.decision.allowed


def test_a_relay_pod_an_existing_policy_lets_sensitive_pods_reach_is_refused(engine, config):
    to_cache = policy("to-cache", [{"to": [{"podSelector": {"matchLabels": {"app": "cache"}}}]}],
                      {"matchLabels": {"vgate.io/egress": "deny"}})
    relay = pod("cache-0", {"app": "cache"})
    result = judged(relay, network([DENY, to_cache], [RUNNING]), engine, config)
    assert messages(result) == ["Pod cache-0 would open a way outside the cluster for sensitive pods "
                                "ml-training/train-0: NetworkPolicy ml-training/to-cache egress[0] reaches pod "
                                "ml-training/cache-0, whose egress leads outside: no NetworkPolicy selects pod "
                                "ml-training/cache-0 for egress: it may reach any address"]
    confined_relay = pod("cache-0", {"app": "cache", "vgate.io/egress": "deny"})
    assert judged(confined_relay, network([DENY, to_cache], [RUNNING]), engine, config).decision.allowed


def test_the_egress_label_removed_from_a_running_sensitive_pod_is_refused(engine, config):
    unlabelled = pod("train-0", {"vgate.io/data-classification": "sensitive"})
    result = judged(unlabelled, network([DENY], [RUNNING]), engine, config, operation="UPDATE", old_object=RUNNING)
    assert any("no NetworkPolicy selects pod ml-training/train-0" in m for m in messages(result)), messages(result)
    assert "placement-classification-fixed" in {o.rule for o in result.rules("deny")}


def test_a_namespace_relabelled_into_a_peer_of_sensitive_pods_is_refused(engine, config):
    to_research = policy("to-research", [{"to": [{"namespaceSelector": {"matchLabels": {"tier": "research"}}}]}],
                         {"matchLabels": {"vgate.io/egress": "deny"}})
    web = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web", "labels": {"tier": "research"}}}
    net = NetworkObjects((), [DENY, to_research], {**NAMESPACES, "web": {}}, [RUNNING, pod("site", {}, "web")], [])
    result = judged(web, net, engine, config, operation="UPDATE",
                    old_object={**web, "metadata": {"name": "web", "labels": {}}})
    assert "reaches pod web/site, whose egress leads outside" in result.decision.message


def service(kind: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "front", "namespace": "ml-training"},
            "spec": {"type": kind, "selector": {"vgate.io/egress": "deny"}, "ports": [{"port": 80}], **spec}}


@pytest.mark.parametrize("exposing", [service("LoadBalancer"), service("NodePort"),
                                      service("ClusterIP", externalIPs=["203.0.113.7"])])
def test_a_service_reachable_from_outside_selecting_a_sensitive_pod_is_refused(exposing, engine, config):
    result = judged(exposing, network([DENY], [RUNNING]), engine, config)
    assert messages(result) == ["Service front would make sensitive pods ml-training/train-0 reachable from "
                                "outside the cluster: select no sensitive pod"]
    assert judged(service("ClusterIP"), network([DENY], [RUNNING]), engine, config).decision.allowed


def test_an_ingress_to_a_service_selecting_a_sensitive_pod_is_refused(engine, config):
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "web", "namespace": "ml-training"},
               "spec": {"rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix",
                                                       "backend": {"service": {"name": "front"}}}]}}]}}
    result = judged(ingress, network([DENY], [RUNNING], [service("ClusterIP")]), engine, config)
    assert "Ingress web would make sensitive pods ml-training/train-0 reachable" in result.decision.message


def test_a_sensitive_pod_a_load_balancer_already_selects_is_refused(engine, config):
    result = judged(pod("new", SENSITIVE), network([DENY], [], [service("LoadBalancer")]), engine, config)
    assert messages(result) == ["sensitive pod ml-training/new of Pod new would reach outside the cluster: Service "
                                "ml-training/front (type LoadBalancer) selects it: reachable from outside the cluster"]


def test_an_unsynced_cluster_state_is_never_confined(engine, config):
    result = judged(pod("new", SENSITIVE), "the cluster state has not been listed yet: NetworkPolicy", engine, config)
    assert not result.decision.allowed and result.error is not None
    assert "cannot tell where sensitive pods may send traffic" in result.decision.message


def test_without_a_cluster_view_nothing_is_computed_and_ordinary_pods_cost_nothing(engine, config):
    assert judged(pod("new", SENSITIVE), None, engine, config).egress is None
    net = network([DENY], [RUNNING, pod("web-1", {"app": "web"})])
    assert judged(pod("web-2", {"app": "web"}), net, engine, config).egress is None  # pods labelled alike exist


def test_a_pod_group_carrying_its_jobs_labels_is_not_a_pod_but_a_jobs_tasks_are(engine, config):
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "ml-training", "labels": SENSITIVE},
             "spec": {"minMember": 1, "queue": "training"}}
    assert judged(group, network([], []), engine, config).egress is None
    task = pod("t", SENSITIVE)
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ml-training"},
           "spec": {"minAvailable": 1, "schedulerName": "volcano", "queue": "training", "tasks": [
               {"name": "t", "replicas": 1, "template": {"metadata": task["metadata"], "spec": task["spec"]}}]}}
    assert "no NetworkPolicy selects pod ml-training/t" in judged(job, network([], []), engine, config).decision.message


GANG = [pod(f"gang-{i}", {**SENSITIVE, "volcano.sh/task-index": str(i)}) for i in range(1000)]


def test_a_gangs_pods_differing_only_in_a_label_no_selector_reads_are_one_class(engine, config):
    """Issue 39: Volcano's per-pod task-index label made every pod of a gang a class of its own, and
    each new pod cost a pass over all of them. Pods are classed by the labels selectors read."""
    from webhook.core.egress_judge import _indexed

    now = _indexed(network([DENY], GANG), config.placement)
    assert list(now.sensitive) == [("ml-training", frozenset({("vgate.io/egress", "deny")}))]
    assert len(now.sensitive[next(iter(now.sensitive))]) == 1000
    result = judged(pod("gang-1000", {**SENSITIVE, "volcano.sh/task-index": "1000"}), network([DENY], GANG),
                    engine, config)
    assert result.decision.allowed and result.egress and result.egress["pods"][0]["confined"] is True


@pytest.mark.parametrize("selector", [{"matchLabels": {"volcano.sh/task-index": "3"}},
                                      {"matchExpressions": [{"key": "volcano.sh/task-index", "operator": "In",
                                                             "values": ["3"]}]},
                                      {"matchExpressions": [{"key": "volcano.sh/task-index", "operator": "NotIn",
                                                             "values": [str(i) for i in range(1000) if i != 3]}]}])
def test_a_policy_opening_egress_by_a_label_no_class_keeps_is_refused_naming_the_pod(selector, engine, config):
    """Bypass: a NetworkPolicy selecting one pod of the gang by the label the classes drop. The
    cluster after the write classes the pods again with the write's own selectors."""
    opening = policy("open-one", [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}], selector)
    result = judged(opening, network([DENY], GANG), engine, config)
    assert messages(result) == ["NetworkPolicy open-one would open a way outside the cluster for sensitive pods "
                                "ml-training/gang-3: NetworkPolicy ml-training/open-one egress[0] allows 0.0.0.0/0, "
                                "which reaches 0.0.0.0/0 outside the internal ranges"]


def test_a_service_exposing_a_gangs_pod_by_a_label_no_class_keeps_is_refused(engine, config):
    """Bypass: a LoadBalancer selecting one pod of the gang by its task-index."""
    exposing = service("LoadBalancer", selector={"volcano.sh/task-index": "7"})
    result = judged(exposing, network([DENY], GANG), engine, config)
    assert messages(result) == ["Service front would make sensitive pods ml-training/gang-7 reachable from "
                                "outside the cluster: select no sensitive pod"]
