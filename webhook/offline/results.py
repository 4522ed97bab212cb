"""Machine-readable results of `vgate test` and `vgate eval`, for CI systems: JSON, and JUnit XML.

JUnit is the one format every CI reads (GitLab, Jenkins, GitHub's test reporters): a
``<testsuites>`` of ``<testsuite>`` elements, each ``<testcase classname name file line>`` with a
``<failure message type>`` when it failed. `vgate test` gives one case per Rego test (suite
``rego``) and per sample manifest (suite ``samples``); `vgate eval` one per manifest, a denial or an
error being its failure (as `kyverno test` and gator count violations), warnings in ``system-out``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .eval_manifests import Verdict
from .policy_tests import SampleCheck, UnitTest


@dataclass
class Case:
    """One JUnit test case: what it is, where it comes from, and why it failed (if it did)."""

    suite: str
    classname: str
    name: str
    file: str = ""
    line: int | None = None
    failure: str | None = None
    failure_type: str = "failure"
    output: list[str] = field(default_factory=list)


def junit(cases: Iterable[Case]) -> str:
    """The cases as a JUnit XML document, one ``<testsuite>`` per suite, in the order first met."""
    suites: dict[str, list[Case]] = {}
    for case in cases:
        suites.setdefault(case.suite, []).append(case)
    root = ET.Element("testsuites", name="vgate", tests=str(sum(map(len, suites.values()))),
                      failures=str(sum(c.failure is not None for s in suites.values() for c in s)))
    for name, members in suites.items():
        suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(members)),
                              failures=str(sum(c.failure is not None for c in members)), errors="0", skipped="0")
        for case in members:
            attributes = {"classname": case.classname, "name": case.name, "file": case.file}
            if case.line is not None:
                attributes["line"] = str(case.line)
            element = ET.SubElement(suite, "testcase", {k: v for k, v in attributes.items() if v})
            if case.failure is not None:
                failure = ET.SubElement(element, "failure", message=case.failure.split("\n", 1)[0],
                                        type=case.failure_type)
                failure.text = case.failure
            if case.output:
                ET.SubElement(element, "system-out").text = "\n".join(case.output)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def unit_test_case(test: UnitTest) -> Case:
    package, _, name = test.rule.rpartition(".")
    return Case("rego", package, name, test.file, test.line,
                None if test.passed else f"{test.rule} failed at {test.file}:{test.line}: {test.error or 'false'}")


def sample_case(sample: SampleCheck, index: int) -> Case:
    path = Path(sample.file)
    denied = ", ".join(sample.denied_by) or "nothing"
    why = f"expected {sample.expected}, denied by {denied}"
    if not sample.engines_agree:
        why += " (the RVM and the interpreter decide it differently)"
    return Case("samples", path.parent.parent.name, f"{path.name}#{index}" if index else path.name, sample.file,
                None, None if sample.passed else why, output=[why])


def sample_cases(samples: list[SampleCheck]) -> list[Case]:
    """A case per sample manifest; a file's second and later documents are numbered."""
    seen: dict[str, int] = {}
    cases = []
    for sample in samples:
        index = seen.get(sample.file, 0)
        seen[sample.file] = index + 1
        cases.append(sample_case(sample, index))
    return cases


def verdict_case(verdict: Verdict) -> Case:
    decision = verdict.result.validation.decision
    denials = [f"[{o.rule}] {o.message}" for o in verdict.result.validation.rules("deny")]
    error = verdict.result.validation.error
    failure = None
    if not decision.allowed:
        failure = "\n".join(denials) or decision.message or error or "denied"
    return Case("vgate eval", verdict.source, verdict.title, verdict.source.split("#", 1)[0], None, failure,
                "error" if error and not denials else "denied", list(decision.warnings))


def results_json(tests: list[UnitTest], samples: list[SampleCheck],
                      coverage: dict[str, float]) -> dict[str, Any]:
    """`vgate test -o json`: every test and sample, coverage per file, and the overall outcome."""
    return {
        "passed": bool(tests) and all(t.passed for t in tests) and all(s.passed for s in samples),
        "tests": [{"rule": t.rule, "file": t.file, "line": t.line, "passed": t.passed, "error": t.error or None}
                  for t in tests],
        "samples": [{"file": s.file, "expected": s.expected, "deniedBy": list(s.denied_by), "passed": s.passed,
                     "enginesAgree": s.engines_agree} for s in samples],
        "coverage": {path: round(percent, 1) for path, percent in sorted(coverage.items())},
    }


def results_text(tests: list[UnitTest], samples: list[SampleCheck], coverage: dict[str, float],
                 verbose: bool) -> list[str]:
    """`vgate test`'s lines for a person: failures (everything with ``verbose``), coverage, the totals."""
    lines = []
    for test in tests:
        if verbose or not test.passed:
            detail = "" if test.passed else f" ({test.file}:{test.line}{': ' + test.error if test.error else ''})"
            lines.append(f"{'PASS' if test.passed else 'FAIL'} {test.rule}{detail}")
    for sample in samples:
        if verbose or not sample.passed:
            denied = ", ".join(sample.denied_by) or "nothing"
            disagree = "" if sample.engines_agree else " (the RVM and the interpreter decide it differently)"
            lines.append(f"{'PASS' if sample.passed else 'FAIL'} sample {sample.file}: expected {sample.expected}, "
                         f"denied by {denied}{disagree}")
    lines.append("-" * 72)
    lines += [f"coverage {percent:5.1f}% {path}" for path, percent in sorted(coverage.items())]
    lines.append(f"tests: {sum(t.passed for t in tests)}/{len(tests)} passed; "
                 f"samples: {sum(s.passed for s in samples)}/{len(samples)} passed")
    return lines
