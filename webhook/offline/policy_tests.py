"""`vgate test`: run the Rego unit tests with coverage, and every rule's samples.

Unit tests are the ``test_*`` rules of ``*_test.rego`` files, evaluated like `opa test` by the
regorus interpreter (the RVM has no ``with``): a test passes when its rule is true. Samples are
the manifests in ``<rule>/samples/``: an ``allowed-*`` sample must pass the whole admission path,
a ``denied-*`` one must be denied by exactly the rule whose folder holds it (the folder name is
the rule id), and the RVM that serves requests must decide it as the interpreter does. A layered
rule, whose denial always comes with another's (it still denies when that one is set to warn),
names the other in its sample's first line: ``# also denied by: placement-encrypted-memory``. A
sample whose comments say ``# update by: <user>`` is judged as that user's UPDATE of the document
before it of the same kind and name (a node relabelling itself), not as a CREATE.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..core.config import Config
from ..core.contract import EngineInput
from ..core.errors import EvaluationError
from ..policy.regorus_engine import RegorusEngine, compile_engine, policy_error
from ..policy.sources import load_policy_set, package_of, test_rules
from .admit import OfflineResult, admit, admit_binding, is_binding, review_for
from .chain.model import Cluster


@dataclass(frozen=True)
class UnitTest:
    rule: str       # data.<package>.<test>
    file: str
    line: int
    passed: bool
    error: str = ""


@dataclass(frozen=True)
class SampleCheck:
    file: str
    expected: str   # "allowed" or the rule id expected to deny
    denied_by: tuple[str, ...]
    passed: bool
    engines_agree: bool = True


def run_unit_tests(policy_dir: str | Path, config: Config) -> tuple[list[UnitTest], dict[str, float]]:
    """Every test's outcome, and line coverage (percent) of each policy file that is not a test."""
    policy_set = load_policy_set(policy_dir, include_tests=True)
    engine = compile_engine(policy_set, {"vgate": {"config": config.document}})
    engine.set_enable_coverage(True)
    engine.set_input_json("{}")
    results = []
    for path, text in policy_set.files:
        package = package_of(text)
        if not path.endswith("_test.rego") or package is None:
            continue
        for name, line in test_rules(text):
            rule = f"data.{package}.{name}"
            results.append(_run_one(engine, rule, path, line))
    coverage = {}
    for entry in json.loads(engine.get_coverage_report_as_json())["files"]:
        if not entry["path"].endswith("_test.rego") and not entry["path"].startswith("<"):
            covered, missed = len(entry["covered"]), len(entry["not_covered"])
            coverage[entry["path"]] = 100.0 * covered / (covered + missed) if covered + missed else 100.0
    return results, coverage


def _run_one(engine: Any, rule: str, path: str, line: int) -> UnitTest:
    try:
        outcome = json.loads(engine.eval_rule_as_json(rule))
    except RuntimeError as exc:
        return UnitTest(rule, path, line, False, policy_error(exc, path).reason)
    return UnitTest(rule, path, line, outcome is True, "" if outcome is True else f"result: {outcome}")


def check_samples(policy_dir: str | Path, config: Config) -> list[SampleCheck]:
    """Walk every rule folder's samples through the modelled admission chain (the API server's
    defaults and plugins, vgate's mutation), then validation, as a cluster would deliver them.

    A sample's last document is the one judged; the documents before it are its setup, in order
    (Namespaces and Nodes it is judged among, Pods a Binding names, Bindings that place them), and
    each of those must be admitted.
    """
    policy_dir = Path(policy_dir)
    engine = RegorusEngine(load_policy_set(policy_dir), config.document)
    checks = []
    for sample in sorted(policy_dir.glob("*/samples/*.yaml")):
        rule_id = sample.parent.parent.name
        expected = "allowed" if sample.name.startswith("allowed") else rule_id
        denied_as_expected = () if expected == "allowed" else tuple(sorted({rule_id, *also_denied_by(sample)}))
        cluster = Cluster.build(config)
        text = sample.read_text()
        *setup, judged = [manifest for manifest in yaml.safe_load_all(text) if manifest]
        refused = [_judge_in(cluster, manifest, config, engine) for manifest in setup if not cluster.learn(manifest)]
        result = _judge_in(cluster, judged, config, engine, **as_update(text, setup, judged))
        denied_by = tuple(sorted({o.rule for o in result.validation.rules("deny")}))
        passed = denied_by == denied_as_expected and not result.validation.error
        passed = passed and all(r.validation.decision.allowed for r in refused)
        agree = bool(result.validation.error) or _engines_agree(engine, result)  # an error fails it anyway
        checks.append(SampleCheck(str(sample), expected, denied_by, passed and agree, agree))
    return checks


def as_update(text: str, setup: list[dict[str, Any]], judged: dict[str, Any]) -> dict[str, Any]:
    """The review options of a sample that says ``# update by: <user>``: that user's UPDATE of the last
    setup document of the judged one's kind and name; none for a CREATE."""
    found = re.search(r"^# update by: (\S+)$", text, re.MULTILINE)
    if found is None:
        return {}
    same = [m for m in setup if (m.get("kind"), (m.get("metadata") or {}).get("name")) ==
            (judged.get("kind"), (judged.get("metadata") or {}).get("name"))]
    return {"operation": "UPDATE", "user": found[1], "old_object": same[-1] if same else None}


def _judge_in(cluster: Cluster, manifest: dict[str, Any], config: Config, engine: RegorusEngine,
              **review_options: Any) -> OfflineResult:
    """Admit one document in the cluster its sample builds up: an admitted Pod or PodGroup is kept."""
    if is_binding(manifest):
        return admit_binding(manifest, config, engine, (), cluster)
    result = admit(manifest, config, engine, cluster=cluster, **review_options)
    if result.validation.decision.allowed:
        cluster.remember(result.mutated)
    return result


def also_denied_by(sample: Path) -> list[str]:
    first = sample.read_text().split("\n", 1)[0]
    marker = "# also denied by:"
    return [rule.strip() for rule in first[len(marker):].split(",")] if first.startswith(marker) else []


def _engines_agree(engine: RegorusEngine, result: OfflineResult) -> bool:
    """Whether the engine that serves requests and the interpreter decide what was judged alike."""
    request = EngineInput.of(result.evaluated or review_for(result.mutated))
    try:
        return engine.evaluate(request).result == engine.evaluate_interpreted(request)
    except EvaluationError:
        return False
