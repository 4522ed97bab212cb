"""The child process of ``isolated.py``: one RegorusEngine, answering frames on stdin until it closes.

The first frame is the policy set and config; the answer is ``{"name", "rvm_refusal"}`` once the
set is compiled and warmed up, or ``{"policy_error": [file, line, reason]}``. Every later frame is
an operation byte (``E`` evaluate, ``I`` the interpreter alone) and an AdmissionReview's bytes;
the answer is ``{"answer", "engine", "fallback"}`` or ``{"error"}``. ``D`` and a JSON document
replace ``data.inventory`` (the cluster state) for later evaluations; the answer is
``{"ok": true}``; so does ``P`` (a ping: the worker's readiness check). The child asks the kernel
to kill it when its parent dies, so an endless evaluation cannot outlive the worker that started it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

from ..core.errors import EvaluationError, PolicyError
from .isolated import INTERPRET, INVENTORY, PING, read_frame, write_frame
from .parent_death import die_with_parent
from .regorus_engine import RegorusEngine
from .sources import PolicySet

# A plain pod as the API server delivers it: the warm-up runs every rule once on a real shape.
WARM_UP = orjson.dumps({
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {
        "uid": "warm-up", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "default",
        "operation": "CREATE", "userInfo": {"username": "system:serviceaccount:default:default"},
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "warm-up", "namespace": "default"},
                   "spec": {"schedulerName": "default-scheduler", "priority": 0,
                            "containers": [{"name": "app", "image": "registry.example.com/app:1.0",
                                            "resources": {}, "imagePullPolicy": "IfNotPresent"}]}},
    },
})


def main() -> None:
    die_with_parent()
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    sys.stdout = sys.stderr  # nothing but frames may reach the parent's pipe
    first = read_frame(stdin)
    if first is None:
        return
    engine, ready = load(orjson.loads(first))
    write_frame(stdout, orjson.dumps(ready))
    if engine is None:
        return
    while (frame := read_frame(stdin)) is not None:
        write_frame(stdout, orjson.dumps(answer(engine, frame)))


def load(request: dict[str, Any]) -> tuple[RegorusEngine | None, dict[str, Any]]:
    policy_set = PolicySet(Path(request["root"]), tuple((path, text) for path, text in request["files"]),
                           request["revision"])
    try:
        engine = RegorusEngine(policy_set, request["config"])
    except PolicyError as error:
        return None, {"policy_error": [error.file, error.line, error.reason]}
    try:
        engine.answer(WARM_UP)  # for its time: a set that fails here fails requests, answered per failureMode
    except EvaluationError:
        pass
    return engine, {"name": engine.name, "rvm_refusal": engine.rvm_refusal}


def answer(engine: RegorusEngine, frame: bytes) -> dict[str, Any]:
    operation, raw = frame[:1], frame[1:]
    if operation == PING:
        return {"ok": True}
    if operation == INVENTORY:
        engine.set_inventory(orjson.loads(raw))
        return {"ok": True}
    try:
        if operation == INTERPRET:
            return {"answer": engine.answer_interpreted(raw), "engine": "interpreter"}
        result, name, fallback = engine.answer(raw)
        return {"answer": result, "engine": name, "fallback": fallback}
    except EvaluationError as error:
        return {"error": str(error)}


if __name__ == "__main__":
    main()
