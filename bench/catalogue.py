"""What the full policy catalogue costs per /validate, against the three core placement rules.

Builds two gateways in one process, one on every rule in policies/ and one on the three core
rules (single zone, encrypted memory, no external network) plus the shared lib, and times
``Gateway.validate`` on the same AdmissionReviews. This machine's speed drifts 2-3x within
seconds, so the two are timed in short alternating blocks (core then full, then full then core)
and each pair of blocks gives one ratio: the figure is the median of those ratios, with its
quartiles, beside the median times (the aim: the full catalogue adds under 50%).

    python bench/catalogue.py --block 50 --pairs 200

With --restricted both run with podSecurity enforce, warn and audit at restricted, on the same
pods made restricted-compliant (so both are admitted: the figure is the cost of judging, not of
refusing). The checks run whatever the modes; the modes only decide what their results do.

With --https it also starts two real servers (`vgate serve`, TLS, durable decision log), one per
policy set, and compares what a caller of /validate waits for: ApacheBench with one keep-alive
connection, alternating blocks between the two servers, the median of per-pair p50 ratios.
(Needs `ab`: apt-get install apache2-utils.)
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from webhook.files.config_file import DEFAULT_CONFIG_PATH  # noqa: E402
from webhook.server.gateway import Gateway  # noqa: E402
from webhook.server.metrics import Metrics  # noqa: E402
from webhook.server.wiring import Settings, load_gateway  # noqa: E402

from load import admission_review, paired_rounds, realistic_pod, start_server, stop_servers, typical_pod  # noqa: E402

CORE = ("placement-single-zone", "placement-encrypted-memory", "network-no-external")


def core_policies(target: Path) -> Path:
    shutil.copytree(ROOT / "policies" / "lib", target / "lib")
    for rule in CORE:
        shutil.copytree(ROOT / "policies" / rule, target / rule)
    return target


def restricted_config(scratch: Path) -> str:
    """The shipped config with every podSecurity mode at restricted."""
    document = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    document["podSecurity"].update(enforce="restricted", warn="restricted", audit="restricted")
    path = scratch / "restricted.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def restricted(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` with the security context the restricted standard asks for, pod and containers."""
    pod = copy.deepcopy(pod)
    spec = pod["spec"]
    spec.setdefault("securityContext", {}).update(runAsNonRoot=True, seccompProfile={"type": "RuntimeDefault"})
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        container.setdefault("securityContext", {}).update(allowPrivilegeEscalation=False,
                                                           capabilities={"drop": ["ALL"]})
    return pod


def per_request_us(gateway: Gateway, body: bytes, requests: int) -> float:
    started = time.perf_counter()
    for _ in range(requests):
        gateway.validate(body)
    return (time.perf_counter() - started) / requests * 1e6


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(values, n=4)
    return q1, median, q3


def compare_over_https(core_dir: Path, bodies: list[tuple[str, bytes]], pairs: int, requests: int) -> None:
    """p50 of /validate on a full-catalogue server against a core-rules server, in alternating blocks."""
    servers = {name: start_server(workers=2, threads=2, policies=path)
               for name, path in (("core", core_dir), ("full", ROOT / "policies"))}
    try:
        for label, body in bodies:
            runs = paired_rounds(servers, "/validate", body, pairs, requests, 1)
            p50, p99 = ({name: [run[key] for run in runs[name]] for name in runs} for key in ("p50_ms", "p99_ms"))
            ratios = [f / c for f, c in zip(p50["full"], p50["core"], strict=True)]
            q1, ratio, q3 = quartiles(ratios)
            print(f"{label:14s} HTTPS /validate p50 core {statistics.median(p50['core']):5.2f} ms  "
                  f"full {statistics.median(p50['full']):5.2f} ms  full/core {ratio:.2f}x (+{(ratio - 1) * 100:.0f}%, "
                  f"quartiles {q1:.2f}-{q3:.2f});  p99 core {statistics.median(p99['core']):5.2f} ms  "
                  f"full {statistics.median(p99['full']):5.2f} ms")
    finally:
        stop_servers(servers.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--block", type=int, default=50, help="validations per timed block")
    parser.add_argument("--pairs", type=int, default=200, help="pairs of blocks (core, full) per pod")
    parser.add_argument("--https", action="store_true", help="also compare two real servers over HTTPS")
    parser.add_argument("--https-pairs", type=int, default=10, help="pairs of ab runs per pod over HTTPS")
    parser.add_argument("--https-requests", type=int, default=500, help="requests per ab run")
    parser.add_argument("--restricted", action="store_true", help="podSecurity at restricted, restricted pods")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        config = restricted_config(Path(scratch)) if args.restricted else None
        full = load_gateway(Settings(config, str(ROOT / "policies")), Metrics(), audit=False)
        core = load_gateway(Settings(config, str(core_policies(Path(scratch) / "policies"))), Metrics(), audit=False)
        rules = len([p for p in (ROOT / "policies").iterdir() if (p / "policy.rego").is_file()])
        print(f"full catalogue: {rules} rules; core: {len(CORE)} rules; engine {full.engine.name}; "
              f"{args.pairs} pairs of {args.block}-validation blocks per pod")
        pods = [("sensitive pod", realistic_pod()), ("typical pod", typical_pod())]
        bodies = [(label, admission_review(as_mutated(full, restricted(pod) if args.restricted else pod)))
                  for label, pod in pods]
        for label, body in bodies:
            assert full.validate(body)["response"]["allowed"] and core.validate(body)["response"]["allowed"]
            for gateway in (core, full):
                per_request_us(gateway, body, 200)  # warm-up
            times: dict[str, list[float]] = {"core": [], "full": []}
            ratios = []
            for pair in range(args.pairs):
                order = (core, full) if pair % 2 == 0 else (full, core)
                measured = {id(g): per_request_us(g, body, args.block) for g in order}
                times["core"].append(measured[id(core)])
                times["full"].append(measured[id(full)])
                ratios.append(measured[id(full)] / measured[id(core)])
            q1, ratio, q3 = quartiles(ratios)
            print(
                f"{label:14s} /validate core {statistics.median(times['core']):5.0f} us   "
                f"full {statistics.median(times['full']):5.0f} us   full/core {ratio:.2f}x (+{(ratio - 1) * 100:.0f}%, "
                f"quartiles {q1:.2f}-{q3:.2f})"
            )
        if args.https:
            compare_over_https(Path(scratch) / "policies", bodies, args.https_pairs, args.https_requests)


def as_mutated(gateway: Gateway, pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as the API server stores it after vgate's /mutate (queue, priority, QoS limits): what
    /validate then judges, and admits (bench/load.py's pod, unmutated, lacks the memory limits the
    training queue's Guaranteed class asks for)."""
    response = gateway.mutate(admission_review(pod))["response"]
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    mutated: dict[str, Any] = jsonpatch.apply_patch(pod, patch)
    return mutated


if __name__ == "__main__":
    main()
