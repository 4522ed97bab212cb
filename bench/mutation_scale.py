"""How /mutate's cost grows with the object: pods of many containers and Volcano Jobs of many tasks.

A hostile tenant controls the object's size; the work vgate does for it must grow linearly, not
with its square. For each shape, times `mutate` (the pure core, in process) at n and 10n and
prints the ratio: about 10 is linear, about 100 quadratic. Median of a few interleaved rounds.

    python bench/mutation_scale.py --small 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webhook.core.admission import decode_review
from webhook.core.mutation import mutate
from webhook.files.config_file import load_config
from webhook.offline.admit import review_for


def pod(n: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml-training"},
            "spec": {"containers": [{"name": f"c{i}", "image": "x"} for i in range(n)]}}


def job(n: int) -> dict[str, Any]:
    tasks = [{"name": f"t{i}", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
             for i in range(n)]
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ml-training"}, "spec": {"minAvailable": 1, "tasks": tasks}}


def seconds(body: bytes, config: Any) -> float:
    started = time.perf_counter()
    mutate(decode_review(body, 100), config)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=2000, help="containers or tasks in the small object")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    config = load_config()
    for name, make in (("pod, containers", pod), ("Volcano Job, tasks", job)):
        bodies = {n: orjson.dumps(review_for(make(n))) for n in (args.small, args.small * 10)}
        times: dict[int, list[float]] = {n: [] for n in bodies}
        for _ in range(args.rounds):
            for n, body in bodies.items():
                times[n].append(seconds(body, config))
        small, large = (statistics.median(times[n]) for n in bodies)
        print(f"{name:20s} n={args.small:>6}: {small * 1000:8.1f} ms   n={args.small * 10:>6}: "
              f"{large * 1000:8.1f} ms   ratio {large / small:5.1f} (10 = linear, 100 = quadratic)")


if __name__ == "__main__":
    main()
