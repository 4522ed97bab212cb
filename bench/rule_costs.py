"""What each rule package costs in the catalogue on regorus' RVM: a profile policy authors can re-run.

    python bench/rule_costs.py --rounds 11 --calls 100

It compiles the catalogue as the evaluator child does (``rvm_guard``, the generated entry), and
once more with each rule package alone in the entry, and evaluates bench/load.py's 4.4 KB sensitive
pod with each (or ``--input``, an AdmissionReview's JSON). Each variant runs ``--calls`` evaluations
per round, in a new random order each round. A variant's time is the lowest per-call thread CPU of
its rounds: on a shared host a round's median can be twice its minimum.

A package's row is what it costs alone, less the entry with no package: its own rule bodies and
every helper it reaches. Helpers that several packages share (``container_groups``, ``judged_specs``)
are computed once per evaluation in the whole catalogue, so the rows add up to more than the whole.
Leaving one package out of the whole counts it without them, but on a busy host identical
programs' times move by 10-15% between rounds, more than most packages cost against a whole of ~400
µs; alone, a package's noise is that share of its own few µs. The ``input`` row is
``set_input_json`` of the document, which every evaluation pays once, before any rule.

    python bench/rule_costs.py --leave-one-out --rounds 25

gives that other view: what the whole saves without each package (its bodies, and the helpers no
other package needs), beside three identical copies of the whole, whose spread is the noise a row
must clear. On a quiet hour the copies agree within a few µs and two runs within ~2 µs per package;
on a busy one, read the alone rows.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from webhook.files.config_file import DEFAULT_CONFIG_PATH, load_config  # noqa: E402
from webhook.policy import rvm_guard  # noqa: E402
from webhook.policy.entry import ENTRY_FILE, ENTRY_RESULT, entry_module  # noqa: E402
from webhook.policy.regorus_engine import loaded_rvm  # noqa: E402
from webhook.policy.sources import PolicySet, decision_rules, load_policy_set  # noqa: E402

from load import admission_review, realistic_pod  # noqa: E402

WHOLE, NONE = "whole catalogue", "entry with no package"
COPIES = 3  # identical wholes in --leave-one-out: their spread is the noise floor of its rows


def loaded_vm(policy_set: PolicySet, rules: dict[str, set[str]], data: dict[str, Any], document: str) -> Any:
    """An RVM with the catalogue limited to ``rules``' packages compiled in, and ``document`` as its input."""
    program = rvm_guard.compile_program([*policy_set.files, (ENTRY_FILE, entry_module(rules))], data, [ENTRY_RESULT])
    vm = loaded_rvm(program, data)
    vm.set_input_json(document)
    vm.execute_entry_point(ENTRY_RESULT)
    return vm


def variants(policy_set: PolicySet, data: dict[str, Any], document: str) -> dict[str, Any]:
    """The whole catalogue, each package alone, and no package at all."""
    rules = decision_rules(policy_set)
    found = {WHOLE: loaded_vm(policy_set, rules, data, document), NONE: loaded_vm(policy_set, {}, data, document)}
    for package, kinds in sorted(rules.items()):
        found[package] = loaded_vm(policy_set, {package: kinds}, data, document)
    return found


def leave_one_out_variants(policy_set: PolicySet, data: dict[str, Any], document: str) -> dict[str, Any]:
    """COPIES identical wholes, and the whole without each package in turn."""
    rules = decision_rules(policy_set)
    found = {f"{WHOLE} ({copy + 1})": loaded_vm(policy_set, rules, data, document) for copy in range(COPIES)}
    for package in sorted(rules):
        found[package] = loaded_vm(policy_set, {p: kinds for p, kinds in rules.items() if p != package}, data, document)
    return found


def lowest_per_call(timed: dict[str, Callable[[], Any]], rounds: int, calls: int) -> dict[str, float]:
    """Each call's lowest per-call thread CPU (µs) over ``rounds`` rounds, the calls in random order each round."""
    times: dict[str, list[float]] = {name: [] for name in timed}
    shuffled = random.Random(39)
    for _ in range(rounds):
        names = list(timed)
        shuffled.shuffle(names)
        for name in names:
            call = timed[name]
            started = time.thread_time()
            for _ in range(calls):
                call()
            times[name].append((time.thread_time() - started) / calls * 1e6)
    return {name: min(spent) for name, spent in times.items()}


def table(lowest: dict[str, float]) -> list[tuple[str, float, float]]:
    """Rows of (what, µs, share of the whole catalogue's evaluation): each package alone, less the empty entry."""
    whole, floor = lowest[WHOLE], lowest[NONE]
    rows = [(name, spent - floor) for name, spent in lowest.items() if name not in (WHOLE, NONE, "input")]
    rows.sort(key=lambda row: -row[1])
    ordered = [(WHOLE, whole), (NONE, floor), ("input (set_input_json)", lowest["input"]), *rows]
    return [(name, spent, spent / whole) for name, spent in ordered]


def leave_one_out_table(lowest: dict[str, float]) -> list[tuple[str, float, float]]:
    """Rows of (what, µs, share): the copies of the whole, then what the whole saves without each package."""
    wholes = {name: spent for name, spent in lowest.items() if name.startswith(WHOLE)}
    whole = min(wholes.values())
    saved = [(name, whole - spent) for name, spent in lowest.items() if name not in wholes]
    rows = sorted(saved, key=lambda row: -row[1])
    return [(name, spent, spent / whole) for name, spent in [*sorted(wholes.items()), *rows]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=11, help="rounds, each variant once per round in random order")
    parser.add_argument("--calls", type=int, default=100, help="evaluations per variant and round")
    parser.add_argument("--policies", type=Path, default=ROOT / "policies", help="the policy folder")
    parser.add_argument("--input", type=Path, help="an AdmissionReview's JSON (default: bench/load.py's pod)")
    parser.add_argument("--results", type=Path, help="write the rows to this JSON file too")
    parser.add_argument("--leave-one-out", action="store_true",
                        help="what the whole saves without each package, beside identical copies of the whole")
    args = parser.parse_args()
    document = args.input.read_text() if args.input else admission_review(realistic_pod()).decode()
    data = {"vgate": {"config": load_config(str(DEFAULT_CONFIG_PATH)).document}}  # as RegorusEngine gives it
    build = leave_one_out_variants if args.leave_one_out else variants
    vms = build(load_policy_set(args.policies), data, document)
    timed: dict[str, Callable[[], Any]] = {name: partial(vm.execute_entry_point, ENTRY_RESULT)
                                           for name, vm in vms.items()}
    if args.leave_one_out:
        rows = leave_one_out_table(lowest_per_call(timed, args.rounds, args.calls))
    else:
        timed["input"] = partial(vms[WHOLE].set_input_json, document)
        rows = table(lowest_per_call(timed, args.rounds, args.calls))
    print(f"{'':48s} {'µs':>7s} {'share':>6s}")
    for name, spent, share in rows:
        print(f"{name:48s} {spent:7.1f} {share:6.1%}")
    if args.results:
        args.results.write_text(json.dumps([{"what": n, "us": round(s, 1)} for n, s, _ in rows], indent=1) + "\n")


if __name__ == "__main__":
    main()
