"""What the full policy catalogue costs per /validate, against the three core placement rules.

Builds two gateways in one process, one on every rule in policies/ and one on the three core
rules (single zone, encrypted memory, no external network) plus the shared lib, and times
``Gateway.validate`` on the same AdmissionReviews, interleaving the two in rounds so that drift
in the machine's speed hits both alike. Reports medians and the ratio (the aim: the full
catalogue adds under 50%).

    python bench/catalogue.py --requests 2000 --rounds 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from load import admission_review, realistic_pod, typical_pod  # noqa: E402

from webhook.gateway import Gateway  # noqa: E402

CORE = ("placement-single-zone", "placement-encrypted-memory", "network-no-external")


def core_policies(target: Path) -> Path:
    shutil.copytree(ROOT / "policies" / "lib", target / "lib")
    for rule in CORE:
        shutil.copytree(ROOT / "policies" / rule, target / rule)
    return target


def per_request_us(gateway: Gateway, body: bytes, requests: int) -> float:
    started = time.perf_counter()
    for _ in range(requests):
        gateway.validate(body)
    return (time.perf_counter() - started) / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="validations per gateway and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        full = Gateway.load(None, ROOT / "policies", audit=False)
        core = Gateway.load(None, core_policies(Path(scratch) / "policies"), audit=False)
        rules = len([p for p in (ROOT / "policies").iterdir() if (p / "policy.rego").is_file()])
        print(f"full catalogue: {rules} rules; core: {len(CORE)} rules; {args.requests} validations x {args.rounds} rounds")
        for label, body in (("sensitive pod", admission_review(realistic_pod())), ("typical pod", admission_review(typical_pod()))):
            timings: dict[str, list[float]] = {"core": [], "full": []}
            for gateway in (core, full):
                per_request_us(gateway, body, 200)  # warm-up
            for _ in range(args.rounds):
                timings["core"].append(per_request_us(core, body, args.requests))
                timings["full"].append(per_request_us(full, body, args.requests))
            core_us, full_us = statistics.median(timings["core"]), statistics.median(timings["full"])
            print(f"{label:14s} /validate core {core_us:7.0f} us   full {full_us:7.0f} us   "
                  f"full/core {full_us / core_us:.2f}x (+{(full_us / core_us - 1) * 100:.0f}%)")


if __name__ == "__main__":
    main()
