"""/validate's cost for a Volcano Job of 1 to 1,000 tasks: linear or not, and where the limits stop it.

A tenant chooses how many tasks a Job has; vgate judges every task's pod template. For Jobs of
--tasks tasks (each task bench/load.py's sensitive training pod as its template, so every rule has
work), the worker's own objects (wiring.load_gateway: the shipped config and policies, the
evaluator child, the decision log synced) answer /validate at least --calls times per size (more
for small Jobs, so each size runs ~2 s: the child's CPU is read from /proc in 10 ms ticks), sizes
interleaved round by round; reported per size, medians (spread): CPU µs per call of this process and
of its evaluator child, µs per task and its ratio to the 10-task Job's (about 1: linear), the engine
that answered (regorus's RVM, or its interpreter past the RVM's instruction budget) and the
decision. A Job of more tasks than server.maxTasksPerJob is refused without evaluation; one whose
body exceeds server.maxBodyBytes before any parsing (HTTP 413).

    python bench/job_scale.py --tasks 1 10 100 1000 --calls 20 --rounds 3
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from webhook.core.contract import EngineInput  # noqa: E402

from load import realistic_pod, tree_cpu_seconds, worker_gateway  # noqa: E402


def job_review(tasks: int) -> bytes:
    """A CREATE of a Volcano Job of ``tasks`` tasks, each the sensitive pod's template, as the API
    server sends it."""
    pod = realistic_pod()
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": "scale", "namespace": "ml-training", "labels": pod["metadata"]["labels"]},
           "spec": {"schedulerName": "volcano", "queue": "training", "minAvailable": tasks,
                    "tasks": [{"name": f"task-{i}", "replicas": 1, "template": copy.deepcopy(template)}
                              for i in range(tasks)]}}
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": f"scale-{tasks}", "kind": {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
        "resource": {"group": "batch.volcano.sh", "version": "v1alpha1", "resource": "jobs"},
        "namespace": "ml-training", "name": "scale", "operation": "CREATE",
        "userInfo": {"username": "bench", "groups": ["system:authenticated"]}, "object": job, "dryRun": False}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument("--calls", type=int, default=5, help="calls per size and round, at least")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vgate-job-scale-") as scratch:
        gateway = worker_gateway(Path(scratch))
        limit = gateway.config.server.max_body_bytes
        bodies = {n: job_review(n) for n in args.tasks}
        fits = [n for n, body in bodies.items() if len(body) <= limit]
        figures: dict[int, list[tuple[float, float]]] = {n: [] for n in fits}
        answers: dict[int, str] = {}
        engines = {n: gateway.engine.evaluate(EngineInput(bodies[n], orjson.loads(bodies[n]))).engine
                   for n in fits if n <= gateway.config.server.max_tasks_per_job}
        for _ in range(args.rounds):
            for n in fits:
                calls = max(args.calls, 2000 // n)
                gateway.validate(bodies[n])  # warm
                spent, started = tree_cpu_seconds(os.getpid()), time.perf_counter()
                for _ in range(calls):
                    answer = gateway.validate(bodies[n])["response"]
                wall = (time.perf_counter() - started) / calls * 1e6
                cpu = (tree_cpu_seconds(os.getpid()) - spent) / calls * 1e6
                figures[n].append((cpu, wall))
                answers[n] = "allowed" if answer["allowed"] else f"refused ({answer['status']['code']})"
    reference = 10 if 10 in figures else min(fits)
    base = statistics.median(cpu for cpu, _ in figures[reference]) / reference
    print(f"server.maxBodyBytes {limit:,}: {', '.join(f'{n} tasks {len(bodies[n]):,} B' for n in args.tasks)}")
    for n in args.tasks:
        if n not in figures:
            print(f"  {n:5} tasks: {len(bodies[n]):,} bytes, over server.maxBodyBytes: refused with 413 before parsing")
            continue
        cpus = [cpu for cpu, _ in figures[n]]
        per_task = statistics.median(cpus) / n
        print(f"  {n:5} tasks: CPU {statistics.median(cpus):,.0f} µs ({min(cpus):,.0f}–{max(cpus):,.0f}), "
              f"wall {statistics.median(w for _, w in figures[n]):,.0f} µs, {per_task:,.0f} µs per task "
              f"(x{per_task / base:.2f} the {reference}-task Job's), {engines.get(n, 'not evaluated')}, {answers[n]}")


if __name__ == "__main__":
    main()
