"""regorus (its RVM and its interpreter) against real OPA, in process, on the same inputs; and the
RVM one process away, as the server runs it (its evaluator child: the round trip's cost).

The shipped policies/ and config, the entry vgate evaluates (`data.vgate.entry.result`), the same
AdmissionReviews (bench/load.py's sensitive and typical pods); OPA embedded by the PyPI package
opa-golib-python-bindings (OPA's Go library behind ctypes: `pip install --ignore-requires-python
opa-golib-python-bindings`), its prepared query cached as the package does. Every engine must give
the same result for each input, or the bench stops. Timed in short blocks, engines interleaved and
their order rotated; CPU µs per evaluation (this process and its children, from /proc: OPA's Go
threads and the evaluator child count), median of the blocks with the spread, and the ratio of each
engine to the in-process RVM within each block.

    python bench/engines.py --block 400 --blocks 9
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from webhook.core.contract import EngineInput, PolicyResult, parse_result  # noqa: E402
from webhook.files.config_file import DEFAULT_CONFIG_PATH, load_config  # noqa: E402
from webhook.policy.entry import ENTRY_RESULT, entry  # noqa: E402
from webhook.policy.isolated import IsolatedEngine  # noqa: E402
from webhook.policy.regorus_engine import RegorusEngine  # noqa: E402
from webhook.policy.sources import load_policy_set  # noqa: E402

from load import admission_review, realistic_pod, tree_cpu_seconds, typical_pod  # noqa: E402


def engines() -> dict[str, Callable[[bytes], PolicyResult]]:
    """Each engine as a function of the AdmissionReview's bytes to its decision."""
    try:
        from opa_bindings import OpaEngine
    except ImportError:
        sys.exit("engines: OPA's bindings are missing: .venv/bin/pip install --ignore-requires-python "
                 "opa-golib-python-bindings")
    policy_set = load_policy_set(ROOT / "policies")
    config = load_config(DEFAULT_CONFIG_PATH)
    regorus_engine = RegorusEngine(policy_set, config.document)
    opa = OpaEngine()
    for path, text in [*policy_set.files, entry(policy_set)]:
        opa.add_policy(path, text)
    opa.add_data({"vgate": {"config": config.document}})
    child = IsolatedEngine(policy_set, config.document, timeout=10, load_budget=120)

    def rvm(raw: bytes) -> PolicyResult:
        answer, engine, fallback = regorus_engine.answer(raw)
        if engine != "rvm":
            sys.exit(f"engines: the RVM did not answer ({fallback})")
        return parse_result(answer)

    def in_child(raw: bytes) -> PolicyResult:
        evaluation = child.evaluate(EngineInput(raw, {}))
        if evaluation.engine != "rvm":
            sys.exit(f"engines: the child's RVM did not answer ({evaluation.fallback})")
        return evaluation.result

    return {
        "rvm": rvm,
        "rvm-child": in_child,
        "interpreter": lambda raw: parse_result(regorus_engine.answer_interpreted(raw)),
        # OPA is given the parsed input (its bindings serialise it again for Go).
        "opa": lambda raw: parse_result(opa.eval_document(ENTRY_RESULT.removeprefix("data."), json.loads(raw))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--block", type=int, default=400,
                        help="evaluations per block (CPU is read in clock ticks: keep a block over 100 ms)")
    parser.add_argument("--blocks", type=int, default=15)
    args = parser.parse_args()
    chosen = engines()
    inputs = {"sensitive": admission_review(realistic_pod()), "typical": admission_review(typical_pod())}
    for name, raw in inputs.items():
        answers = {engine: run(raw) for engine, run in chosen.items()}
        if len(set(answers.values())) != 1:
            sys.exit(f"engines: the engines disagree on the {name} pod: {answers}")
    print(f"{len(inputs)} inputs ({', '.join(f'{k} {len(v)} bytes' for k, v in inputs.items())}); "
          f"{args.blocks} blocks of {args.block} evaluations per engine and input, interleaved; every engine "
          "gave the same result on each")
    for name, raw in inputs.items():
        per: dict[str, list[float]] = {e: [] for e in chosen}
        ratios: dict[str, list[float]] = {e: [] for e in chosen}
        order = list(chosen)
        for _ in range(args.blocks):
            order = order[1:] + order[:1]
            times = {}
            for engine in order:
                run = chosen[engine]
                started = tree_cpu_seconds(os.getpid())
                for _ in range(args.block):
                    run(raw)
                times[engine] = (tree_cpu_seconds(os.getpid()) - started) / args.block * 1e6
            for engine, value in times.items():
                per[engine].append(value)
                ratios[engine].append(value / times["rvm"])
        for engine in chosen:
            values, ratio = per[engine], ratios[engine]
            print(f"{name:9} {engine:11} {statistics.median(values):8.0f} µs/eval CPU "
                  f"({min(values):.0f}–{max(values):.0f})   x{statistics.median(ratio):.2f} the RVM "
                  f"({min(ratio):.2f}–{max(ratio):.2f})")


if __name__ == "__main__":
    main()
