"""The RVM serves requests; it must decide exactly as the interpreter (and OPA) would.

regorus' RVM is 5-8x faster than its interpreter but younger: these tests hold the two to the
same answers on the catalogue, the samples and every workload of the corpus, check the guard
that mends the RVM's one known gap (``x := <undefined>`` does not stop a query), and check the
fallbacks: requests beyond the RVM's instruction budget, and policy sets it cannot compile.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
import regorus

from webhook.core.contract import EngineInput, PolicyResult
from webhook.offline.admit import admit
from webhook.policy.regorus_engine import RegorusEngine
from webhook.policy.rvm_guard import guard_assignments
from webhook.policy.sources import load_policy_set

from corpus import corpus_pods, corpus_volcano_jobs, fixture_pod
from helpers import POLICIES, RESTRICTED_SPEC, copy_policies, pod, review, yaml_documents

# Each rule is a case of `x := ...` where the right side may be undefined, in every kind of query.
GAP_CASES = """package gap

import rego.v1

# A comment with non-ASCII text (等保2.0) shifts byte offsets away from character offsets.
undefined_rule := input.nope

field(document) := document.b

plain contains 1 if { v := input.nope }
from_rule contains 1 if { v := undefined_rule }
from_function contains 1 if { v := field({}) }
wildcard contains 1 if { _ := input.nope }
one_literal_body := 1 if v := input.nope
after_some contains v if { some v in [1]; w := input.nope }
in_every contains 1 if { every x in [1] { v := input.nope } }
in_comprehension := [1 | v := input.nope]
multi_line contains v if {
	v := sprintf("%v", [input.nope])
}
defined contains 1 if { v := input.a; v.x == 1 }
in_else := 2 if false else := 3 if v := input.nope
object_comprehension := {k: 1 | some k in ["a", "x"]; v := input.a[k]}
ends_in_string contains v if { v := "text" }
ends_in_raw_string contains v if { v := `raw` }
destructuring if { [a, b] := [1, 2]; a == 1 }
under_not contains 1 if { not helper }
helper if { v := input.nope }
"""
GAP_RULES = ["plain", "from_rule", "from_function", "wildcard", "one_literal_body", "after_some", "in_every",
             "in_comprehension", "multi_line", "defined", "in_else", "object_comprehension", "ends_in_string",
             "ends_in_raw_string", "destructuring", "under_not"]
GAP_INPUT = '{"a": {"x": 1}}'


def rvm_answers(modules: list[tuple[str, str]], rules: list[str]) -> dict[str, Any]:
    entry_points = [f"data.gap.{rule}" for rule in rules]
    vm = regorus.Rvm()
    vm.load_program(regorus.Program.compile_from_modules("{}", modules, entry_points))
    vm.set_input_json(GAP_INPUT)
    return {rule: json.loads(vm.execute_entry_point(point)) for rule, point in zip(rules, entry_points, strict=True)}


def interpreter_answers(rules: list[str]) -> dict[str, Any]:
    engine = regorus.Engine()
    engine.add_policy("gap.rego", GAP_CASES)
    engine.set_input_json(GAP_INPUT)
    return {rule: json.loads(engine.eval_rule_as_json(f"data.gap.{rule}")) for rule in rules}


def test_guarded_rvm_answers_every_assignment_case_as_the_interpreter():
    assert rvm_answers(guard_assignments([("gap.rego", GAP_CASES)]), GAP_RULES) == interpreter_answers(GAP_RULES)


def test_the_gap_the_guard_mends_is_still_there():
    """If a regorus upgrade fixes the RVM, this fails: the guard in webhook/policy/rvm_guard.py can then go."""
    unguarded = rvm_answers([("gap.rego", GAP_CASES)], ["plain", "under_not"])
    assert unguarded == {"plain": [1], "under_not": []}
    assert interpreter_answers(["plain", "under_not"]) == {"plain": [], "under_not": [1]}


def test_guard_leaves_the_text_around_it_alone():
    guarded = dict(guard_assignments([("gap.rego", GAP_CASES)]))["gap.rego"]
    assert "plain contains 1 if { v := input.nope; v == v }" in guarded
    assert "one_literal_body := 1 if { v := input.nope; v == v }" in guarded
    assert "(等保2.0)" in guarded
    assert 'ends_in_string contains v if { v := "text"; v == v }' in guarded
    assert "destructuring if { [a, b] := [1, 2]; a == 1 }" in guarded


def sensitive(workload: dict[str, Any]) -> dict[str, Any]:
    """The workload labelled sensitive, so that the placement rules judge it too."""
    marked = copy.deepcopy(workload)
    marked.setdefault("metadata", {}).setdefault("labels", {})["vgate.io/data-classification"] = "sensitive"
    for task in marked.get("spec", {}).get("tasks") or []:
        task.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})[
            "vgate.io/data-classification"] = "sensitive"
    return marked


def workloads() -> list[tuple[str, dict[str, Any]]]:
    found = [*corpus_pods(), *corpus_volcano_jobs(), ("every-field Pod", fixture_pod())]
    for sample in sorted(POLICIES.glob("*/samples/*.yaml")):
        found.extend((str(sample), document) for document in yaml_documents(sample))
    return found


def test_rvm_and_interpreter_decide_every_workload_alike(engine, config):
    """Every corpus pod and Volcano Job, every sample, as submitted and as mutated, plain and sensitive,
    on CREATE and UPDATE: the same violations and warnings from both engines."""
    compared = 0
    for where, workload in workloads():
        for variant in (workload, sensitive(workload)):
            for operation in ("CREATE", "UPDATE"):
                mutated = admit(variant, config, engine, operation=operation).mutated
                for obj in (variant, mutated):
                    request = EngineInput.of(review(obj, operation=operation))
                    answer = engine.evaluate(request)
                    assert answer.engine == "rvm", f"{where} ({operation}): {answer.fallback}"  # not the fallback
                    assert answer.result == engine.evaluate_interpreted(request), f"{where} ({operation})"
                    compared += 1
    assert compared > 500


def big_volcano_job(tasks: int, containers: int) -> dict[str, Any]:
    """A sensitive Job beyond the RVM's 25,000-instruction budget with the full catalogue."""
    spec = {
        "containers": [
            {"name": f"c{i}", "image": "registry.example.com/app:1", "securityContext": {"privileged": True}}
            for i in range(containers)
        ]
    }
    return sensitive(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "big", "namespace": "ml-training"},
            "spec": {
                "minAvailable": 1,
                "queue": "training",
                "tasks": [
                    {"name": f"t{i}", "replicas": 1, "template": {"spec": copy.deepcopy(spec)}} for i in range(tasks)
                ],
            },
        }
    )


def test_requests_beyond_the_rvm_budget_are_answered_by_the_interpreter(engine):
    request = EngineInput.of(review(big_volcano_job(tasks=24, containers=4)))
    answer = engine.evaluate(request)
    assert answer.engine == "interpreter" and answer.fallback
    assert answer.result == engine.evaluate_interpreted(request)
    privileged = [v for v in answer.result.deny if v.rule == "security-privileged-container"]
    assert len(privileged) == 24 and all('containers "c0", "c1", "c2", "c3"' in v.message for v in privileged)


def test_a_request_over_the_budget_as_a_whole_is_answered_by_the_rvm_in_parts(engine):
    """Each part of the result (PART_SIZE rule packages) has a budget of its own."""
    request = EngineInput.of(review(big_volcano_job(tasks=8, containers=4)))
    answer = engine.evaluate(request)
    assert answer.engine == "rvm" and answer.fallback is None
    assert answer.result == engine.evaluate_interpreted(request)
    assert len([v for v in answer.result.deny if v.rule == "security-privileged-container"]) == 8


def test_a_set_the_rvm_cannot_compile_is_served_by_the_interpreter(tmp_path, config):
    policies = copy_policies(tmp_path / "policies")
    (policies / "walker").mkdir()
    (policies / "walker" / "policy.rego").write_text(
        "package vgate.rules.walker\n\nimport rego.v1\n\n"
        'deny contains {"rule": "walker", "msg": "a value is forbidden"} if {\n'
        '\twalk(input.request.object, [_, value])\n\tvalue == "forbidden"\n}\n'
    )
    engine = RegorusEngine(load_policy_set(policies), config.document)
    assert engine.name == "interpreter"
    assert engine.rvm_refusal and "walk" in engine.rvm_refusal
    answer = engine.evaluate(EngineInput.of(review(pod(labels={"x": "forbidden"}))))
    assert answer.engine == "interpreter" and answer.fallback == "the RVM cannot compile this policy set"
    assert [v.rule for v in answer.result.deny if v.level is None] == ["walker"]  # and the restricted checks


@pytest.fixture(scope="module")
def shipped_engine(config):
    return RegorusEngine(load_policy_set(POLICIES), config.document)


def test_the_shipped_catalogue_compiles_for_the_rvm(shipped_engine):
    assert shipped_engine.name == "rvm" and shipped_engine.rvm_refusal is None


def with_contexts(pod_context: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """The restricted pod with ``pod_context`` merged into its securityContext and ``container`` into its container."""
    spec = copy.deepcopy(RESTRICTED_SPEC)
    spec["securityContext"].update(pod_context)
    spec["containers"][0].update(container)
    return pod(**spec)


def denied(result: PolicyResult) -> set[str]:
    return {violation.rule for violation in result.deny}


def rvm_rules(engine: RegorusEngine, obj: dict[str, Any]) -> set[str]:
    answer = engine.evaluate(EngineInput.of(review(obj)))
    assert answer.engine == "rvm", answer.fallback
    return denied(answer.result)


@pytest.mark.parametrize("odd", [None, "spc_t", [], 0, {}])
def test_a_pods_odd_selinux_options_hide_no_containers_forbidden_type(engine, odd):
    """security-selinux skips the lookups of an empty seLinuxOptions: only of one equal to ``{}``. A
    pod-level value that is null or no object (a Volcano Job's template keeps what it is sent) must
    not make the rule undefined and so hide a container's forbidden type. (The interpreter refuses
    to judge such a value at all, answered per failureMode; the RVM, like OPA, judges it.)"""
    container = {"securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                     "seLinuxOptions": {"type": "spc_t"}}}
    assert "security-selinux" in rvm_rules(engine, with_contexts({"seLinuxOptions": odd}, container))
    assert "security-selinux" not in rvm_rules(engine, with_contexts({"seLinuxOptions": odd}, {}))


@pytest.mark.parametrize("odd", [None, "x", [], 0, {}])
def test_a_probe_that_is_no_object_hides_no_other_probes_host(engine, odd):
    """security-host-probes looks for a host only in the handlers a container sets, and only in those
    that are objects: an odd one has none, as a full path through it had none, and another's is found."""
    probes = {"livenessProbe": odd, "readinessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}}}
    assert "security-host-probes" in rvm_rules(engine, with_contexts({}, probes))
    alone = EngineInput.of(review(with_contexts({}, {"livenessProbe": odd})))
    for result in (engine.evaluate(alone).result, engine.evaluate_interpreted(alone)):  # no engine refuses to judge it
        assert "security-host-probes" not in denied(result)


def test_rvm_and_interpreter_agree_on_mixtures_of_the_samples(engine):
    """Pods and Jobs mixed from the samples' spec fields, labels, namespaces and queues (seeded):
    combinations no single sample has, where a divergence between the engines would hide."""
    rng = random.Random(20261202)
    specs = [spec for _, workload in workloads() for spec in _pod_specs(workload)]
    namespaces = ["web", "ml-training", "ml-inference", "batch", "team-a"]
    queues = [None, "default", "training", "batch", "no-such-queue"]
    compared = 0
    for case in range(400):
        spec = copy.deepcopy(rng.choice(specs))
        for _ in range(rng.randint(1, 3)):
            donor = rng.choice(specs)
            if donor:
                field = rng.choice(sorted(donor))
                spec[field] = copy.deepcopy(donor[field])
        labels = {"app": "mix"} | ({"vgate.io/data-classification": "sensitive"} if rng.random() < 0.5 else {})
        metadata: dict[str, Any] = {"name": f"mix-{case}", "namespace": rng.choice(namespaces), "labels": labels}
        queue = rng.choice(queues)
        if rng.random() < 0.5:
            if queue:
                metadata["annotations"] = {"scheduling.volcano.sh/queue-name": queue}
            workload = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
        else:
            tasks = [
                {
                    "name": f"t{i}",
                    "replicas": rng.randint(0, 3),
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": copy.deepcopy(rng.choice(specs) if i else spec),
                    },
                }
                for i in range(rng.randint(1, 3))
            ]
            workload = {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": metadata,
                "spec": {"minAvailable": rng.randint(1, 4), "tasks": tasks} | ({"queue": queue} if queue else {}),
            }
        request = EngineInput.of(review(workload, operation=rng.choice(["CREATE", "CREATE", "UPDATE"])))
        answer = engine.evaluate(request)
        assert answer.engine == "rvm" and answer.result == engine.evaluate_interpreted(request), f"case {case}"
        compared += 1
    assert compared == 400


def _pod_specs(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = workload.get("spec") or {}
    if workload.get("kind") == "Pod":
        return [spec]
    return [
        t["template"]["spec"] for t in spec.get("tasks") or [] if isinstance(t.get("template", {}).get("spec"), dict)
    ]


def test_a_config_map_volume_mid_swap_is_read_through_its_data_link(tmp_path):
    """The kubelet writes the new ..<timestamp> directory, swaps ..data to it, then removes the old
    one: in between both are there, and only the one ..data names is the policy set."""
    import shutil

    from webhook.policy.sources import load_policy_set

    from helpers import POLICIES

    volume = tmp_path / "policies"
    volume.mkdir()
    shutil.copytree(POLICIES, volume / "..2026_12_04_old")
    shutil.copytree(POLICIES, volume / "..2026_12_04_new")
    (volume / "..2026_12_04_new" / "network-no-external" / "policy.rego").unlink()  # the new set drops a rule
    (volume / "..data").symlink_to("..2026_12_04_new")
    for entry in (volume / "..data").iterdir():
        (volume / entry.name).symlink_to(f"..data/{entry.name}")
    loaded = load_policy_set(volume)
    assert not any("network-no-external/policy.rego" in path for path, _ in loaded.files)
    assert len(loaded.files) == len(load_policy_set(POLICIES).files) - 1
