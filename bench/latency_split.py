"""Where one /validate and one /mutate spend their time, part by part: a profile anyone can re-run.

    python bench/latency_split.py --calls 400 --rounds 5

bench/load.py's 4.4 KB sensitive training pod, the same AdmissionReview it sends to both
endpoints (unmutated, so /validate judges it by every rule and refuses it: its CPU aims are of
this), in one run of interleaved rounds (medians, spread in brackets), measured two ways:

- over HTTPS: `vgate serve` with one worker on loopback (bench/load.start_server: the shipped config
  and policies, its own certificates, its decision log synced before each answer), one keep-alive
  client sending serially: the round trip of /healthz (TLS records, HTTP, the server's loop: the
  floor), of /validate and of /mutate;
- in this process, the worker's own objects (wiring.load_gateway, the same config and policies),
  each part alone, --calls calls each, on the path that serves: a uvloop event loop as granian's
  workers run (Gateway.answer_async; what must block goes to an app thread): decode
  (admission.decode_review: parse, size and depth checks); the evaluator child's round trip
  (IsolatedEngine.evaluate_async less the engine alone); the engine (a RegorusEngine in this process:
  the RVM and its result); the decision record and its fdatasync (DecisionLog.record_async of the
  record /validate writes, committed on the loop while commits are quick); the answer (the JSON of
  the AdmissionReview /validate returned); the whole of /validate and /mutate (answer_async); the rest
  of the whole (the rules' outcomes, exceptions, metrics, the mutation's own steps) is the whole less
  those parts;
- the machine's wake-up: a 4.5 KB frame and a short reply over two pipes to a child process, as the
  worker and its evaluator child exchange them, with the two on one CPU and on two. A serial profile
  has the child on the worker's CPU (the kernel wakes a pipe's reader there); at load the two often
  run on different CPUs, and each side pays the wake-up of the other: on a virtual machine, where
  waking an idle CPU leaves the guest, that is most of the gap between this profile and load.py's
  CPU per request by role.

TLS, HTTP and the body read are the HTTPS round trip less the in-process whole. Wall µs per call;
CPU µs per call of this process for what runs in it (the engine's is the RVM's, on this thread; the
pipe round trip's is both processes'). On a one-CPU machine both pipe rows are one CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from webhook.core.admission import decode_review  # noqa: E402
from webhook.core.contract import EngineInput  # noqa: E402
from webhook.policy.isolated import IsolatedEngine  # noqa: E402
from webhook.policy.regorus_engine import RegorusEngine  # noqa: E402
from webhook.policy.sources import load_policy_set  # noqa: E402
from webhook.server.gateway import Gateway  # noqa: E402

from load import admission_review, realistic_pod, start_server, worker_gateway  # noqa: E402

PARTS = ("decode", "evaluator round trip", "engine (RVM)", "decision record + fdatasync", "answer",
         "rest of /validate", "/validate in process", "rest of /mutate", "/mutate in process",
         "HTTPS /healthz", "HTTPS /validate", "HTTPS /mutate", "TLS+HTTP+body, /validate", "TLS+HTTP+body, /mutate",
         "pipe round trip, one CPU", "pipe round trip, two CPUs")


def timed(call: Callable[[], Any], calls: int) -> tuple[float, float]:
    """Wall and CPU (this process) µs per call of ``call``, after a few unmeasured ones."""
    def repeat(times: int) -> None:
        for _ in range(times):
            call()

    return per_call(repeat, calls)


def timed_async(loop: asyncio.AbstractEventLoop, call: Callable[[], Awaitable[Any]],
                calls: int) -> tuple[float, float]:
    """``timed`` of a coroutine's calls, awaited one after another on ``loop`` (run once for all of them)."""
    async def repeat(times: int) -> None:
        for _ in range(times):
            await call()

    return per_call(lambda times: loop.run_until_complete(repeat(times)), calls)


def per_call(repeat: Callable[[int], Any], calls: int) -> tuple[float, float]:
    """Wall and CPU (this process) µs per call of ``repeat(calls)``, after ``repeat`` of a few unmeasured ones."""
    repeat(min(20, calls))
    wall, cpu = time.perf_counter(), time.process_time()
    repeat(calls)
    return (time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


def in_process(gateway: Gateway, engine: RegorusEngine, body: bytes, calls: int) -> dict[str, tuple[float, float]]:
    """Each part of the worker's path alone, and the wholes, on the same request, on the event loop."""
    loop = uvloop.new_event_loop()
    try:
        return _parts(loop, gateway, engine, body, calls)
    finally:
        loop.close()


def _parts(loop: asyncio.AbstractEventLoop, gateway: Gateway, engine: RegorusEngine, body: bytes,
           calls: int) -> dict[str, tuple[float, float]]:
    async def offload(call: Callable[..., Any], *args: Any) -> Any:
        return await loop.run_in_executor(None, call, *args)

    def served(endpoint: str) -> Callable[[], Awaitable[Any]]:
        return lambda: gateway.answer_async(endpoint, body, offload)

    review = orjson.loads(body)
    depth = gateway.config.server.max_json_depth
    gateway.validate(body)
    decisions = gateway.decisions
    assert decisions is not None
    segment = max(decisions.directory.glob("decisions-*.jsonl"), key=lambda p: p.stat().st_mtime)
    record = {k: v for k, v in json.loads(segment.read_bytes().splitlines()[-1]).items()
              if k not in ("time", "replica", "prev")}  # what _finish hands the log
    answered = gateway.validate(body)
    assert "response" in answered, answered  # bench/load.py's body: unmutated, so /validate refuses it, fully judged
    isolated = gateway.engine
    assert isinstance(isolated, IsolatedEngine)
    parts = {
        "decode": timed(lambda: decode_review(body, depth), calls),
        "engine (RVM)": timed(lambda: engine.evaluate(EngineInput(body, review)), calls),
        "evaluator round trip": timed_async(loop, lambda: isolated.evaluate_async(EngineInput(body, review), offload),
                                            calls),
        "decision record + fdatasync": timed_async(loop, lambda: decisions.record_async(record), calls),
        "answer": timed(lambda: orjson.dumps(answered), calls),
        "/validate in process": timed_async(loop, served("validate"), calls),
        "/mutate in process": timed_async(loop, served("mutate"), calls),
    }
    round_trip_wall, round_trip_cpu = parts["evaluator round trip"]
    parts["evaluator round trip"] = (round_trip_wall - parts["engine (RVM)"][0], round_trip_cpu)  # the parent waits

    def rest(whole: str, named: tuple[str, ...]) -> tuple[float, float]:
        """The whole less its named parts: wall, and CPU of this process (the engine's runs in the child)."""
        wall = parts[whole][0] - sum(parts[p][0] for p in named)
        cpu = parts[whole][1] - sum(parts[p][1] for p in named if p != "engine (RVM)")
        return wall, cpu

    parts["rest of /validate"] = rest("/validate in process", ("decode", "evaluator round trip", "engine (RVM)",
                                                               "decision record + fdatasync", "answer"))
    parts["rest of /mutate"] = rest("/mutate in process", ("decode", "decision record + fdatasync", "answer"))
    return parts


def pipe_round_trip(payload: bytes, same_cpu: bool, calls: int) -> tuple[float, float]:
    """Wall and CPU µs (both processes) of a frame to a child over a pipe and a 300-byte reply over
    another, with the child on this process's CPU or on another: what one evaluator exchange costs in
    wake-ups alone."""
    here = min(os.sched_getaffinity(0))
    there = here if same_cpu else max(os.sched_getaffinity(0))
    from_parent, to_child = os.pipe()
    from_child, to_parent = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a reply to each frame until the pipe closes
        os.close(to_child)
        os.close(from_child)
        os.sched_setaffinity(0, {there})
        while os.read(from_parent, 1 << 16):
            os.write(to_parent, b"r" * 300)
        os._exit(0)
    os.close(from_parent)
    os.close(to_parent)
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {here})
    try:
        for _ in range(min(20, calls)):
            os.write(to_child, payload)
            os.read(from_child, 1 << 16)
        child = on_cpu_seconds(pid)
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            os.write(to_child, payload)
            os.read(from_child, 1 << 16)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        child = on_cpu_seconds(pid) - child
    finally:
        os.close(to_child)
        os.waitpid(pid, 0)
        os.close(from_child)
        os.sched_setaffinity(0, mask)
    return wall / calls * 1e6, (cpu + child) / calls * 1e6


def on_cpu_seconds(pid: int) -> float:
    """How long a process has run on a CPU, in ns resolution (its exit, which tears down a copy of this
    process's address space, would swamp the exchanges in its rusage)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def over_https(port: int, ca: str, body: bytes, calls: int) -> dict[str, float]:
    """Median wall µs of serial keep-alive round trips, per endpoint."""
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(cafile=ca),
                                             timeout=10)
    found = {}
    for path, payload in (("/healthz", None), ("/validate", body), ("/mutate", body)):
        samples = []
        for n in range(calls + 20):
            started = time.perf_counter()
            connection.request("POST" if payload else "GET", path, payload,
                               {"Content-Type": "application/json"} if payload else {})
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"{path}: HTTP {response.status}")
            if n >= 20:
                samples.append((time.perf_counter() - started) * 1e6)
        found[f"HTTPS {path}"] = statistics.median(samples)
    connection.close()
    return found


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per part and round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians are reported")
    parser.add_argument("--json", type=Path, help="also write every round's figures here")
    args = parser.parse_args()

    body = admission_review(realistic_pod())
    server, port, ca, server_dir = start_server(workers=1, threads=1)
    with tempfile.TemporaryDirectory(prefix="vgate-split-") as scratch:
        gateway = worker_gateway(Path(scratch))
        engine = RegorusEngine(load_policy_set(ROOT / "policies"), gateway.config.document)
        rounds: list[dict[str, Any]] = []
        try:
            for n in range(args.rounds):  # the two ways alternate, so drift on a shared machine hits both
                figures: dict[str, Any] = {}
                if n % 2 == 0:
                    figures |= in_process(gateway, engine, body, args.calls)
                    figures |= over_https(port, ca, body, args.calls)
                else:
                    figures |= over_https(port, ca, body, args.calls)
                    figures |= in_process(gateway, engine, body, args.calls)
                for same_cpu, part in ((True, "pipe round trip, one CPU"), (False, "pipe round trip, two CPUs")):
                    figures[part] = pipe_round_trip(body, same_cpu, args.calls)
                for endpoint in ("validate", "mutate"):
                    figures[f"TLS+HTTP+body, /{endpoint}"] = (figures[f"HTTPS /{endpoint}"]
                                                             - figures[f"/{endpoint} in process"][0])
                rounds.append(figures)
                print(f"round {n + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        finally:
            server.terminate()
            server.wait()
            server_dir.cleanup()
    print(f"{len(body):,}-byte AdmissionReview, {args.calls} calls per part and round, {args.rounds} rounds: "
          "wall µs per call (CPU µs in this process), medians (spread)")
    for part in PARTS:
        walls = [r[part][0] if isinstance(r[part], tuple) else r[part] for r in rounds]
        cpus = [r[part][1] for r in rounds if isinstance(r[part], tuple)]
        print(f"  {part:30} {spread(walls):24} {('CPU ' + spread(cpus)) if cpus else ''}")
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=1))


if __name__ == "__main__":
    main()
