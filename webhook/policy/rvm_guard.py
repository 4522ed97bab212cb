"""Compile a policy set to regorus' RVM bytecode, mended for the RVM's one known semantic gap.

regorus 0.13's RVM does not stop a query at ``x := <undefined>``: the query goes on with ``x``
undefined, where OPA and the interpreter stop (``deny contains 1 if { v := input.nope }``
yields ``{1}`` on the RVM, ``{}`` on both of them). So a deny could fire wrongly, or a helper used
under ``not`` succeed wrongly and a deny fail to fire. The copy the RVM compiles gets, after
every ``x := ...`` in a query, the check ``x == x``, which is undefined exactly when ``x`` is
(comparisons handle undefined correctly on the RVM). The files on disk are untouched: the
interpreter, ``vgate test`` and OPA read them as written; ``tests/test_rvm.py`` holds both
engines to the same answers.

A second gap is not mended here but avoided in the policies: a comprehension with no iteration
of its own that reads a variable of the enclosing query (``[x | count(names) > 0]``) is
undefined on the RVM when empty, where the interpreter and OPA give ``[]``. The Pod Security
Standards rules use total helper functions instead; ``vgate test`` compares both engines on
every sample and flags a rule that falls into it. And a rule body whose first expression is a
constant condition before any iteration (it was ``not at_least(19)``, a helper since removed) made
the RVM run ~100x longer: the rules iterate first.
"""

from __future__ import annotations

import json
from typing import Any

import regorus

_Edit = tuple[int, int, int, bytes]  # start, end (byte offsets), order among edits at one offset, new bytes


def compile_program(modules: list[tuple[str, str]], data: dict[str, Any], entry_rules: list[str]) -> bytes:
    """The guarded modules as RVM bytecode for ``entry_rules``, serialized: bytes any thread can load.

    Raises what regorus raises when the RVM compiler refuses a construct the interpreter accepts.
    """
    program = regorus.Program.compile_from_modules(json.dumps(data), guard_assignments(modules), entry_rules)
    return bytes(program.serialize_binary())


def guard_assignments(modules: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each module with ``; x == x`` after every ``x := ...`` of every query (rule bodies,
    comprehensions, ``every``); a one-literal rule body so guarded is wrapped in braces."""
    parser = regorus.Engine()
    for path, text in modules:
        parser.add_policy(path, text)
    trees = {tree["source"]["file"]: tree["ast"] for tree in json.loads(parser.get_ast_as_json())}
    guarded = []
    for path, text in modules:
        source = text.encode("utf-8")
        edits: list[_Edit] = []
        _collect(trees[path], source, edits, in_rule_body=False)
        for start, end, _, new in sorted(edits, reverse=True):
            source = source[:start] + new + source[end:]
        guarded.append((path, source.decode("utf-8")))
    return guarded


def _collect(node: Any, source: bytes, edits: list[_Edit], *, in_rule_body: bool) -> None:
    if isinstance(node, list):
        for item in node:
            _collect(item, source, edits, in_rule_body=False)
        return
    if not isinstance(node, dict):
        return
    if isinstance(node.get("stmts"), list) and "span" in node:
        _guard_query(node, source, edits, in_rule_body)
    for key, value in node.items():  # a rule body is the node with "is_else"; its query may lack braces
        _collect(value, source, edits, in_rule_body=key == "query" and "is_else" in node)


def _guard_query(query: dict[str, Any], source: bytes, edits: list[_Edit], in_rule_body: bool) -> None:
    guards = 0
    for stmt in query["stmts"]:
        target = _assigned_var(stmt)
        if target is None:
            continue
        name, span = target
        if name == "_":  # `_ := x` cannot be compared: give it a name of its own
            name = f"__vgate_assigned_{span['start']}"
            edits.append((span["start"], span["end"], 0, name.encode()))
        end = stmt["span"]["end"]
        if source[end:end + 1] in (b'"', b"`"):
            end += 1  # regorus' span of a string literal stops before its closing quote
        edits.append((end, end, 0, f"; {name} == {name}".encode()))
        guards += 1
    span = query["span"]
    if guards and in_rule_body and source[span["start"]:span["start"] + 1] != b"{":
        edits.append((span["start"], span["start"], -1, b"{ "))
        edits.append((span["end"], span["end"], 1, b" }"))


def _assigned_var(stmt: dict[str, Any]) -> tuple[str, dict[str, int]] | None:
    """The variable and its span if the statement is ``var := expr``; destructuring needs no guard."""
    expr = stmt.get("literal", {}).get("Expr", {}).get("expr", {})
    assign = expr.get("AssignExpr") if isinstance(expr, dict) else None
    if not assign or assign.get("op") != "ColEq" or "Var" not in assign.get("lhs", {}):
        return None
    var = assign["lhs"]["Var"]
    return var["value"], var["span"]
