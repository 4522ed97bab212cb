"""Mutation: queue, scheduler, priority and QoS, checked on real manifests.

Patches are applied with the jsonpatch library (not ours) and the results validated against the
Kubernetes OpenAPI schema (kubernetes-validate) and Volcano's Job CRD schema.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import kubernetes_validate
import orjson
import pytest

from webhook.core.admission import decode_review
from webhook.core.errors import RequestError
from webhook.core.kind_handler import KindContext
from webhook.core.mutation import mutate
from webhook.core.patching import diff_managed
from webhook.core.quantity import parse_quantity
from webhook.files.config_file import parse_config

from corpus import corpus_pods, corpus_volcano_jobs, fixture_pod
from helpers import K8S_VERSION, crd_validator, is_strictly_valid, pod, review


def run(obj: dict[str, Any], config, **options: Any):
    return mutate(decode_review(orjson.dumps(review(obj, **options)), 100), config)


def mutated(obj: dict[str, Any], config, **options: Any) -> dict[str, Any]:
    return jsonpatch.apply_patch(obj, run(obj, config, **options).patch)


def test_pod_in_training_namespace_gets_queue_scheduler_priority_and_guaranteed_memory(config):
    result = mutated(pod(namespace="ml-training"), config)
    assert result["metadata"]["annotations"] == {
        "scheduling.volcano.sh/queue-name": "training", "vgate.io/qos-class": "Guaranteed",
        "vgate.io/injected": "priority,priorityClassName,qosClass,queue,resources,schedulerName"}
    spec = result["spec"]
    assert spec["schedulerName"] == "volcano"
    assert (spec["priorityClassName"], spec["priority"]) == ("vgate-high", 100000)
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "4Gi"},
                                                  "limits": {"cpu": "1", "memory": "4Gi"}}
    kubernetes_validate.validate(result, K8S_VERSION, strict=True)


def test_patch_creates_annotations_and_escapes_slashes(config):
    ops = run(pod(namespace="ml-training"), config).patch
    assert {"op": "add", "path": "/metadata/annotations",
            "value": {"scheduling.volcano.sh/queue-name": "training", "vgate.io/qos-class": "Guaranteed",
                      "vgate.io/injected": "priority,priorityClassName,qosClass,queue,resources,schedulerName"}} in ops
    existing = run(pod(namespace="ml-training", annotations={"team": "a"}), config).patch
    paths = {op["path"] for op in existing}
    assert "/metadata/annotations/scheduling.volcano.sh~1queue-name" in paths
    assert "/metadata/annotations/vgate.io~1qos-class" in paths


def test_pointer_escaping_of_tilde_and_slash_round_trips(config):
    """A managed key holding `~` and `/` is patched at exactly that key: `~0` before `~1` (RFC 6901)."""
    original = {"metadata": {"annotations": {"a~1b/c": "old", "a/b": "other", "keep": "1"}}}
    changed = copy.deepcopy(original)
    changed["metadata"]["annotations"]["a~1b/c"] = "new"
    patch = diff_managed(original, changed, [("metadata", "annotations")])
    assert patch == [{"op": "replace", "path": "/metadata/annotations/a~01b~1c", "value": "new"}]
    assert jsonpatch.apply_patch(original, patch) == changed  # a wrong escape names "a/b/c" or "a/b": not this key
    labelled = pod(namespace="ml-training", annotations={"a~b/c": "kept"})
    assert mutated(labelled, config)["metadata"]["annotations"]["a~b/c"] == "kept"


def test_queue_by_label_selector_then_default(config):
    by_label = mutated(pod(labels={"vgate.io/workload": "batch"}), config)
    assert by_label["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "batch"
    assert by_label["spec"]["priorityClassName"] == "vgate-low"
    default = mutated(pod(), config)
    assert default["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "default"
    assert default["spec"]["priority"] == 10000


def test_queue_order_named_then_namespace_annotation_then_the_config_and_each_source_said(config):
    def queue_of(obj: dict[str, Any], namespace_queue: str | None = None) -> tuple[str | None, str | None]:
        result = mutate(decode_review(orjson.dumps(review(obj)), 100), config,
                        KindContext(namespace_queue=namespace_queue))
        return result.queue, result.queue_source

    named = pod(namespace="ml-training", annotations={"scheduling.volcano.sh/queue-name": "inference"})
    assert queue_of(named, "batch") == ("inference", "named")
    assert queue_of(pod(namespace="ml-training"), "batch") == ("batch", "namespace annotation")
    assert queue_of(pod(namespace="ml-training")) == ("training", "queues.byNamespace")
    assert queue_of(pod(labels={"vgate.io/workload": "batch"})) == ("batch", "queues.bySelector")
    assert queue_of(pod()) == ("default", "queues.default")
    volcano_default = pod(namespace="ml-training", annotations={"scheduling.volcano.sh/queue-name": "default"})
    assert queue_of(volcano_default, "batch") == ("batch", "namespace annotation")  # "default" chooses none


def test_queue_named_by_the_user_is_kept_even_if_not_allowed(config):
    asked = pod(namespace="web", annotations={"scheduling.volcano.sh/queue-name": "training"})
    result = mutated(asked, config)
    assert result["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "training"


def test_explicit_priority_class_is_kept_and_global_default_is_replaced():
    config = parse_config(
        "priorityClasses:\n  globalDefault: cluster-default\n  values: {vgate-normal: 7, cluster-default: 1}\n"
        "queues:\n  definitions:\n    default: {priorityClass: vgate-normal}\n"
    )
    explicit = mutated(pod(priorityClassName="system-node-critical", priority=2000001000), config)
    assert (explicit["spec"]["priorityClassName"], explicit["spec"]["priority"]) == ("system-node-critical", 2000001000)
    defaulted = mutated(pod(priorityClassName="cluster-default", priority=1), config)
    assert (defaulted["spec"]["priorityClassName"], defaulted["spec"]["priority"]) == ("vgate-normal", 7)


def test_guaranteed_uses_existing_limit_then_request_then_default(config):
    containers = [
        {
            "name": "limit",
            "image": "x",
            "resources": {"limits": {"memory": "8Gi", "cpu": "2"}, "requests": {"memory": "1Gi"}},
        },
        {"name": "request", "image": "x", "resources": {"requests": {"memory": "2Gi"}}},
        {"name": "none", "image": "x"},
    ]
    init = [{"name": "init", "image": "x"}]
    result = mutated(pod(namespace="ml-inference", containers=containers, initContainers=init), config)
    resources = {c["name"]: c["resources"] for c in result["spec"]["containers"] + result["spec"]["initContainers"]}
    assert resources["limit"] == {"limits": {"memory": "8Gi", "cpu": "2"}, "requests": {"memory": "8Gi", "cpu": "2"}}
    assert resources["request"]["limits"] == resources["request"]["requests"] == {"memory": "2Gi", "cpu": "1"}
    assert resources["none"]["limits"] == resources["init"]["requests"] == {"cpu": "1", "memory": "4Gi"}


def test_burstable_limit_is_never_below_the_request(config):
    containers = [
        {"name": "big", "image": "x", "resources": {"requests": {"memory": "3Gi"}}},
        {"name": "small-limit", "image": "x", "resources": {"limits": {"memory": "128Mi"}}},
        {"name": "bare", "image": "x"},
    ]
    result = mutated(pod(labels={"vgate.io/workload": "batch"}, containers=containers), config)
    resources = {c["name"]: c["resources"] for c in result["spec"]["containers"]}
    assert resources["big"] == {"requests": {"memory": "3Gi"}, "limits": {"memory": "3Gi"}}
    assert resources["small-limit"] == {"limits": {"memory": "128Mi"}, "requests": {"memory": "128Mi"}}
    assert resources["bare"] == {"requests": {"memory": "256Mi"}, "limits": {"memory": "1Gi"}}
    for resource in resources.values():
        assert parse_quantity(resource["limits"]["memory"]) >= parse_quantity(resource["requests"]["memory"])
    assert result["metadata"]["annotations"]["vgate.io/qos-class"] == "Burstable"


def test_annotation_picks_the_class_and_best_effort_injects_nothing(config):
    asked = pod(namespace="ml-training", annotations={"vgate.io/qos-class": "BestEffort"})
    result = mutated(asked, config)
    assert "resources" not in result["spec"]["containers"][0]
    assert result["metadata"]["annotations"]["vgate.io/qos-class"] == "BestEffort"


def test_unknown_class_in_annotation_is_replaced_by_the_decision(config):
    result = mutated(pod(namespace="ml-training", annotations={"vgate.io/qos-class": "Platinum"}), config)
    assert result["metadata"]["annotations"]["vgate.io/qos-class"] == "Guaranteed"


def test_without_queue_class_the_kubernetes_class_is_kept(config):
    cpu_only = pod(containers=[{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}])
    result = mutated(cpu_only, config)
    assert result["metadata"]["annotations"]["vgate.io/qos-class"] == "Burstable"
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"memory": "1Gi"}
    best_effort = mutated(pod(), config)
    assert best_effort["metadata"]["annotations"]["vgate.io/qos-class"] == "BestEffort"
    assert "resources" not in best_effort["spec"]["containers"][0]


def test_scheduler_only_in_volcano_namespaces_and_custom_scheduler_kept():
    config = parse_config("volcano:\n  namespaces: ['ml-*']\n")
    assert "schedulerName" not in mutated(pod(namespace="web"), config)["spec"]
    assert (
        mutated(pod(namespace="ml-x", schedulerName="default-scheduler"), config)["spec"]["schedulerName"] == "volcano"
    )
    assert mutated(pod(namespace="ml-x", schedulerName="kube-batch"), config)["spec"]["schedulerName"] == "kube-batch"


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE", "CONNECT"])
def test_only_create_is_mutated(config, operation):
    assert run(pod(namespace="ml-training"), config, operation=operation).patch == []


def test_unknown_kinds_and_subresources_are_untouched(config):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}
    assert run(deployment, config).patch == []
    binding = review(pod(namespace="ml-training"))
    binding["request"]["subResource"] = "binding"
    assert mutate(decode_review(orjson.dumps(binding), 100), config).patch == []


@pytest.mark.parametrize("where,source", corpus_pods(), ids=lambda v: v if isinstance(v, str) else "")
def test_corpus_pods_stay_valid_and_mutation_is_idempotent(config, where, source):
    strict = is_strictly_valid(source)  # a few upstream examples carry unknown fields of their own
    for namespace in ("ml-training", "default"):
        first = run(source, config, namespace=namespace)
        result = jsonpatch.apply_patch(review(source, namespace=namespace)["request"]["object"], first.patch)
        kubernetes_validate.validate(result, K8S_VERSION, strict=strict)
        assert run(result, config, namespace=namespace).patch == [], f"{where}: second pass patched"


def test_fixture_pod_with_every_field_is_mutated_validly_and_idempotently(config):
    source = fixture_pod()
    result = mutated(source, config, namespace="ml-training")
    kubernetes_validate.validate(result, K8S_VERSION, strict=False)
    assert result["metadata"]["annotations"]["annotationsKey"] == "annotationsValue"
    assert run(result, config, namespace="ml-training").patch == []


@pytest.mark.parametrize("where,source", corpus_volcano_jobs(), ids=lambda v: v if isinstance(v, str) else "")
def test_corpus_volcano_jobs_match_the_crd_and_mutation_is_idempotent(config, where, source):
    first = run(source, config, namespace="ml-training")
    result = jsonpatch.apply_patch(review(source, namespace="ml-training")["request"]["object"], first.patch)
    crd_validator("batch.volcano.sh_jobs.yaml").validate(result)
    written = source["spec"].get("queue")
    assert result["spec"]["queue"] == (written if written not in (None, "", "default") else "training")
    assert result["spec"]["schedulerName"] == source["spec"].get("schedulerName", "volcano")
    for task in result["spec"]["tasks"]:
        assert task["template"]["metadata"]["annotations"]["vgate.io/qos-class"] in first.qos_classes
    assert run(result, config, namespace="ml-training").patch == []


def test_volcano_default_queue_means_none_chosen(config):
    """Volcano's CRDs default spec.queue to `default` before any webhook: that is not a choice."""
    job = copy.deepcopy(dict(corpus_volcano_jobs())["job.yaml#0"])
    assert job["spec"]["queue"] == "default"  # as written in the corpus, and as the CRD default fills it
    result = mutated(job, config, namespace="ml-training")
    assert (result["spec"]["queue"], result["spec"]["priorityClassName"]) == ("training", "vgate-high")
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml-inference"},
        "spec": {"queue": "default", "minMember": 1},
    }
    assert mutated(group, config)["spec"]["queue"] == "inference"
    annotated = pod(namespace="ml-inference", annotations={"scheduling.volcano.sh/queue-name": "default"})
    assert mutated(annotated, config)["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "inference"


def test_volcano_job_keeps_a_queue_it_chose_and_gets_priority(config):
    job = copy.deepcopy(dict(corpus_volcano_jobs())["job.yaml#0"])
    job["spec"]["queue"] = "batch"
    result = mutated(job, config, namespace="ml-training")
    assert (result["spec"]["queue"], result["spec"]["priorityClassName"]) == ("batch", "vgate-low")


def test_pod_group_gets_queue_and_priority(config):
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml-inference"},
        "spec": {"minMember": 2},
    }
    result = mutated(group, config)
    assert result["spec"] == {"minMember": 2, "queue": "inference", "priorityClassName": "vgate-critical"}
    crd_validator("scheduling.volcano.sh_podgroups.yaml").validate(result)
    assert run(result, config).patch == []


def test_managed_diff_escapes_removes_and_replaces_key_by_key():
    """The patch diff_managed builds is RFC 6902 as the jsonpatch library applies it."""
    original = {
        "metadata": {"annotations": {"x~y/z": "1", "gone": "2", "same": "3"}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "1Gi"}}}]},
    }
    target = {
        "metadata": {"annotations": {"x~y/z": "changed", "same": "3", "new/key": "4"}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "2Gi"}, "requests": {"cpu": "1"}}}]},
    }
    fields = [("metadata", "annotations"), ("spec", "containers", 0, "resources"), ("spec", "schedulerName")]
    ops = diff_managed(original, target, fields)
    assert {"op": "replace", "path": "/metadata/annotations/x~0y~1z", "value": "changed"} in ops
    assert {"op": "remove", "path": "/metadata/annotations/gone"} in ops
    assert {"op": "add", "path": "/metadata/annotations/new~1key", "value": "4"} in ops
    assert {"op": "replace", "path": "/spec/containers/0/resources/limits/memory", "value": "2Gi"} in ops
    assert not any(op["path"].endswith("/same") for op in ops)
    assert jsonpatch.apply_patch(original, ops) == target
    assert diff_managed(target, target, fields) == []


@pytest.mark.parametrize("nesting", ["object", "array", "mixed"])
def test_depth_limit_is_exact(nesting):
    """100 levels (the root object counts as one) pass the depth check; 101 do not."""

    def nested(levels: int) -> Any:  # levels - 1 nested containers around a number
        value: Any = 1
        for level in range(levels - 1):
            value = {"a": value} if nesting == "object" or (nesting == "mixed" and level % 2) else [value]
        return value

    for levels, passes in ((100, True), (101, False)):
        body = orjson.dumps({**review(pod()), "deep": nested(levels)})
        if passes:
            decode_review(body, 100)
        else:
            with pytest.raises(RequestError, match="nested deeper than 100"):
                decode_review(body, 100)


def test_reinvocation_never_undoes_a_later_webhook_but_fills_what_it_added(config):
    """vgate -> another webhook (Volcano's resource group scheduler, a sidecar injector) -> vgate again."""
    first = mutated(pod(namespace="ml-training", schedulerName="default-scheduler"), config)
    assert first["spec"]["schedulerName"] == "volcano"
    later = copy.deepcopy(first)
    later["spec"]["schedulerName"] = "default-scheduler"  # a Volcano resource group's schedulerName
    later["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = "batch"
    later["spec"]["containers"].append({"name": "sidecar", "image": "registry.example.com/proxy:1"})
    again = run(later, config)
    assert {op["op"] for op in again.patch} == {"add"}
    result = jsonpatch.apply_patch(later, again.patch)
    assert result["spec"]["schedulerName"] == "default-scheduler"
    assert result["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "batch"
    assert result["spec"]["containers"][1]["resources"] == {
        "requests": {"cpu": "1", "memory": "4Gi"},
        "limits": {"cpu": "1", "memory": "4Gi"},
    }
    assert run(result, config).patch == []


def test_a_forged_record_never_keeps_an_unchosen_queue(config):
    """Bypass: vgate.io/injected forged with Volcano's `default` queue kept the pod out of its namespace's queue."""
    forged = pod(namespace="ml-inference", annotations={"vgate.io/injected": "none",
                                                        "scheduling.volcano.sh/queue-name": "default"})
    forged["spec"]["priority"] = 0  # what the Priority plugin sets before any webhook, with no class named
    result = jsonpatch.apply_patch(forged, run(forged, config).patch)
    assert result["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "inference"
    # The class it adds brings its priority, or the API server refuses the pod.
    assert (result["spec"]["priorityClassName"], result["spec"]["priority"]) == ("vgate-critical", 1000000)
    chosen = pod(namespace="ml-inference", annotations={"vgate.io/injected": "none",
                                                        "scheduling.volcano.sh/queue-name": "batch"})
    assert jsonpatch.apply_patch(chosen, run(chosen, config).patch)["metadata"]["annotations"][
        "scheduling.volcano.sh/queue-name"] == "batch"  # a chosen queue is /validate's to judge


def test_a_compliant_object_is_still_recorded_once(config):
    """Without the record, a later pass could not tell vgate's choice from another webhook's."""
    compliant = mutated(pod(namespace="ml-training"), config)
    del compliant["metadata"]["annotations"]["vgate.io/injected"]
    ops = run(compliant, config).patch
    assert ops == [{"op": "add", "path": "/metadata/annotations/vgate.io~1injected", "value": "none"}]


def test_a_job_labelled_sensitive_gives_its_tasks_the_labels_they_lack_once(config):
    """Issue 34: the Job's own sensitive label never reached its pods (bindings and the report took them
    for ordinary). A task's own contrary value is left to /validate (placement-classification-unit)."""
    sensitive, public = {"vgate.io/data-classification": "sensitive"}, {"vgate.io/data-classification": "public"}
    containers = {"containers": [{"name": "c"}]}
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ml-training", "labels": sensitive},
           "spec": {"tasks": [{"name": "a", "replicas": 1, "template": {"spec": containers}},
                              {"name": "b", "replicas": 1, "template": {"metadata": {"labels": public},
                                                                        "spec": containers}}]}}
    result = mutated(job, config)
    labels = [task["template"]["metadata"]["labels"] for task in result["spec"]["tasks"]]
    assert labels == [{"vgate.io/data-classification": "sensitive"}, {"vgate.io/data-classification": "public"}]
    again = mutate(decode_review(orjson.dumps(review(result)), 100), config).patch
    assert again == []
    ordinary = {**job, "metadata": {"name": "j", "namespace": "ml-training"}}
    assert "labels" not in mutated(ordinary, config)["spec"]["tasks"][0]["template"].get("metadata", {})
