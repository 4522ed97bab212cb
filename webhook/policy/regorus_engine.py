"""Policy engines: one small interface, the in-process regorus engine behind it.

The decision contract (README, "Writing policies"): every rule package ``vgate.rules.<name>``
yields ``deny`` and ``warn`` sets of objects ``{"rule": <id>, "msg": <text>}``; the shipped
``policies/lib/main.rego`` gathers them into ``data.vgate.main.result = {"deny": [...],
"warn": [...]}``. The webhook evaluates that one rule with the AdmissionReview as ``input`` and
the gateway config as ``data.vgate.config``, so the same files load unchanged into OPA.

In process, regorus evaluates ``data.vgate.entry.result`` instead: the same union, generated at
load time with one explicit reference per rule package. regorus evaluates every rule of a package
reached through ``data.vgate.rules[_]``; naming ``deny`` and ``warn`` directly costs ~30% less.

Two regorus engines serve it. The RVM (regorus' compiled bytecode) answers requests 5-8x faster
than the tree-walking interpreter, but it refuses some Rego (e.g. ``walk``, ``with``), stops at a
budget of 25,000 instructions (a Volcano Job of 16 tasks x 4 containers reaches it) and, like
OPA's default non-strict mode, turns builtin errors into undefined. So: the RVM answers when it
can; the interpreter answers the requests it cannot, and the whole set when the RVM cannot
compile it. ``vgate test`` runs the unit tests on the interpreter and checks that both engines
decide every sample alike.

regorus holds the GIL while it evaluates, so evaluation scales with processes, not threads; and
an engine may only be used by the thread that built it, so each thread keeps its own.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson
import regorus

from . import rvm_guard
from ..core.errors import EvaluationError, PolicyError
from ..server.metrics import EVALUATIONS

log = logging.getLogger(__name__)

ENTRY_RULE = "data.vgate.main.result"  # what OPA serves: policies/lib/main.rego
_ENTRY_PACKAGE = "vgate.entry"          # the same union, generated with explicit references
_ENTRY_RESULT = f"data.{_ENTRY_PACKAGE}.result"
_ENTRY_FILE = "<vgate entry>"
_RULE_PACKAGE = re.compile(r"^data\.vgate\.rules\.(\w+)$")
PACKAGE_LINE = re.compile(r"^package\s+([\w.]+)", re.MULTILINE)
_DECISION_HEAD = re.compile(r"^(deny|warn)\s+contains\b", re.MULTILINE)
_LOCATION = re.compile(r"-->\s*(?P<file>.+?):(?P<line>\d+):(?P<col>\d+)")
_REASON = re.compile(r"^error:\s*(?P<reason>.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Violation:
    """One rule result: which rule, what it found and how to fix it."""

    rule: str
    message: str


@dataclass(frozen=True)
class PolicyResult:
    deny: tuple[Violation, ...]
    warn: tuple[Violation, ...]


@dataclass(frozen=True)
class PolicySet:
    """The Rego sources of a policy directory and their sha256 revision."""

    root: Path
    files: tuple[tuple[str, str], ...]  # (path, text), sorted by path
    revision: str


class PolicyEngine(Protocol):
    """What the webhook needs from any engine, in-process or remote."""

    revision: str
    name: str  # which engine answers: "rvm", "interpreter" or "opa"

    def evaluate(self, input_json: str) -> PolicyResult:
        """Evaluate the decision rule for one AdmissionReview given as JSON text."""
        ...


def load_policy_set(root: str | Path, *, include_tests: bool = False) -> PolicySet:
    """Read every ``.rego`` file under ``root``; unit tests (``*_test.rego``) only when asked."""
    root = Path(root)
    if not root.is_dir():
        raise PolicyError(str(root), None, "policy directory does not exist")
    paths = sorted(p for p in root.rglob("*.rego") if include_tests or not p.name.endswith("_test.rego"))
    if not paths:
        raise PolicyError(str(root), None, "no .rego files found")
    files = tuple((str(p), p.read_text(encoding="utf-8")) for p in paths)
    digest = hashlib.sha256()
    for path, text in files:
        digest.update(str(Path(path).relative_to(root)).encode() + b"\0" + text.encode() + b"\0")
    return PolicySet(root, files, digest.hexdigest())


def compile_engine(policy_set: PolicySet, data: dict[str, Any]) -> regorus.Engine:
    """Parse every file into one engine with ``data``; raise PolicyError with file and line."""
    engine = regorus.Engine()
    for path, text in policy_set.files:
        try:
            engine.add_policy(path, text)
        except RuntimeError as exc:
            raise policy_error(exc, path) from None
    engine.add_data_json(json.dumps(data))
    engine.add_policy(*_entry(policy_set))
    return engine


def compile_program(policy_set: PolicySet, data: dict[str, Any]) -> bytes:
    """The policy set and its entry as RVM bytecode (see rvm_guard.py); PolicyError if the RVM refuses it."""
    try:
        return rvm_guard.compile_program([*policy_set.files, _entry(policy_set)], data, _ENTRY_RESULT)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - pyo3's PanicException is a BaseException
        raise policy_error(exc, _ENTRY_FILE) from None


def _entry(policy_set: PolicySet) -> tuple[str, str]:
    """The generated entry module, as (file name, text), that both engines load beside the files."""
    return _ENTRY_FILE, entry_module(_decision_rules(policy_set))


def _decision_rules(policy_set: PolicySet) -> dict[str, set[str]]:
    """Which of ``deny``/``warn`` each rule package defines, read from the sources.

    The generated entry must name only rules that exist: in an array, one undefined reference
    would make the whole result undefined.
    """
    found: dict[str, set[str]] = {}
    for _, text in policy_set.files:
        package = PACKAGE_LINE.search(text)
        if package and _RULE_PACKAGE.match("data." + package.group(1)) and not package.group(1).endswith("_test"):
            found.setdefault(package.group(1), set()).update(_DECISION_HEAD.findall(text))
    return found


def entry_module(rules: dict[str, set[str]]) -> str:
    """Rego gathering each package's ``deny``/``warn`` by name, as main.rego does for all of them.

    One comprehension over explicit references: regorus spends ~15 us per rule body and per
    reference to an undefined rule, so this costs about half of one rule per package.
    """
    def gather(kind: str) -> list[str]:
        refs = [f"\t\tdata.{package}.{kind}," for package, kinds in sorted(rules.items()) if kind in kinds]
        return [f"{kind}_results := [", *refs, "]", "",
                f"{kind} := [violation | some results in {kind}_results; some violation in results]", ""]

    return "\n".join([f"package {_ENTRY_PACKAGE}", "", "import rego.v1", "", *gather("deny"), *gather("warn"),
                      'result := {"deny": deny, "warn": warn}', ""])


def policy_error(exc: Exception, default_file: str) -> PolicyError:
    """Turn a regorus error (with its Rust backtrace) into file, line and a one-line reason."""
    text = str(exc).split("Stack backtrace:")[0].strip()
    location = _LOCATION.search(text)
    reason = _REASON.search(text)
    return PolicyError(
        location.group("file") if location else default_file,
        int(location.group("line")) if location else None,
        reason.group("reason").strip() if reason else text.splitlines()[0] if text else "invalid policy",
    )


# Each thread's engines, keyed by the RegorusEngine they belong to. Module level, so a regorus
# engine is only ever dropped by the thread that built it: a RegorusEngine replaced by a reload is
# dropped from each thread's table by that thread, on its next evaluation.
_thread_engines = threading.local()


class RegorusEngine:
    """In-process evaluation: the RVM where it can, the interpreter where it cannot.

    The policy set is compiled once here (RVM bytecode, and a first interpreter parse that
    surfaces evaluation-time errors such as unknown functions); each thread that evaluates then
    loads its own copies, because regorus objects are bound to the thread that made them.
    """

    def __init__(self, policy_set: PolicySet, config_document: dict[str, Any]) -> None:
        self.revision = policy_set.revision
        self._policy_set = policy_set
        self._data = {"vgate": {"config": config_document}}
        # Parse and run once with the interpreter first: it names the file and line of errors the
        # RVM reports less well, including those found only at evaluation (an unsafe variable).
        try:
            parse_result(_ThreadEngines(policy_set, self._data, None).interpret("{}"))
        except (KeyboardInterrupt, SystemExit, PolicyError):
            raise
        except BaseException as exc:  # noqa: BLE001 - pyo3's PanicException is a BaseException
            raise policy_error(exc, ENTRY_RULE) from None
        self.rvm_refusal: str | None = None
        self._program: bytes | None = None
        try:
            self._program = compile_program(policy_set, self._data)
        except PolicyError as refusal:
            self.rvm_refusal = str(refusal)
            log.warning("the RVM cannot compile this policy set, so the interpreter serves it (5-8x slower): %s",
                        refusal)
        self.name = "rvm" if self._program else "interpreter"
        self.evaluate("{}")

    def evaluate(self, input_json: str) -> PolicyResult:
        """The RVM's answer, or the interpreter's when the RVM has none (refused, budget, undefined)."""
        engines = self._engines_for_this_thread()
        if engines.vm is not None:
            answer = engines.run_vm(input_json)
            if answer is not None:
                EVALUATIONS.labels("rvm").inc()
                return parse_result(answer)
        EVALUATIONS.labels("interpreter").inc()
        return self.evaluate_interpreted(input_json)

    def evaluate_interpreted(self, input_json: str) -> PolicyResult:
        """The interpreter's answer alone: strict about builtin errors and conflicts."""
        return parse_result(self._engines_for_this_thread().run_interpreter(input_json))

    def _engines_for_this_thread(self) -> _ThreadEngines:
        table: dict[int, tuple[weakref.ref[RegorusEngine], _ThreadEngines]] = (
            _thread_engines.__dict__.setdefault("table", {}))
        for key in [k for k, (owner, _) in table.items() if owner() is None]:
            del table[key]  # engines of replaced policy sets, dropped by the thread that built them
        entry = table.get(id(self))
        if entry is None or entry[0]() is not self:
            entry = table[id(self)] = (weakref.ref(self), _ThreadEngines(self._policy_set, self._data, self._program))
        return entry[1]


class _ThreadEngines:
    """One thread's RVM (loaded from the bytecode, ~0.3 ms) and interpreter (parsed on first need, ~1 ms)."""

    def __init__(self, policy_set: PolicySet, data: dict[str, Any], program: bytes | None) -> None:
        self._policy_set = policy_set
        self._data = data
        self._interpreter: Any = None
        self.vm: Any = None
        if program is not None:
            loaded, _ = regorus.Program.deserialize_binary(program)
            self.vm = regorus.Rvm()
            self.vm.load_program(loaded)
            self.vm.set_data_json(json.dumps(data))

    def run_vm(self, input_json: str) -> dict[str, Any] | None:
        """The RVM's result object, or None when it stopped (instruction budget) or found it undefined."""
        try:
            self.vm.set_input_json(input_json)
            answer = orjson.loads(self.vm.execute())
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - pyo3's PanicException is a BaseException
            log.info("the interpreter answers a request the RVM could not: %s", policy_error(exc, _ENTRY_RESULT).reason)
            return None
        return answer if isinstance(answer, dict) else None

    def run_interpreter(self, input_json: str) -> Any:
        """The interpreter's result; an EvaluationError with file, line and reason if it fails."""
        try:
            return self.interpret(input_json)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - regorus panics raise pyo3's PanicException (a BaseException)
            raise EvaluationError(str(policy_error(exc, ENTRY_RULE))) from None

    def interpret(self, input_json: str) -> Any:
        """The interpreter's result, or regorus' own exception (PolicyError if a file does not parse)."""
        if self._interpreter is None:
            self._interpreter = compile_engine(self._policy_set, self._data)
        self._interpreter.set_input_json(input_json)
        return json.loads(self._interpreter.eval_rule_as_json(_ENTRY_RESULT))


def parse_result(result: Any) -> PolicyResult:
    """Check the decision contract; a policy that breaks it is an evaluation error."""
    if not isinstance(result, dict):
        raise EvaluationError(f"{ENTRY_RULE} must be an object with deny and warn, got {type(result).__name__}")
    return PolicyResult(_violations(result, "deny"), _violations(result, "warn"))


def _violations(result: dict[str, Any], key: str) -> tuple[Violation, ...]:
    items = result.get(key, [])
    if not isinstance(items, list):
        raise EvaluationError(f"{ENTRY_RULE}.{key} must be a set of objects")
    violations = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("rule"), str) or not isinstance(item.get("msg"), str):
            raise EvaluationError(f"{ENTRY_RULE}.{key} holds {item!r}: each result needs string fields rule and msg")
        violations.append(Violation(item["rule"], item["msg"]))
    return tuple(sorted(set(violations), key=lambda v: (v.rule, v.message)))
