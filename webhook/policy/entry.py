"""The generated entry module: the union of every rule package's decisions, by explicit reference.

Rules yield messages; the entry attaches each rule's id, derived from its package (the folder's
name), so the id is written once. Objects a rule yields (``{"msg", "level"}`` from a Pod Security
Standards check) get the id too, unless they carry their own ``rule``.

``policies/lib/main.rego`` (what OPA serves) iterates ``data.vgate.rules[_]``; regorus evaluates
every rule of a package reached that way. The entry names each package's ``deny`` and ``warn``
directly, and only where the package defines them (in an array, one undefined reference would
make the whole result undefined): the same result, ~30% cheaper in regorus.
"""

from __future__ import annotations

from .sources import PolicySet, decision_rules

ENTRY_PACKAGE = "vgate.entry"
ENTRY_RESULT = f"data.{ENTRY_PACKAGE}.result"
# The same result in parts of at most this many rule packages, each its own RVM entry point: a
# request that exceeds the RVM's instruction budget as a whole (a Volcano Job of many tasks) gets a
# budget per part before it is sent to the interpreter.
PART_SIZE = 4


def part_entries(policy_set: PolicySet) -> list[str]:
    """The entry points of the result's parts, in order."""
    count = -(-len(decision_rules(policy_set)) // PART_SIZE)
    return [f"data.{ENTRY_PACKAGE}.part_{i}" for i in range(count)]
ENTRY_FILE = "<vgate entry>"


def entry(policy_set: PolicySet) -> tuple[str, str]:
    """The entry module for ``policy_set``, as (file name, text), that both engines load beside it."""
    return ENTRY_FILE, entry_module(decision_rules(policy_set))


def entry_module(rules: dict[str, set[str]]) -> str:
    """Rego gathering each package's ``deny``/``warn`` by name, with its rule id, as main.rego does.

    One comprehension over explicit references: regorus spends ~15 us per rule body and per
    reference to an undefined rule, so this costs about half of one rule per package. The id is
    the package's last name with dashes (``vgate.rules.security_privileged_container`` ->
    ``security-privileged-container``), written here once for every rule, in a constant list beside
    the results: building an object per package on every evaluation cost ~5% of the catalogue.
    """
    def gather(kind: str, chosen: dict[str, set[str]], name: str) -> list[str]:
        packages = [package for package, kinds in sorted(chosen.items()) if kind in kinds]
        ids = [f'\t"{package.rsplit(".", 1)[1].replace("_", "-")}",' for package in packages]  # a line each:
        refs = [f"\t\tdata.{package}.{kind}," for package in packages]  # regorus refuses lines over 1,024
        return [f"{name}_ids := [", *ids, "]", "", f"{name}_results := [", *refs, "]", "",
                f"{name} := [violation |", f"\tsome i, results in {name}_results", "\tsome found in results",
                f"\tviolation := decision({name}_ids[i], found)", "]", ""]

    ordered = sorted(rules.items())
    parts: list[str] = []
    for index in range(0, len(ordered), PART_SIZE):
        chunk, part = dict(ordered[index:index + PART_SIZE]), f"part_{index // PART_SIZE}"
        parts += [*gather("deny", chunk, f"{part}_deny"), *gather("warn", chunk, f"{part}_warn"),
                  f'{part} := {{"deny": {part}_deny, "warn": {part}_warn}}', ""]
    return "\n".join([f"package {ENTRY_PACKAGE}", "", "import rego.v1", "", *gather("deny", rules, "deny"),
                      *gather("warn", rules, "warn"), 'result := {"deny": deny, "warn": warn}', "", *parts,
                      'decision(rule, found) := {"rule": rule, "msg": found} if is_string(found)', "",
                      'decision(rule, found) := object.union({"rule": rule}, found) if is_object(found)', "",
                      "# Anything else reaches the contract check as it is, and fails it there.",
                      "decision(_, found) := found if {", "\tnot is_string(found)", "\tnot is_object(found)", "}",
                      ""])
