"""In-process evaluation with regorus: its RVM where it can, its interpreter where it cannot.

In process, regorus evaluates ``data.vgate.entry.result`` (``entry.py``): the union of the rule
packages' decisions that ``policies/lib/main.rego`` gives OPA, generated with explicit references.

Two regorus engines serve it. The RVM (regorus' compiled bytecode) answers requests 5-8x faster
than the tree-walking interpreter, but it refuses some Rego (e.g. ``walk``, ``with``), stops at a
budget of 25,000 instructions (a Volcano Job of 16 tasks x 4 containers reaches it) and, like
OPA's default non-strict mode, turns builtin errors into undefined. So: the RVM answers when it
can (past its instruction budget, in parts of a few rule packages, each with a budget of its
own); the interpreter answers the requests it cannot, and the whole set when the RVM cannot
compile it. Each Evaluation says which answered (and why the RVM did not); the server counts and
logs that. ``vgate test`` runs the unit tests on the interpreter and checks that both engines
decide every sample alike.

regorus holds the GIL while it evaluates, so evaluation scales with processes, not threads; and
an engine may only be used, and dropped, by the thread that built it, so each thread keeps its
own in a module-level table (see ``_thread_engines``).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import weakref
from typing import Any

import orjson
import regorus

from ..core.contract import ENTRY_RULE, EngineInput, Evaluation, PolicyResult, parse_result
from ..core.errors import EvaluationError, PolicyError
from . import rvm_guard
from .entry import ENTRY_FILE, ENTRY_RESULT, entry, part_entries
from .sources import PolicySet

log = logging.getLogger(__name__)
_LOCATION = re.compile(r"-->\s*(?P<file>.+?):(?P<line>\d+):(?P<col>\d+)")
_REASON = re.compile(r"^error:\s*(?P<reason>.+)$", re.MULTILINE)


def compile_engine(policy_set: PolicySet, data: dict[str, Any]) -> regorus.Engine:
    """Parse every file into one engine with ``data``; raise PolicyError with file and line."""
    engine = regorus.Engine()
    for path, text in policy_set.files:
        try:
            engine.add_policy(path, text)
        except RuntimeError as exc:
            raise policy_error(exc, path) from None
    engine.add_data_json(json.dumps(data))
    engine.add_policy(*entry(policy_set))
    return engine


def compile_program(policy_set: PolicySet, data: dict[str, Any]) -> bytes:
    """The policy set and its entry as RVM bytecode (see rvm_guard.py); PolicyError if the RVM refuses it."""
    try:
        return rvm_guard.compile_program([*policy_set.files, entry(policy_set)], data,
                                         [ENTRY_RESULT, *part_entries(policy_set)])
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - pyo3's PanicException is a BaseException
        raise policy_error(exc, ENTRY_FILE) from None


def loaded_rvm(program: bytes, data: dict[str, Any]) -> Any:
    """An RVM running ``program`` (``compile_program``'s bytes) against ``data``, for the calling thread only."""
    loaded, _ = regorus.Program.deserialize_binary(program)
    vm = regorus.Rvm()
    vm.load_program(loaded)
    vm.set_data_json(json.dumps(data))
    return vm


def policy_error(exc: BaseException, default_file: str) -> PolicyError:
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
        self._data: dict[str, Any] = {"vgate": {"config": config_document}}
        self._data_version = 0  # each thread's engines take the data again when it grows
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
        self.evaluate(EngineInput(b"{}", {}))  # this thread's engines load now, not on its first request

    def evaluate(self, request: EngineInput) -> Evaluation:
        """The RVM's answer, or the interpreter's when the RVM has none (refused, budget, undefined)."""
        answer, engine, fallback = self.answer(request.raw)
        return Evaluation(parse_result(answer), engine, fallback)

    def answer(self, raw: bytes) -> tuple[Any, str, str | None]:
        """The unchecked result object, the engine that gave it, and why the RVM did not (if it did not)."""
        engines = self._engines_for_this_thread()
        text = raw.decode("utf-8")
        fallback = "the RVM cannot compile this policy set" if engines.vm is None else None
        if engines.vm is not None:
            answer, fallback = engines.run_vm(text)
            if answer is not None:
                return answer, "rvm", None
        return engines.run_interpreter(text), "interpreter", fallback

    def evaluate_interpreted(self, request: EngineInput) -> PolicyResult:
        """The interpreter's answer alone: strict about builtin errors and conflicts."""
        return parse_result(self.answer_interpreted(request.raw))

    def answer_interpreted(self, raw: bytes) -> Any:
        """The interpreter's unchecked result object."""
        return self._engines_for_this_thread().run_interpreter(raw.decode("utf-8"))

    def set_inventory(self, inventory: dict[str, Any]) -> None:
        """The cluster state policies read as ``data.inventory`` (Gatekeeper's shape), from now on."""
        self._data = {"vgate": self._data["vgate"], "inventory": inventory}
        self._data_version += 1

    def _engines_for_this_thread(self) -> _ThreadEngines:
        table: dict[int, tuple[weakref.ref[RegorusEngine], _ThreadEngines]] = (
            _thread_engines.__dict__.setdefault("table", {}))
        for key in [k for k, (owner, _) in table.items() if owner() is None]:
            del table[key]  # engines of replaced policy sets, dropped by the thread that built them
        entry = table.get(id(self))
        if entry is None or entry[0]() is not self:
            engines = _ThreadEngines(self._policy_set, self._data, self._program, part_entries(self._policy_set))
            engines.data_version = self._data_version
            entry = table[id(self)] = (weakref.ref(self), engines)
        if entry[1].data_version != self._data_version:
            entry[1].set_data(self._data, self._data_version)
        return entry[1]


class _ThreadEngines:
    """One thread's RVM (loaded from the bytecode, ~0.3 ms) and interpreter (parsed on first need, ~1 ms)."""

    def __init__(self, policy_set: PolicySet, data: dict[str, Any], program: bytes | None,
                 parts: list[str] | None = None) -> None:
        self._policy_set = policy_set
        self._data = data
        self._parts = parts or []
        self._interpreter: Any = None
        self.data_version = 0
        self.vm: Any = None
        if program is not None:
            self.vm = loaded_rvm(program, data)

    def run_vm(self, input_json: str) -> tuple[dict[str, Any] | None, str | None]:
        """The RVM's result object, or None and why: it stopped (instruction budget) or found it undefined.

        The whole result first; past the instruction budget, the result's parts, each with a budget
        of its own (a big Volcano Job), before the caller turns to the interpreter.
        """
        try:
            self.vm.set_input_json(input_json)
            answer = orjson.loads(self.vm.execute_entry_point(ENTRY_RESULT))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - pyo3's PanicException is a BaseException
            reason = policy_error(exc, ENTRY_RESULT).reason
            if "instruction limit" not in reason or not self._parts:
                return None, reason
            return self._run_parts(reason)
        return (answer, None) if isinstance(answer, dict) else (None, "the RVM found the result undefined")

    def _run_parts(self, whole_reason: str) -> tuple[dict[str, Any] | None, str | None]:
        merged: dict[str, list[Any]] = {"deny": [], "warn": []}
        for part in self._parts:
            try:
                answer = orjson.loads(self.vm.execute_entry_point(part))
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # noqa: BLE001 - pyo3's PanicException is a BaseException
                return None, f"{whole_reason}; and in part {part}: {policy_error(exc, part).reason}"
            if not isinstance(answer, dict):
                return None, f"the RVM found {part} undefined"
            for kind in merged:
                merged[kind] += answer.get(kind, [])
        return merged, None

    def set_data(self, data: dict[str, Any], version: int) -> None:
        """Replace the data both engines evaluate against (the config, and the inventory with it)."""
        self._data, self.data_version = data, version
        text = json.dumps(data)
        if self.vm is not None:
            self.vm.set_data_json(text)
        if self._interpreter is not None:
            self._interpreter.clear_data()
            self._interpreter.add_data_json(text)

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
        return json.loads(self._interpreter.eval_rule_as_json(ENTRY_RESULT))
