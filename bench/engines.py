"""regorus (its RVM and its interpreter) against real OPA, in process, on the same inputs.

The shipped policies/ and config, the entry vgate evaluates (`data.vgate.entry.result`), the same
AdmissionReviews (bench/load.py's sensitive and typical pods); OPA embedded by the PyPI package
opa-golib-python-bindings (OPA's Go library behind ctypes: `pip install --ignore-requires-python
opa-golib-python-bindings`), its prepared query cached as the package does. Every engine must give
the same result for each input, or the bench stops. Timed in short blocks, engines interleaved and
their order rotated; CPU µs per evaluation (process time), median of the blocks with the spread, and
the ratio of each engine to the RVM within each block.

    python bench/engines.py --block 200 --blocks 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from webhook.files.config_file import DEFAULT_CONFIG_PATH, load_config  # noqa: E402
from webhook.policy.entry import ENTRY_RESULT, entry  # noqa: E402
from webhook.policy.regorus_engine import RegorusEngine  # noqa: E402
from webhook.policy.sources import load_policy_set  # noqa: E402

from load import admission_review, realistic_pod, typical_pod  # noqa: E402


def engines() -> dict[str, Callable[[bytes], Any]]:
    """Each engine as a function of the AdmissionReview's bytes to its result object."""
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
    path = ENTRY_RESULT.removeprefix("data.").replace(".", "/")

    def rvm(raw: bytes) -> Any:
        answer, engine, fallback = regorus_engine.answer(raw)
        if engine != "rvm":
            sys.exit(f"engines: the RVM did not answer ({fallback})")
        return answer

    return {
        "rvm": rvm,
        "interpreter": lambda raw: regorus_engine.answer_interpreted(raw),
        # OPA takes the input as a JSON text, as the server would hand it over (parsed there once).
        "opa": lambda raw: opa.eval_document(path.replace("/", "."), json.loads(raw)),
    }


def normalized(result: Any) -> str:
    return json.dumps({k: sorted(json.dumps(v, sort_keys=True) for v in result.get(k, [])) for k in ("deny", "warn")},
                      sort_keys=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--block", type=int, default=200, help="evaluations per block")
    parser.add_argument("--blocks", type=int, default=15)
    args = parser.parse_args()
    chosen = engines()
    inputs = {"sensitive": admission_review(realistic_pod()), "typical": admission_review(typical_pod())}
    for name, raw in inputs.items():
        answers = {engine: normalized(run(raw)) for engine, run in chosen.items()}
        if len(set(answers.values())) != 1:
            sys.exit(f"engines: the engines disagree on the {name} pod: {json.dumps(answers, indent=1)}")
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
                started = time.process_time()
                for _ in range(args.block):
                    run(raw)
                times[engine] = (time.process_time() - started) / args.block * 1e6
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
