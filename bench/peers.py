"""vgate beside Kyverno and Gatekeeper, through the real API server, in one run.

Needs the e2e control plane (`e2e/cluster up`; started here if it is down) and a checkout of
gatekeeper-library (its pod-security-policy templates; `--library DIR`). Builds Gatekeeper and
Kyverno from their Go modules (e2e/build/gatekeeper, e2e/build/kyverno; cached in .e2e/bin/peers),
starts them out of cluster (e2e/peers.py) with the equivalent policies (bench/peers/: the Pod
Security Standards' restricted level — Kyverno's podSecurity rule, gatekeeper-library's templates —
and the sensitive pod's placement rule as each writes it), beside vgate as the e2e suite runs it
(its chart's config and policies, its decision log), Volcano's webhooks in front of all.

Each target has its own namespace (`secure-bench-<target>`; every webhook is scoped by namespace
label, so one cluster holds them all): `none` (no policy webhook, only Volcano's); validation alone:
`vgate-validate` (its validating webhooks, sent the pod as vgate's /mutate leaves it), `kyverno`,
`gatekeeper`; the whole job, validation and vgate's mutation (the Volcano queue, `schedulerName`,
priority class and value): `vgate` (its mutating and validating webhooks), `kyverno-whole`
(bench/peers/kyverno-mutation.yaml beside its validation policies) and `gatekeeper-whole` (Assign and
AssignMetadata mutators, e2e/peers.py), both written from vgate's own namespace-to-queue mapping.
Before measuring, each whole-job target must store the same pod as vgate (queue, scheduler,
priority class and value, resources), and every target must admit the bench pod and refuse the
violating ones, or the bench stops naming the target. A round creates --pods copies of the same
restricted-compliant sensitive pod in each target's namespace in turn (order rotated round to
round), as server-side dry-run creates (`POST .../pods?dryRun=All`: the API server runs the whole
admission chain and stops before etcd, so no scheduling, PodGroup or binding churn differs between
targets), twice: at fixed concurrency (--concurrency closed-loop clients) and at a fixed rate
(--rate pods/s, open loop, latency from each pod's scheduled send time). Reported per target,
medians of the rounds with their spread: p50/p99 and the p50/p99 added over `none` in the same
round, throughput, and CPU µs per admitted pod of the webhook's whole process tree (from /proc), and
the API server's, each less its idle rate (measured with no load at the start of each round).

    python bench/peers.py --library ../gatekeeper-library --rounds 3 --pods 300
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import ssl
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from e2e import cluster, peers  # noqa: E402
from webhook.core.bindings import GROUP_ANNOTATION  # noqa: E402
from webhook.core.qos import QOS_ANNOTATION  # noqa: E402
from webhook.core.queues import QUEUE_ANNOTATION  # noqa: E402

from load import realistic_pod, tree_cpu_seconds  # noqa: E402

# target -> the component whose CPU it costs
WEBHOOKS = {"vgate": "vgate", "vgate-validate": "vgate", "kyverno": "kyverno", "kyverno-whole": "kyverno",
            "gatekeeper": "gatekeeper", "gatekeeper-whole": "gatekeeper"}


def bench_pod(namespace: str) -> dict[str, Any]:
    """bench/load.py's 4.4 KB sensitive training pod, dressed for the restricted level (seccomp and
    AppArmor RuntimeDefault, no privilege escalation, every capability dropped, non-root) and placed
    as every placement rule asks; a generated name, so the same body is created again and again."""
    pod = realistic_pod()
    pod["metadata"].pop("name")
    pod["metadata"].update(namespace=namespace, generateName="bench-")
    pod["metadata"]["annotations"].pop(GROUP_ANNOTATION)
    pod["spec"]["nodeSelector"]["topology.kubernetes.io/zone"] = "zone-a"
    pod["spec"]["securityContext"].update(seccompProfile={"type": "RuntimeDefault"},
                                          appArmorProfile={"type": "RuntimeDefault"})
    for container in pod["spec"]["containers"]:
        container["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
        container["resources"] = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}
    return pod


def as_mutated(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as vgate's /mutate leaves it (its queue, scheduler, priority class and QoS class):
    what the `vgate-validate` target is sent, vgate's validation alone expecting a mutated pod."""
    pod["metadata"]["annotations"].update({QUEUE_ANNOTATION: "default", QOS_ANNOTATION: "Guaranteed"})
    pod["spec"].update(schedulerName="volcano", priorityClassName="vgate-normal")
    return pod


def pod_for(target: str) -> dict[str, Any]:
    pod = bench_pod(peers.bench_namespace(target))
    return as_mutated(pod) if target == "vgate-validate" else pod


def violating(target: str) -> list[tuple[str, dict[str, Any]]]:
    """Pods every policy webhook must refuse: privileged (restricted), and sensitive without its zone."""
    privileged = pod_for(target)
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    unpinned = pod_for(target)
    unpinned["spec"]["nodeSelector"].pop("topology.kubernetes.io/zone")
    return [("privileged", privileged), ("sensitive without a zone", unpinned)]


class Client:
    """Keep-alive HTTPS to the API server as the cluster admin, one connection per thread."""

    def __init__(self) -> None:
        config = yaml.safe_load(cluster.KUBECONFIG.read_text())
        user = config["users"][0]["user"]
        self.context = ssl.create_default_context(cafile=config["clusters"][0]["cluster"]["certificate-authority"])
        self.context.load_cert_chain(user["client-certificate"], user["client-key"])
        self.local = threading.local()

    def webhook_calls(self) -> dict[str, float]:
        """The API server's count of calls to each admission webhook so far (reinvocations included):
        apiserver_admission_webhook_request_total summed by webhook name and type."""
        connection = http.client.HTTPSConnection(cluster.HOST, cluster.APISERVER_PORT, context=self.context, timeout=30)
        try:
            connection.request("GET", "/metrics")
            text = connection.getresponse().read().decode()
        finally:
            connection.close()
        calls: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("apiserver_admission_webhook_request_total{"):
                labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
                key = f"{labels['name']} ({labels['type']})"
                calls[key] = calls.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
        return calls

    def create(self, namespace: str, body: bytes) -> tuple[int, bytes]:
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = self.local.connection = http.client.HTTPSConnection(
                cluster.HOST, cluster.APISERVER_PORT, context=self.context, timeout=30)
        try:
            connection.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", body,
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            connection.close()
            self.local.connection = None
            raise


def check_policies(client: Client) -> None:
    """Each policy webhook admits the bench pod and refuses the violating ones; `none` admits all."""
    for target in peers.TARGETS:
        namespace = peers.bench_namespace(target)
        status, text = client.create(namespace, json.dumps(pod_for(target)).encode())
        if status != 201:
            sys.exit(f"peers: {target} refused the bench pod: {status} {text[:400]!r}")
        for what, pod in violating(target):
            status, text = client.create(namespace, json.dumps(pod).encode())
            if (status == 201) != (target == "none"):
                sys.exit(f"peers: {target} answered {status} to a {what} pod: {text[:400]!r}")


def placement_fields(stored: dict[str, Any]) -> dict[str, Any]:
    """What the whole job decides about a pod: its queue, scheduler, priority class and value, and
    each container's resources."""
    return {"queue": (stored["metadata"].get("annotations") or {}).get(QUEUE_ANNOTATION),
            "schedulerName": stored["spec"].get("schedulerName"),
            "priorityClassName": stored["spec"].get("priorityClassName"), "priority": stored["spec"].get("priority"),
            "resources": [c.get("resources") for c in stored["spec"]["containers"]]}


def check_whole_job(client: Client) -> dict[str, Any]:
    """Each whole-job target stores the bench pod as vgate does (server-side dry run: the object as it
    would be stored); the fields, or exit naming the target that differs."""
    stored = {}
    for target in peers.WHOLE_JOB:
        status, text = client.create(peers.bench_namespace(target), json.dumps(pod_for(target)).encode())
        if status != 201:
            sys.exit(f"peers: {target} refused the bench pod: {status} {text[:400]!r}")
        stored[target] = placement_fields(json.loads(text))
    for target, fields in stored.items():
        if fields != stored["vgate"]:
            sys.exit(f"peers: {target} stores {fields}, vgate {stored['vgate']}: not the same job")
    if stored["vgate"]["queue"] is None or stored["vgate"]["schedulerName"] != "volcano":
        sys.exit(f"peers: vgate did not mutate the bench pod: {stored['vgate']}")
    return stored["vgate"]


def _send_all(client: Client, namespace: str, body: bytes, count: int, threads: int,
              due: list[float] | None) -> tuple[list[float], float]:
    """``count`` creates on ``threads`` threads; with ``due`` (monotonic send times) open loop and
    latency from each due time, else closed loop. Returns latencies (ms) and the wall time."""
    latencies: list[float] = []
    failures: list[str] = []
    lock, next_index = threading.Lock(), iter(range(count))

    def work() -> None:
        while True:
            with lock:
                index = next(next_index, None)
            if index is None:
                return
            started = time.monotonic()
            if due is not None:
                time.sleep(max(0.0, due[index] - started))
                started = due[index]
            status, text = client.create(namespace, body)
            elapsed = (time.monotonic() - started) * 1000
            with lock:
                (latencies.append(elapsed) if status == 201 else failures.append(f"{status} {text[:200]!r}"))

    began = time.monotonic()
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failures:
        sys.exit(f"peers: {len(failures)} creates in {namespace} failed, first: {failures[0]}")
    return latencies, time.monotonic() - began


def processes() -> dict[str, int]:
    """The pid of each webhook's process tree and of the API server."""
    names = [*dict.fromkeys(WEBHOOKS.values()), "kube-apiserver"]
    return {name: int((cluster.RUN / "pids" / f"{name}.pid").read_text()) for name in names}


def one_run(client: Client, target: str, count: int, concurrency: int, rate: float | None) -> dict[str, Any]:
    namespace = peers.bench_namespace(target)
    body = json.dumps(pod_for(target)).encode()
    pids = processes()
    calls_before = client.webhook_calls()
    before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    if rate:
        start = time.monotonic() + 0.2
        latencies, wall = _send_all(client, namespace, body, count, max(concurrency, 16),
                                    [start + i / rate for i in range(count)])
    else:
        latencies, wall = _send_all(client, namespace, body, count, concurrency, None)
    cpu = {name: tree_cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    calls = {name: (value - calls_before.get(name, 0.0)) / count for name, value in client.webhook_calls().items()
             if value > calls_before.get(name, 0.0)}
    ordered = sorted(latencies)
    return {"target": target, "p50": statistics.median(ordered), "p99": ordered[int(0.99 * (len(ordered) - 1))],
            "rps": count / wall, "wall": wall, "cpu": cpu, "count": count, "calls": calls}


def spread(values: list[float], unit: str = "", digits: int = 2) -> str:
    return (f"{statistics.median(values):.{digits}f}{unit} ({min(values):.{digits}f}–{max(values):.{digits}f})"
            if values else "-")


def idle_rates(seconds: float) -> dict[str, float]:
    """CPU seconds per second each process spends with no pod being created (informers, leases,
    controllers): subtracted from its rounds, so a slower webhook is not charged for waiting."""
    pids = processes()
    before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    time.sleep(seconds)
    return {name: (tree_cpu_seconds(pid) - before[name]) / seconds for name, pid in pids.items()}


def report(runs: list[dict[str, Any]], idle: dict[str, float], mode: str) -> list[str]:
    """One line per target: medians over rounds (spread in brackets) of what each round measured."""
    rounds = sorted({r["round"] for r in runs})
    by = {(r["round"], r["target"]): r for r in runs}

    def cpu_us(r: dict[str, Any], name: str) -> float:
        return (r["cpu"][name] - idle[name] * r["wall"]) / r["count"] * 1e6

    lines = [f"{mode:16} p50 ms             p99 ms              added p50 ms       added p99 ms        "
             "pods/s         webhook CPU µs/pod   API server CPU µs/pod"]
    for target in peers.TARGETS:
        mine = [by[(n, target)] for n in rounds]
        added50 = [by[(n, target)]["p50"] - by[(n, "none")]["p50"] for n in rounds]
        added99 = [by[(n, target)]["p99"] - by[(n, "none")]["p99"] for n in rounds]
        component = WEBHOOKS.get(target)
        cpu = [cpu_us(r, component) for r in mine] if component else []
        lines.append(f"  {target:14} {spread([r['p50'] for r in mine]):18} {spread([r['p99'] for r in mine]):19} "
                     f"{spread(added50) if component else '-':18} {spread(added99) if component else '-':19} "
                     f"{spread([r['rps'] for r in mine], digits=0):14} {spread(cpu, digits=0):20} "
                     f"{spread([cpu_us(r, 'kube-apiserver') for r in mine], digits=0)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", type=Path, required=True, help="a gatekeeper-library checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pods", type=int, default=300, help="pods per target, round and mode")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rate", type=float, default=25.0, help="pods/s of the fixed-rate mode")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of each round's idle measurement")
    parser.add_argument("--json", type=Path, help="also write every round's figures here")
    args = parser.parse_args()
    if not (args.library / "library" / "pod-security-policy").is_dir():
        sys.exit(f"peers: {args.library} is not a gatekeeper-library checkout (no library/pod-security-policy)")

    if not cluster.readiness():
        cluster.up()
    peers.namespaces()
    peers.scope_vgate()
    if not cluster.running("gatekeeper"):
        peers.start_gatekeeper(args.library)
    if not cluster.running("kyverno"):
        peers.start_kyverno()
    client = Client()
    try:
        check_policies(client)
        print(f"whole job, as each whole-job target stores the pod: {check_whole_job(client)}", file=sys.stderr)
        for target in peers.TARGETS:  # warm every path: connections, caches, compiled policies
            one_run(client, target, 50, args.concurrency, None)
        runs: dict[str, list[dict[str, Any]]] = {"concurrency": [], "rate": []}
        idle: list[dict[str, float]] = []
        for n in range(args.rounds):
            idle.append(idle_rates(args.idle))
            shift = n % len(peers.TARGETS)
            order = peers.TARGETS[shift:] + peers.TARGETS[:shift]
            for target in order:
                runs["concurrency"].append({**one_run(client, target, args.pods, args.concurrency, None), "round": n})
                runs["rate"].append({**one_run(client, target, args.pods, args.concurrency, args.rate), "round": n})
            print(f"round {n + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        peers.restore_vgate()
    print(f"{args.pods} dry-run pod creates per target, mode and round, {args.rounds} interleaved rounds "
          f"(medians, spread in brackets); concurrency {args.concurrency}; fixed rate {args.rate:g} pods/s")
    idle_median = {name: statistics.median(i[name] for i in idle) for name in idle[0]}
    print("idle CPU (subtracted): " + ", ".join(f"{name} {rate * 1e3:.1f} ms/s" for name, rate in idle_median.items()))
    print("\n".join(report(runs["concurrency"], idle_median, f"concurrency {args.concurrency}")))
    print("\n".join(report(runs["rate"], idle_median, f"rate {args.rate:g}/s")))
    print("webhook calls per pod (the API server's count, reinvocations included; median over rounds):")
    for target in peers.TARGETS:
        mine = [r["calls"] for r in runs["concurrency"] if r["target"] == target]
        # other webhooks' stray calls in the same interval (their own objects, leases) round to nothing
        names = sorted({name for calls in mine for name in calls if statistics.median(
            c.get(name, 0.0) for c in mine) >= 0.01})
        print(f"  {target:16} " + (", ".join(f"{name} {statistics.median(c.get(name, 0.0) for c in mine):.2f}"
                                              for name in names) or "none"))
    if args.json:
        args.json.write_text(json.dumps({"idle": idle, **runs}, indent=1))


if __name__ == "__main__":
    main()
